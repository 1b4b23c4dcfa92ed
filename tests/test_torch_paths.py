"""torch's own optimizer code paths as backends (``foreach``, ``fused``: conformance/backends/torch_paths.py)
and their differential twins (``paths-agree``), in this process (issue 28)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance_runs import load, run_inprocess
from conformance.backends import builtin_backends
from conformance.backends.torch_paths import FUSED_SGD_HALF_VECTOR, TorchPathBackend
from conformance.cases.checks import check_paths_agree
from conformance.cases.trial import DivergenceObserved, Trial
from conformance.ops import OPS
from conformance.ops.optimizers.inputs import OptimizerInputs
from conformance.core.tensors import CooArray
from conformance.core.types import Mismatch, RunContext, Unsupported

SPARSE = CooArray(np.array([[2, 0, 2]], dtype=np.int64), np.array([1.0, -0.5, 0.5]), (4,))
DENSE = np.array([1.0, -0.5, 0.25, 2.0])
PARAM = np.array([1.0, -2.0, 0.5, 3.0])


def _inputs(*grads, **hyper) -> OptimizerInputs:
    return OptimizerInputs(PARAM.copy(), list(grads), {"lr": 0.5, **hyper})


def test_foreach_and_fused_items_pass_for_adagrad_and_sgd_on_cpu():
    """The spec items of both paths (float64): the dense-gradient cases pass on both, the sparse ones
    pass on SGD's foreach step, and every other item is unsupported with torch's reason, never failed."""
    code, path = run_inprocess("torch-paths", "specs", "--conformance-backend", "foreach,fused", "--conformance-dtype",
                               "float64", "-k", "not generated and (adagrad or sgd)")
    records = load(path)["records"]
    assert code == 0, [(r["case"], r["backend"], r["outcome"]) for r in records if r["outcome"] not in
                       ("passed", "unsupported", "xfailed")]
    passed = {(r["op"], r["backend"]) for r in records if r["outcome"] == "passed"}
    assert passed >= {("adagrad", "foreach"), ("adagrad", "fused"), ("sgd", "foreach"), ("sgd", "fused")}, passed
    assert not {r["op"] for r in records} - {"adagrad", "sgd"}  # SparseAdam has no foreach or fused step
    unsupported = [r for r in records if r["outcome"] == "unsupported"]
    assert unsupported and all(r["backend"] != "foreach" or r["op"] == "adagrad" for r in unsupported)


@pytest.mark.parametrize("path, op, reason", [
    ("fused", "adagrad", "`fused` does not support sparse grad or complex param"),
    ("fused", "sgd", "`_fused_sgd` does not support sparse gradients"),
    ("foreach", "adagrad", "runs its for-loop step"),
])
def test_a_sparse_gradient_a_path_does_not_run_is_unsupported_with_torchs_reason(path, op, reason):
    backend = builtin_backends()[path]
    with pytest.raises(Unsupported, match="(?s)" + reason.replace("(", r"\(").replace("`", "`")):
        backend.run(op, _inputs(SPARSE), RunContext("cpu", torch.float64))
    backend.run(op, _inputs(DENSE), RunContext("cpu", torch.float64))  # a dense gradient runs


def test_torchs_foreach_adagrad_on_a_sparse_gradient_is_its_for_loop_step():
    """What makes Adagrad's foreach items on sparse gradients unsupported: torch 2.13 runs the for-loop
    step there (_multi_tensor_adagrad hands the tensors to _single_tensor_adagrad), bit for bit."""
    results = []
    for foreach in (True, False):
        param = torch.tensor(PARAM, dtype=torch.float32)
        optimizer = torch.optim.Adagrad([param], lr=0.5, foreach=foreach)
        for _ in range(2):
            param.grad = SPARSE.to_torch(torch.float32)
            optimizer.step()
        results.append((param.clone(), optimizer.state[param]["sum"].clone()))
    assert all(torch.equal(a, b) for a, b in zip(*results))


def test_sgds_foreach_step_takes_sparse_gradients_and_equals_the_for_loop():
    foreach, coo = builtin_backends()["foreach"], builtin_backends()["coo"]
    inputs = _inputs(SPARSE, SPARSE, momentum=0.9, nesterov=True)
    ctx = RunContext("cpu", torch.float32)
    assert torch.equal(foreach.run("sgd", inputs, ctx)["param"], coo.run("sgd", inputs, ctx)["param"])


@pytest.mark.parametrize("op, name", [("adagrad", "SlipForeachAdagrad"), ("sgd", "SlipForeachSGD")])
def test_the_twin_fails_for_a_foreach_step_with_a_slip(op, name):
    """paths-agree can fail: a foreach step with a 1% larger learning rate differs from the for-loop step."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("paths_candidates", Path(__file__).parent / "candidates" / "paths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    wrong = TorchPathBackend("foreach", {op: getattr(module, name)}, name="slipped-foreach")
    right = builtin_backends()["foreach"]
    inputs = _inputs(DENSE, DENSE)
    check_paths_agree(Trial(OPS[op], right, "cpu", "float64"), inputs)  # torch's own: bit for bit
    with pytest.raises(Mismatch, match="for-loop step"):
        check_paths_agree(Trial(OPS[op], wrong, "cpu", "float64"), inputs)


