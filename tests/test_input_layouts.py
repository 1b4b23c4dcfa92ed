"""Layout as a dimension of every example (conformance/core/layouts.py) and the property
layout-invariant (conformance/cases/checks.py): placing, the guard around a view, torch's own
divergences it finds, and planted candidates failing with the layout named. In process: the fast tier."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.backends import builtin_backends
from conformance.backends.candidate import CandidateBackend
from conformance.cases.input_layouts import check_layout_invariant
from conformance.cases.trial import DivergenceObserved, Trial
from conformance.core.divergences import lookup
from conformance.core.layouts import CHANNELS_LAST, STRIDED, TRANSPOSED, Layout, outside_changed, place
from conformance.core.tensors import CooArray
from conformance.core.types import Mismatch
from conformance.ops import OPS

from candidates.layouts import StorageOrderGradAdagrad, WritesPastTheViewSGD


@pytest.mark.parametrize("layout, shape", [(Layout(STRIDED, 1, 2), (2, 3)), (Layout(STRIDED, 3, 1), (4,)),
                                           (Layout(TRANSPOSED), (2, 3, 2)), (Layout(CHANNELS_LAST), (1, 2, 2, 3)),
                                           (Layout(STRIDED, 2, 1), ())])
def test_a_placed_tensor_holds_the_same_values_in_its_layout(layout, shape):
    values = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
    placed = place("param", values, layout)
    assert torch.equal(placed.handed, values) and placed.handed.shape == values.shape
    assert placed.handed.storage_offset() == layout.offset
    if layout.kind == CHANNELS_LAST:
        assert placed.handed.is_contiguous(memory_format=torch.channels_last) and not placed.handed.is_contiguous()
    elif shape:
        assert not placed.handed.is_contiguous() or layout.offset
    assert outside_changed(placed) is None


def test_a_write_outside_the_view_is_named():
    placed = place("param", torch.ones(2, 2), Layout(STRIDED, 1, 2))
    placed.handed.add_(1)  # inside: fine
    assert outside_changed(placed) is None
    placed.storage[0] = 5.0  # the offset's entry, before the view
    assert "param (strided(offset=1, step=2)): 1 storage entries outside the view changed" in outside_changed(placed)


def _trial(op: str, backend, dtype: str = "float32") -> Trial:
    return Trial(OPS[op], backend, "cpu", dtype)


@pytest.mark.parametrize("op, backend", [("adagrad", "coo"), ("sgd", "foreach"), ("coalesce", "coo"),
                                         ("masked_mean", "dense"), ("sparse_adam", "masked")])
def test_stock_torch_and_the_suites_backends_are_layout_invariant_on_the_explicit_examples(op, backend):
    trial = _trial(op, builtin_backends()[backend])
    for example in OPS[op].layout_examples("float32"):
        check_layout_invariant(trial, example)


@pytest.mark.parametrize("op", ["adagrad", "sgd"])
def test_torchs_fused_cpu_step_on_a_strided_parameter_is_its_recorded_divergence(op):
    """torch 2.13's fused Adagrad/SGD walk data_ptr() linearly: the explicit 2 x 3 strided view shows it, and
    the model (the same step on the storage window) reproduces it bit for bit."""
    trial = _trial(op, builtin_backends()["fused"])
    divergence = lookup(op=op, backend="fused", device="cpu", dtype="float32", property="layout-invariant")
    if not divergence:
        pytest.skip("this torch release is not one the divergence names")
    example = OPS[op].layout_examples("float32")[0]
    with pytest.raises(DivergenceObserved) as observed:
        check_layout_invariant(trial, example)
    assert observed.value.divergence.key == "torch-fused-cpu-walks-storage-linearly"
    assert "param strided(offset=1, step=2)" in observed.value.detail


def test_torchs_one_entry_sparse_add_on_an_offset_parameter_is_its_recorded_divergence():
    """dense.add_(sparse) with nnz 1 adds the storage offset twice (torch 2.13, cpu): SparseAdam's step on a
    one-entry parameter at storage offset 1 leaves it unmoved."""
    from conformance.ops.optimizers.inputs import OptimizerInputs
    from conformance.core.tensors import CooArray
    import numpy as np

    if not lookup(op="sparse_adam", backend="coo", device="cpu", dtype="float64", property="layout-invariant"):
        pytest.skip("this torch release is not one the divergence names")
    inputs = OptimizerInputs(np.array([1.0]), [CooArray(np.array([[0]]), np.array([1.0]), (1,))],
                             {"lr": 1.0, "eps": 1e-10, "betas": (0.9, 0.9)})
    with pytest.raises(DivergenceObserved) as observed:
        check_layout_invariant(_trial("sparse_adam", builtin_backends()["coo"], "float64"),
                               (inputs, {"param": Layout(STRIDED, 1, 1)}))
    assert observed.value.divergence.key == "torch-dense-add-one-entry-sparse-misplaced"


@pytest.mark.parametrize("op, candidate, example, named", [
    ("adagrad", StorageOrderGradAdagrad, 1, "grad transposed"),
    ("sgd", WritesPastTheViewSGD, 0, "param strided(offset=1, step=2)"),
])
def test_a_planted_layout_mistake_fails_and_names_the_layout(op, candidate, example, named):
    backend = CandidateBackend("candidate", {op: candidate})
    with pytest.raises(Mismatch) as failed:
        check_layout_invariant(_trial(op, backend), OPS[op].layout_examples("float32")[example])
    assert str(failed.value).startswith(f"layout {named}:"), failed.value


def test_writing_past_a_view_is_caught_by_the_guard_even_where_the_view_reads_right():
    backend = CandidateBackend("candidate", {"sgd": WritesPastTheViewSGD})
    with pytest.raises(Mismatch, match="storage entries outside the view changed|not bit-for-bit"):
        check_layout_invariant(_trial("sgd", backend), OPS["sgd"].layout_examples("float32")[0])


def test_a_torch_divergence_seen_by_layout_invariant_gets_a_torch_only_reproducer_that_shows_it(tmp_path):
    """The script imports only torch, runs from any directory and exits 1 while torch shows the divergence."""
    import runpy
    import sys

    from conformance.cases.torch_repro import write_layout_reproducers

    fused = builtin_backends()["fused"]
    divergence = lookup(op="sgd", backend="fused", device="cpu", dtype="float32", property="layout-invariant")
    if not divergence:
        pytest.skip("this torch release is not one the divergence names")
    example = OPS["sgd"].layout_examples("float32")[0]
    written = write_layout_reproducers(tmp_path, "sgd-layout-invariant[fused-cpu-float32]",
                                       fused.optimizer_class("sgd"), "float32",
                                       {divergence[0].key: (divergence[0], "", example)})
    assert len(written) == 1
    script = written[0].read_text()
    imports = {line.split()[1] for line in script.splitlines() if line.startswith(("import ", "from "))}
    assert imports == {"platform", "sys", "torch"}, imports
    assert "torch.optim.SGD([param], **{'lr': 0.5, 'momentum': 0.5, 'fused': True})" in script
    before = set(sys.modules)
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(written[0]), run_name="__main__")
    assert exited.value.code == 1  # torch 2.13/2.14 show it
    assert not any(name.startswith("conformance") for name in set(sys.modules) - before)
    # on a torch that cannot run the example (here: a keyword it lacks, as fused= on 2.1) it exits 3, not 1
    lacking = tmp_path / "lacking.py"
    lacking.write_text(script.replace("'fused': True", "'no_such_keyword': True"))
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(lacking), run_name="__main__")
    assert exited.value.code == 3


def test_the_cuda_layout_divergences_name_the_examples_the_h200_run_shrank_to():
    """The two CUDA divergences registered from one GPU run (docs/findings.md) hold its shrunk examples, and not
    the same examples laid out contiguously (nothing here needs CUDA: the triggers read the placements)."""
    from conformance.backends.coo import ONE_ENTRY_SPARSE_ADD_CUDA
    from conformance.backends.torch_paths import FUSED_CUDA_REFUSES_MIXED_STRIDES
    from conformance.core.layouts import Layout, place
    from conformance.ops.optimizers.inputs import OptimizerInputs

    param = torch.ones(1, 2, 3, dtype=torch.float64)
    one_entry = OptimizerInputs(param=param.numpy(), grads=[CooArray(np.array([[0], [0], [1]]), np.array([1.0]),
                                                                     (1, 2, 3))], hyperparameters={"lr": 1.0})
    transposed = [place("param", param, Layout("transposed"))]
    contiguous = [place("param", param, Layout("contiguous"))]
    assert ONE_ENTRY_SPARSE_ADD_CUDA.triggered(one_entry, transposed)
    assert not ONE_ENTRY_SPARSE_ADD_CUDA.triggered(one_entry, contiguous)

    p2 = torch.tensor([[1.0, -2.0, 0.5], [3.0, -1.0, 2.0]])
    dense = OptimizerInputs(param=p2.numpy(), grads=[p2.numpy()], hyperparameters={"lr": 0.5, "momentum": 0.5})
    strided_param = [place("param", p2, Layout("strided", offset=1, step=2)), place("grad", p2, Layout("contiguous"))]
    assert FUSED_CUDA_REFUSES_MIXED_STRIDES.triggered(dense, strided_param)
    same = [place("param", p2, Layout("contiguous")), place("grad", p2, Layout("contiguous"))]
    assert not FUSED_CUDA_REFUSES_MIXED_STRIDES.triggered(dense, same)
    assert FUSED_CUDA_REFUSES_MIXED_STRIDES.kind == "error" and FUSED_CUDA_REFUSES_MIXED_STRIDES.devices == ("cuda",)


def _strided_spec_case():
    from conformance_runs import REPO

    from conformance.specs.load import load_spec

    spec = load_spec(REPO / "specs" / "adagrad.yaml")
    return next(case for case in spec.cases if case.id == "dense-steps-on-a-strided-parameter")


def test_a_spec_case_naming_a_layout_hands_the_parameter_over_as_that_view():
    """specs/adagrad.yaml's dense-steps-on-a-strided-parameter: the coo backend (torch's for-loop step) meets its
    golden values on the view; torch's fused step is its recorded divergence; a candidate that writes into the
    storage around the view fails naming the layout."""
    from conformance.judging.runner import run_item

    case = _strided_spec_case()
    assert case.layouts == {"param": Layout(STRIDED, 1, 2)}
    ctx = run_item(case, builtin_backends()["coo"], "cpu", "float64")
    assert [p.role for p in ctx.placements][:1] == ["param"] and ctx.placements[0].view.storage_offset() == 1
    with pytest.raises(Mismatch, match="param differs from the golden values"):  # the plugin makes it xfail:
        run_item(case, builtin_backends()["fused"], "cpu", "float32")
    assert "walks the parameter's storage" in case.divergence_for("fused", "cpu", "float32").reason

    class WritesBeforeTheViewAdagrad(torch.optim.Adagrad):
        @torch.no_grad()
        def step(self, closure=None):
            result = super().step(closure)
            for group in self.param_groups:
                for p in group["params"]:
                    if p.storage_offset():
                        p.as_strided((1,), (1,), p.storage_offset() - 1).add_(1.0)
            return result

    with pytest.raises(Mismatch, match=r"layout param \(strided\(offset=1, step=2\)\): 1 storage entries outside"):
        run_item(case, CandidateBackend("candidate", {"adagrad": WritesBeforeTheViewAdagrad}), "cpu", "float64")


@pytest.mark.slow  # a search that shrinks, and the counterexample's spec run on the other backends: 8-10 s
def test_a_layout_counterexample_spec_declares_the_layouts_and_fails_as_a_spec_case(tmp_path):
    """The counterexample spec of a layout-invariant failure hands its inputs over in the failing layouts
    (the case's ``layouts:``), so the spec case alone reproduces it, not only the script."""
    import yaml

    from conformance_runs import load, run_inprocess
    from conformance.specs.load import load_spec

    code, path = run_inprocess("layout-counterexample", "specs", "--conformance-op", "adagrad",
                               "--conformance-backend", "candidate", "--conformance-examples", "2",
                               "--conformance-impl", "adagrad=tests/candidates/layouts.py:StorageOrderGradAdagrad",
                               "-k", "layout-invariant and float32", f"--conformance-counterexamples={tmp_path}")
    (record,) = load(path)["records"]
    assert record["outcome"] == "failed" and "grad transposed" in record["message"], record["message"][:2000]
    (spec,) = tmp_path.glob("*.yaml")
    (case,) = yaml.safe_load(spec.read_text())["cases"]
    assert case["layouts"] == {"grad": "transposed"}, case
    (loaded,) = load_spec(spec).cases
    assert loaded.layouts["grad"] == Layout(TRANSPOSED)
    assert "spec case" in record["message"] and ": fails (" in record["message"], record["message"][-1500:]
