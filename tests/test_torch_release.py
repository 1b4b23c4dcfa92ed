"""What an older torch release lacks is its items' ``unsupported`` ("not in torch X.Y: ..."), never an
error of the suite's or a crash at startup (conformance/core/torch_release.py; issue 51)."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from conformance.backends.torch_paths import path_class
from conformance.core import torch_release
from conformance.core.torch_release import NOT_IN_TORCH, NotInTorch, at_least, require
from conformance.core.types import Unsupported
from conformance.run.generated_plugin import _import_package


def test_the_release_is_read_from_the_installed_torch():
    major, minor = (int(part) for part in torch.__version__.split(".")[:2])
    assert torch_release.RELEASE == (major, minor)
    assert NOT_IN_TORCH == f"not in torch {major}.{minor}"
    assert at_least(f"{major}.{minor}") and at_least("2.1") and not at_least(f"{major}.{minor + 1}")


def test_what_a_release_lacks_is_unsupported_naming_the_release_and_since_when():
    require(torch_release.OLDEST, "anything")  # the running torch has what the oldest has
    with pytest.raises(NotInTorch) as raised:
        require("99.0", "torch.frobnicate")
    assert isinstance(raised.value, Unsupported)
    assert str(raised.value) == f"{NOT_IN_TORCH}: torch.frobnicate (torch 99.0 and later)"


class SGDBeforeFused(torch.optim.SGD):
    """torch.optim.SGD as torch 2.1 has it: no ``fused=`` keyword."""

    def __init__(self, params, lr=0.1, momentum=0.0, weight_decay=0.0):
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay)


def test_a_path_whose_keyword_the_release_lacks_is_not_in_torch_not_a_type_error():
    param = torch.nn.Parameter(torch.zeros(3))
    cls = path_class(SGDBeforeFused, "fused", {"fused": True}, None)
    with pytest.raises(NotInTorch, match=r"not in torch \d+\.\d+: torch.optim.SGDBeforeFused's keyword fused="):
        cls([param], lr=0.5)
    # the keyword the release has still constructs it
    assert path_class(torch.optim.SGD, "foreach", {"foreach": True}, None)([param], lr=0.5).defaults["foreach"]


def test_a_module_the_release_cannot_import_is_left_out_of_the_suites_import(tmp_path, monkeypatch):
    package = tmp_path / "oldtorchpkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "fine.py").write_text("VALUE = 1\n")
    (package / "sub" / "__init__.py").write_text(textwrap.dedent("""\
        from conformance.core.torch_release import require
        require("99.0", "torch.frobnicate")
    """))
    (package / "sub" / "inner.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    import oldtorchpkg

    try:
        _import_package(oldtorchpkg)
        assert "oldtorchpkg.fine" in sys.modules
        assert "oldtorchpkg.sub" not in sys.modules and "oldtorchpkg.sub.inner" not in sys.modules
    finally:
        for name in [n for n in sys.modules if n.startswith("oldtorchpkg")]:
            del sys.modules[name]


def test_a_compile_failure_wrapping_inductors_refusal_further_down_is_unsupported():
    """torch 2.4.1: BackendCompilerFailed <- LoweringException <- NotImplementedError ("could not find
    kernel for aten._coalesce.default"); the compiled coalesce items were errors there."""
    from conformance.backends.compiled import _not_implemented

    refusal = NotImplementedError("could not find kernel for aten._coalesce.default at dispatch key CPU")
    try:
        try:
            raise refusal
        except NotImplementedError as exc:
            raise RuntimeError("LoweringException: NotImplementedError: ...") from exc
    except RuntimeError as lowering:
        wrapped = lowering
    outer = Exception("BackendCompilerFailed")
    outer.inner_exception = wrapped
    assert _not_implemented(outer) is refusal
    assert _not_implemented(Exception("another failure")) is None


class FusedSGDWithoutCPUKernel(torch.optim.SGD):
    """torch.optim.SGD(fused=True) as torch 2.3 has it on cpu: the keyword, and no CPU kernel."""

    overload = ""

    def step(self, closure=None):
        raise NotImplementedError(f"Could not run 'aten::_fused_sgd_{self.overload}' with arguments from the 'CPU' "
                                  "backend. This could be because the operator doesn't exist for this backend")


def test_a_fused_kernel_the_release_lacks_for_the_device_is_not_in_torch():
    param = torch.nn.Parameter(torch.zeros(3))
    param.grad = torch.ones(3)
    optimizer = path_class(FusedSGDWithoutCPUKernel, "fused", {}, None)([param], lr=0.5)
    with pytest.raises(NotInTorch, match=r"not in torch \d+\.\d+: the aten::_fused_sgd_ kernel for CPU tensors"):
        optimizer.step()
    # an overload (a tensor lr, 2.3.1's lifecycle items) is the same missing kernel
    FusedSGDWithoutCPUKernel.overload = ".tensor_lr"
    try:
        with pytest.raises(NotInTorch, match=r"the aten::_fused_sgd_\.tensor_lr kernel for CPU tensors"):
            optimizer.step()
    finally:
        del FusedSGDWithoutCPUKernel.overload


def test_a_backend_whose_optimizer_class_the_release_lacks_still_gets_its_items_at_collection():
    """On torch 2.1.2 the kernel backend's optimizer classes raise NotInTorch when asked for (the kernels need
    torch 2.5): collecting the generated properties asked for them and failed (`pytest specs` exited 2). The
    backend keeps its items, which say "not in torch 2.1" one by one when they run."""
    from conformance.backends.base import Backend
    from conformance.cases.trial import Property

    class KernelsBefore25(Backend):
        name = "kernels-before-2-5"

        def __init__(self):
            super().__init__({"sgd": lambda inputs, ctx: None})

        def optimizer_class(self, op):
            require("99.0", "torch.library.custom_op")

    prop = Property("sgd", "lifecycle", "", None, lambda trial, example: None, needs_optimizer_object=True)
    assert prop.accepts(KernelsBefore25())


class SGDFusedRealOnly(torch.optim.SGD):
    """torch.optim.SGD as torch 2.4 has it: fused= refuses complex parameters at construction."""

    def __init__(self, params, lr=0.1, momentum=0.0, fused=None):
        params = list(params)
        if fused and any(p.is_complex() for p in params):
            raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported "
                               "devices: ['cuda', 'xpu', 'cpu', 'privateuseone'].")
        super().__init__(params, lr=lr, momentum=momentum)