def test_foreach_on_cpu_is_held_to_the_for_loops_bits_where_its_torch_path_declares_it(monkeypatch):
    """A foreach step one ulp off fails the twin on cpu (TorchPath.bit_exact_on), and passes it where the
    record declares no bit-exact device (the agreement tolerance allows an ulp)."""
    import dataclasses
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("paths_candidates", Path(__file__).parent / "candidates" / "paths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    inputs = _inputs(DENSE, DENSE)
    ulp_off = TorchPathBackend("foreach", {"adagrad": module.UlpForeachAdagrad}, name="ulp-foreach")
    with pytest.raises(Mismatch, match="not bit-for-bit equal"):
        check_paths_agree(Trial(OPS["adagrad"], ulp_off, "cpu", "float64"), inputs)
    loose = tuple(dataclasses.replace(path, bit_exact_on=()) for path in OPS["adagrad"].torch_paths)
    monkeypatch.setitem(OPS, "adagrad", dataclasses.replace(OPS["adagrad"], torch_paths=loose))
    check_paths_agree(Trial(OPS["adagrad"], ulp_off, "cpu", "float64"), inputs)


def test_fused_sgd_leaves_a_half_parameters_vectorized_entries_unmoved():
    """torch's fused SGD on cpu in float16 up to 2.13: a 16-entry parameter does not move (the registered
    divergence explains it); 15 entries move as the for-loop step moves them. torch 2.14 fixed it: there
    every entry moves and the twin agrees (the divergence, limited to "<2.14", is not looked up)."""
    fused = builtin_backends()["fused"]
    ones = OptimizerInputs(np.ones(16), [np.ones(16)], {"lr": 1.0})
    moved = fused.run("sgd", ones, RunContext("cpu", torch.float16))["param"].numpy()
    if FUSED_SGD_HALF_VECTOR.shown_by():
        assert np.array_equal(moved, np.ones(16))
        with pytest.raises(DivergenceObserved) as observed:
            check_paths_agree(Trial(OPS["sgd"], fused, "cpu", "float16"), ones)
        assert observed.value.divergence is FUSED_SGD_HALF_VECTOR
    else:
        assert np.array_equal(moved, np.zeros(16))
        check_paths_agree(Trial(OPS["sgd"], fused, "cpu", "float16"), ones)
    short = OptimizerInputs(np.ones(15), [np.ones(15)], {"lr": 1.0})
    check_paths_agree(Trial(OPS["sgd"], fused, "cpu", "float16"), short)


@pytest.mark.parametrize("start, step", [(1.0, 0.5), (100.0, 0.5), (100.0, 2.5), (1000.0, 2.5)])
def test_unmoved_vectorized_entries_are_named_as_such_not_as_rounding(start, step):
    """torch 2.13's fused SGD in bfloat16 leaves a 16-entry parameter of 100 where the step of 0.5 gives
    99.5 (1 ulp): within a correct implementation's tolerance, so "rounds otherwise" (torch-fused-rounding)
    also accepted it, and the twin named it, on the nox session's drawn examples. The bug is tried first;
    on torch 2.14 and later every entry moves and the twin agrees."""
    fused = builtin_backends()["fused"]
    inputs = OptimizerInputs(np.full(16, start), [np.full(16, step)], {"lr": 1.0})
    trial = Trial(OPS["sgd"], fused, "cpu", "bfloat16")
    if not FUSED_SGD_HALF_VECTOR.shown_by():
        check_paths_agree(trial, inputs)
        return
    with pytest.raises(DivergenceObserved) as observed:
        check_paths_agree(trial, inputs)
    assert observed.value.divergence is FUSED_SGD_HALF_VECTOR


@pytest.mark.parametrize("version, shown", [("2.9.0+cu128", True), ("2.13.0+cpu", True), ("2.14.0+cu130", False),
                                            ("2.14.1", False), ("2.15.0+cu132", False)])
def test_the_fused_sgd_half_divergence_is_torchs_up_to_2_13(version, shown):
    """Measured on torch 2.13.0 (+cpu and +cu130 wheels, this machine's CPU) and 2.9.0 (the XLA session):
    every vectorized entry unmoved; on 2.14.0, 2.14.1 and 2.15.0 every entry moves. The registered
    divergence and the spec case's entry name the same releases."""
    from pathlib import Path

    from conformance.core.divergences import lookup
    from conformance.specs.load import load_spec

    assert FUSED_SGD_HALF_VECTOR.shown_by(version) is shown
    assert (FUSED_SGD_HALF_VECTOR in lookup(op="sgd", backend="fused", device="cpu", dtype="float16",
                                            property="paths-agree", torch=version)) is shown
    spec = load_spec(Path(__file__).resolve().parents[1] / "specs" / "sgd.yaml")
    case = next(case for case in spec.cases if case.id == "dense-step-of-sixteen-entries")
    assert [entry.torch for entry in case.known_divergences] == [FUSED_SGD_HALF_VECTOR.torch]


def test_on_a_release_the_divergence_does_not_name_the_same_values_fail(monkeypatch):
    """The spec item runs through the plugin: an xfail on the torch that shows the bug (the releases
    the entry names); on a release it does not name, the same values are a failure, never excused --
    here this torch's values with its version read as 2.15.0 (no xpass to overlook either)."""
    args = ("specs/sgd.yaml", "--conformance-backend", "fused", "--conformance-dtype", "float16",
            "-k", "dense-step-of-sixteen-entries and not generated")
    fixed = not FUSED_SGD_HALF_VECTOR.shown_by()
    code, path = run_inprocess("fused-sgd-half-this-torch", *args)
    outcomes = {r["case"]: r["outcome"] for r in load(path)["records"]}
    assert outcomes == {"dense-step-of-sixteen-entries": "passed" if fixed else "xfail"} and code == 0, outcomes
    if fixed:
        return  # this torch moves every entry: no buggy values to show under another version
    monkeypatch.setattr(torch, "__version__", "2.15.0")
    code, path = run_inprocess("fused-sgd-half-as-2.15", *args)
    outcomes = {r["case"]: r["outcome"] for r in load(path)["records"]}
    assert outcomes == {"dense-step-of-sixteen-entries": "failed"} and code == 1, outcomes


@pytest.mark.parametrize("slipped, fails", [("_multi_tensor_adagrad", "foreach"), ("_fused_adagrad", "fused")])
def test_a_slip_planted_in_torchs_own_path_fails_that_paths_twin_only(monkeypatch, slipped, fails):
    """Issue 28's planted slip: a 1% larger learning rate in torch's own _multi_tensor_adagrad (or
    _fused_adagrad) fails the twin of that path only; the other path's twin still passes."""
    import torch.optim.adagrad as adagrad_module

    original = getattr(adagrad_module, slipped)

    def with_slip(*args, lr, **kwargs):
        return original(*args, lr=lr * 1.01, **kwargs)

    monkeypatch.setattr(adagrad_module, slipped, with_slip)
    inputs = _inputs(DENSE, DENSE)
    for path in ("foreach", "fused"):
        trial = Trial(OPS["adagrad"], builtin_backends()[path], "cpu", "float64")
        if path == fails:
            with pytest.raises(Mismatch, match="for-loop step"):
                check_paths_agree(trial, inputs)
        else:
            check_paths_agree(trial, inputs)


def test_foreach_adagrads_float16_numerator_overflow_is_torchs_divergence_not_a_failure():
    """Found by the main job at 100 examples, seed 5 (2026-11-26): lr 10000 and a dense gradient of 8 in
    float16. torch's foreach Adagrad stores -clr * grad = -80000 in float16 (-inf) before dividing by
    std = 8; its for-loop step divides first and gives -10000. The twin named no divergence and failed
    stock torch's foreach item."""
    from conformance.backends.torch_paths import FOREACH_ADAGRAD_NUMERATOR_OVERFLOW

    inputs = OptimizerInputs(np.ones((2, 2)), [np.array([[1.0, 1.0], [1.0, 8.0]])], {"lr": 1e4, "eps": 1e-10})
    trial = Trial(OPS["adagrad"], builtin_backends()["foreach"], "cpu", "float16")
    assert torch.isinf(trial.run(inputs)["param"][1, 1])  # torch's own behaviour, as described
    with pytest.raises(DivergenceObserved) as observed:
        check_paths_agree(trial, inputs)
    assert observed.value.divergence is FOREACH_ADAGRAD_NUMERATOR_OVERFLOW


def test_an_inf_where_no_numerator_overflows_is_still_a_failure():
    """The divergence explains an inf only at the entries whose |grad| * clr is beyond float16: a foreach
    step that writes inf elsewhere fails its twin."""
    from conformance.backends.torch_paths import _numerator_overflows

    inputs = OptimizerInputs(np.ones(2), [np.array([1.0, 8.0])], {"lr": 1e4})
    loop = {"param": np.array([-9999.0, -9999.0])}
    assert _numerator_overflows(inputs, {"param": np.array([-9999.0, -np.inf])}, loop, lambda: False)
    assert not _numerator_overflows(inputs, {"param": np.array([-np.inf, -9999.0])}, loop, lambda: False)
    assert not _numerator_overflows(inputs, {"param": np.array([-9000.0, -np.inf])}, loop, lambda: False)
    small = OptimizerInputs(np.ones(2), [np.array([1.0, 8.0])], {"lr": 1.0})
    assert not _numerator_overflows(small, {"param": np.array([0.0, -np.inf])}, {"param": np.zeros(2)}, lambda: False)