def test_a_path_that_refuses_a_dtype_at_construction_is_unsupported_not_a_failure():
    """torch 2.4.1's fused SGD and Adagrad refuse complex parameters in __init__ (later releases take them):
    complex-agrees[fused] was `failed` there; the path's refusal is `unsupported`, quoting torch."""
    cls = path_class(SGDFusedRealOnly, "fused", {"fused": True}, None)
    with pytest.raises(Unsupported, match=r"torch's fused path: .* requires all the params to be floating point"):
        cls([torch.nn.Parameter(torch.zeros(2, dtype=torch.complex64))], lr=0.5)
    assert cls([torch.nn.Parameter(torch.zeros(2))], lr=0.5).defaults["lr"] == 0.5


# ------------------------------------------------------------------ an older release's errors, pinned

def _raising_property(error: BaseException):
    """A property of SGD whose check raises ``error`` on an example with a sparse gradient."""
    import numpy as np
    from hypothesis import strategies as st

    from conformance.cases.trial import Property
    from conformance.core.tensors import CooArray
    from conformance.ops.optimizers.inputs import OptimizerInputs

    example = OptimizerInputs(np.ones(3), [CooArray(np.array([[1]]), np.array([1.0]), (3,))], {"momentum": 0.9})

    def check(trial, inputs):
        raise error

    return Property("sgd", "paths-agree", "raises", lambda dtype: st.just(example), check)


def _search(error: BaseException):
    from hypothesis import settings

    from conformance.backends import builtin_backends
    from conformance.cases import search

    return search.run_property(_raising_property(error), builtin_backends()["foreach"], "cpu", "float64",
                               settings=settings(max_examples=2, database=None, deadline=None), base_seed=0)


FOREACH_SPARSE_TEXT = ("Could not run 'aten::_foreach_mul_.Scalar' with arguments from the 'SparseCPU' backend. "
                       "This could be because the operator doesn't exist for this backend")


@pytest.fixture
def foreach_sparse_on_this_release(monkeypatch):
    """torch 2.1-2.3's registered foreach-SGD error, as if the running torch were one of them."""
    from dataclasses import replace

    from conformance.backends.torch_paths import FOREACH_SGD_SPARSE
    from conformance.core import divergences

    monkeypatch.setitem(divergences._REGISTERED, FOREACH_SGD_SPARSE.key, replace(FOREACH_SGD_SPARSE, torch=None))
    return FOREACH_SGD_SPARSE.key


def test_a_registered_error_of_an_older_release_is_its_known_divergence_in_a_generated_item(
        foreach_sparse_on_this_release):
    from conformance.core.types import Mismatch

    raised = _search(NotImplementedError(FOREACH_SPARSE_TEXT))
    assert raised.failure is None and raised.divergences[foreach_sparse_on_this_release] >= 1
    # a check that reads the error as a mismatch (raised from it) is the same divergence
    try:
        raise NotImplementedError(FOREACH_SPARSE_TEXT)
    except NotImplementedError as exc:
        try:
            raise Mismatch("complex64: raises NotImplementedError on complex parameters") from exc
        except Mismatch as mismatch:
            wrapped = mismatch
    assert _search(wrapped).failure is None


def test_another_error_or_a_plain_mismatch_is_never_excused_by_it(foreach_sparse_on_this_release):
    from conformance.core.types import Mismatch

    for error in (NotImplementedError("Could not run 'aten::_foreach_mul_.Scalar' with arguments from the 'CPU' "
                                      "backend"), KeyError("momentum_buffer"), Mismatch("param differs")):
        result = _search(error)
        assert result.failure is not None and not result.divergences, error


def test_the_registered_error_is_not_excused_on_a_release_outside_its_range():
    from conformance.backends.torch_paths import FOREACH_SGD_SPARSE

    assert not FOREACH_SGD_SPARSE.shown_by("2.13.0") and FOREACH_SGD_SPARSE.shown_by("2.3.1")
    if FOREACH_SGD_SPARSE.shown_by():
        pytest.skip("the running torch is in the registered range")  # (the oldest session's torch)
    result = _search(NotImplementedError(FOREACH_SPARSE_TEXT))
    assert result.failure is not None and not result.divergences
