"""torch's optimizer step under torch.compile as a backend (``compiled``: conformance/backends/compiled.py)
and its differential twin (``compiled-agrees``), in this process (issue 28). The first compile in a
process loads Inductor (several seconds); the graphs after it load from Inductor's cache."""

from __future__ import annotations

import dataclasses

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conformance_runs import REPO, base_args, load, run_inprocess
from conformance.backends import builtin_backends
from conformance.backends.compiled import COMPILED_ADAGRAD_LR_IN_FLOAT32, COUNTS_KEY, SPARSE_REASON
from conformance.core.record import INDUCTOR
from conformance.cases.checks import check_paths_agree
from conformance.cases.trial import DivergenceObserved, Trial
from conformance.core.tensors import CooArray
from conformance.core.types import Mismatch, RunContext, Unsupported
from conformance.ops import OPS
from conformance.ops.base import TorchPath
from conformance.ops.optimizers.inputs import OptimizerInputs

SPARSE = CooArray(np.array([[2, 0, 2]], dtype=np.int64), np.array([1.0, -0.5, 0.5]), (4,))
DENSE = np.array([1.0, -0.5, 0.25, 2.0])
PARAM = np.array([1.0, -2.0, 0.5, 3.0])
ADAGRAD, SGD = "adagrad", "sgd"


def _inputs(*grads, **hyper) -> OptimizerInputs:
    return OptimizerInputs(PARAM.copy(), list(grads), {"lr": 0.5, **hyper})


def _compiled():
    return builtin_backends()["compiled"]


@pytest.mark.parametrize("op, hyper, recompiles", [(ADAGRAD, {}, 0),
                                                   # the fast tier keeps Adagrad's; SGD's recompile, slow tier
                                                   pytest.param(SGD, {"momentum": 0.9}, 1, marks=pytest.mark.slow)])
@pytest.mark.slow
def test_the_compiled_step_equals_eager_and_its_counts_are_in_the_record(op, hyper, recompiles):
    """Two dense steps, float64: the compiled step gives eager's result (within the agreement tolerance:
    Inductor orders the arithmetic otherwise; lr = 0.5, exact in float32), and the record
    holds what Dynamo did: one graph on the first step; SGD compiles again on the second (its momentum
    buffer, None on the first step, is a tensor then); torch.optim's own graph breaks (_use_grad)."""
    ctx = RunContext("cpu", torch.float64)
    got = _compiled().run(op, _inputs(DENSE, DENSE, **hyper), ctx)
    want = builtin_backends()["coo"].run(op, _inputs(DENSE, DENSE, **hyper), RunContext("cpu", torch.float64))
    torch.testing.assert_close(got["param"], want["param"], rtol=2.0 ** -48, atol=0)
    assert COUNTS_KEY == "compiles" and "xla_compiles" not in ctx.record, ctx.record
    assert ctx.record[COUNTS_KEY]["compiler"] == INDUCTOR
    counts = ctx.record[COUNTS_KEY]["counts"]
    assert counts["steps"] == 2 and counts["dynamo_recompiles"] == recompiles, counts
    assert counts["dynamo_graphs"] == 1 + recompiles and counts["dynamo_graph_breaks"] >= 1, counts
    check_paths_agree(Trial(OPS[op], _compiled(), "cpu", "float64"), _inputs(DENSE, DENSE, **hyper))


@pytest.mark.slow
def test_the_counts_do_not_depend_on_whether_another_backend_built_the_optimizer_first(monkeypatch):
    """torch hooks a class's step() when the class is first constructed in a process; the compiled step
    traces that hook. Without the backend constructing the class itself, SGD with nesterov traced 5
    frames and broke once in a process where no SGD had been built, and 11 frames with 2 breaks after
    an item of the coo backend: records that changed with xdist's scheduling."""
    # torch's hook is on SGD.step once an SGD was built in this process (by an earlier test or not): build
    # one, so that "unhooked" is the step under it, not the step under _use_grad_for_differentiable
    torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    hooked = torch.optim.SGD.step
    assert getattr(hooked, "hooked", False), "torch no longer marks the hooked step"
    unhooked = hooked.__wrapped__
    runs = []
    for step in (unhooked, hooked):  # as in a process where no SGD was built yet, and where one was
        monkeypatch.setattr(torch.optim.SGD, "step", step)
        ctx = RunContext("cpu", torch.float32)
        _compiled().run(SGD, _inputs(DENSE, DENSE, momentum=0.5, nesterov=True), ctx)
        runs.append(ctx.record[COUNTS_KEY]["counts"])
    assert runs[0] == runs[1], runs


@pytest.mark.slow
def test_a_sparse_gradient_is_unsupported_with_dynamos_reason():
    """torch.compile does not trace a sparse gradient: Dynamo graph-breaks with the reason the backend
    quotes (checked here on torch itself) and runs the step eagerly; the backend's item is unsupported."""
    from torch._dynamo.utils import counters

    with pytest.raises(Unsupported, match="does not support sparse Tensors"):
        _compiled().run(ADAGRAD, _inputs(SPARSE), RunContext("cpu", torch.float32))
    torch._dynamo.reset()
    counters.clear()
    param = torch.tensor(PARAM, dtype=torch.float32)
    optimizer = torch.optim.Adagrad([param], lr=0.5, foreach=False)
    param.grad = SPARSE.to_torch(torch.float32)
    torch.compile(lambda: optimizer.step())()
    what, why = SPARSE_REASON.split(": ")
    assert any(what in reason and why in reason for reason in counters["graph_break"]), list(counters["graph_break"])


def test_a_half_dtype_is_unsupported_by_the_backends_choice():
    with pytest.raises(Unsupported, match="compiles float32 and float64 steps only"):
        _compiled().run(SGD, _inputs(DENSE), RunContext("cpu", torch.float16))


@pytest.mark.slow
def test_compiled_adagrad_in_float64_moves_by_lr_rounded_to_float32():
    """The twin's finding (docs/findings.md): torch 2.13's compiled Adagrad step in float64 is eager's with
    lr rounded to float32, bit for bit; the registered divergence explains the twin's difference, and
    an lr float32 holds exactly (0.5) agrees bit for bit."""
    inputs = OptimizerInputs(np.array([-1.0, 0.5]), [np.array([2.875, -64.0])], {"lr": 8.31, "eps": 1e-6})
    compiled = _compiled().run(ADAGRAD, inputs, RunContext("cpu", torch.float64))["param"]
    rounded = OptimizerInputs(inputs.param, inputs.grads, {"lr": float(np.float32(8.31)), "eps": 1e-6})
    eager = builtin_backends()["coo"]
    assert torch.equal(compiled, eager.run(ADAGRAD, rounded, RunContext("cpu", torch.float64))["param"])
    assert not torch.equal(compiled, eager.run(ADAGRAD, inputs, RunContext("cpu", torch.float64))["param"])
    with pytest.raises(DivergenceObserved) as observed:
        check_paths_agree(Trial(OPS[ADAGRAD], _compiled(), "cpu", "float64"), inputs)
    assert observed.value.divergence is COMPILED_ADAGRAD_LR_IN_FLOAT32
    check_paths_agree(Trial(OPS[ADAGRAD], _compiled(), "cpu", "float64"), _inputs(DENSE, DENSE))


def _plant_compile_only_slip(monkeypatch, op: str) -> None:
    """A 1% larger learning rate in torch's own for-loop step, taken only while torch.compile traces it
    (a slip on a compile-only branch, such as torch.optim's ``torch.compiler.is_compiling()`` ones)."""
    import importlib

    module = importlib.import_module(f"torch.optim.{op}")  # torch.optim.adagrad, torch.optim.sgd
    name = f"_single_tensor_{op}"
    original = getattr(module, name)

    def with_slip(*args, lr, **kwargs):
        return original(*args, lr=lr * 1.01 if torch.compiler.is_compiling() else lr, **kwargs)

    monkeypatch.setattr(module, name, with_slip)


@pytest.mark.slow  # torch.compile of two optimizer steps: 5-7 s (the fast tier stays within 90 s)
@pytest.mark.parametrize("op", [ADAGRAD, SGD])
def test_a_slip_in_the_compiled_step_fails_the_compiled_twin_only(monkeypatch, op):
    _plant_compile_only_slip(monkeypatch, op)
    inputs = _inputs(DENSE, DENSE)
    with pytest.raises(Mismatch, match="compiled twin"):
        check_paths_agree(Trial(OPS[op], _compiled(), "cpu", "float64"), inputs)
    for path in ("foreach", "fused"):
        check_paths_agree(Trial(OPS[op], builtin_backends()[path], "cpu", "float64"), inputs)


@pytest.mark.slow
def test_compiled_items_pass_for_adagrad_and_sgd_and_a_planted_slip_fails_them_only(monkeypatch):
    """The main job's compiled spec items (float64, dense-gradient cases): stock torch passes them, each
    passed item's record holds Dynamo's counts; with a compile-only 1% lr slip planted in torch's own
    for-loop steps, the compiled items fail and the coo and foreach items of the same cases pass."""
    selected = ("--conformance-dtype", "float64", "-k", "not generated and dense and (adagrad or sgd)")
    code, path = run_inprocess("compiled", "specs", "--conformance-backend", "compiled", *selected)
    records = load(path)["records"]
    assert code == 0, [(r["case"], r["outcome"], r.get("message")) for r in records if r["outcome"] == "failed"]
    passed = [r for r in records if r["outcome"] == "passed"]
    assert {r["op"] for r in passed} == {ADAGRAD, SGD}
    assert all(r[COUNTS_KEY]["counts"]["dynamo_graphs"] >= 1 for r in passed if r.get("seconds") is not None), passed
    for op in (ADAGRAD, SGD):
        _plant_compile_only_slip(monkeypatch, op)
    code, path = run_inprocess("compiled-slip", "specs", "--conformance-backend", "compiled,coo,foreach", *selected)
    records = load(path)["records"]
    failed = {r["backend"] for r in records if r["outcome"] == "failed"}
    assert code == 1 and failed == {"compiled"}, failed
    assert {r["op"] for r in records if r["outcome"] == "failed"} == {ADAGRAD, SGD}


@pytest.mark.parametrize("slipped, fails", [("_multi_tensor_adagrad", "foreach"), ("_fused_adagrad", "fused")])
def test_a_slip_in_torchs_foreach_or_fused_adagrad_fails_that_paths_items_only(monkeypatch, slipped, fails):
    """Issue 28: a 1% larger learning rate planted in torch's own _multi_tensor_adagrad (_fused_adagrad)
    fails the foreach (fused) backend's spec items; the coo and dense backends' items of the same dense-
    gradient cases pass (tests/test_torch_paths.py plants the same in the twin)."""
    import torch.optim.adagrad as adagrad_module

    original = getattr(adagrad_module, slipped)

    def with_slip(*args, lr, **kwargs):
        return original(*args, lr=lr * 1.01, **kwargs)

    monkeypatch.setattr(adagrad_module, slipped, with_slip)
    code, path = run_inprocess(f"slip-{fails}", "specs", "--conformance-backend", "coo,dense,foreach,fused",
                               "--conformance-dtype", "float64", "-k", "not generated and adagrad and dense")
    records = load(path)["records"]
    failed = {r["backend"] for r in records if r["outcome"] == "failed"}
    assert code == 1 and failed == {fails}, [(r["case"], r["backend"], r["outcome"]) for r in records]
    assert {r["backend"] for r in records if r["outcome"] == "passed"} >= {"coo", "dense"}


def test_compiled_items_get_a_longer_timeout_than_the_others():
    """A compiled item may compile its steps cold under its own clock: its share of
    --conformance-timeout is Backend.timeout_factor (5), the other backends' 1, spec and generated alike."""
    from conformance.backends.compiled import CompiledBackend
    from conformance.run.state import item_timeout

    items = []

    class Grab:
        def pytest_collection_finish(self, session):
            items.extend(session.items)

    args = ["specs", "--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--conformance-op", "sgd",
            "--conformance-backend", "compiled,dense", "--conformance-device", "cpu", "--conformance-dtype", "float64",
            "--conformance-timeout", "60"]
    assert pytest.main(args, plugins=[Grab()]) == 0
    timeouts = {(item.backend.name, bool(item.record.get("generated"))): item_timeout(item) for item in items}
    assert CompiledBackend.timeout_factor == 5.0
    assert timeouts[("dense", False)] == 60 and timeouts[("compiled", False)] == 300
    assert timeouts[("compiled", True)] == 5 * timeouts[("dense", True)] > 0


def test_on_a_device_inductor_has_no_code_generator_for_a_compiled_item_is_unsupported():
    """torch_xla compiles through its own backend; Inductor's code generators are cpu's and cuda's
    (on torch 2.9 + torch_xla an xla item raised Inductor's error): unsupported, with the reason."""
    from conformance.core.types import RunContext as Context

    from pathlib import Path

    from conformance.specs.load import load_spec

    spec = load_spec(Path(__file__).resolve().parents[1] / "specs" / "sgd.yaml")
    case = next(case for case in spec.cases if case.id == "dense-step-of-sixteen-entries")
    inputs = OPS["sgd"].decode_inputs(case.inputs, "float32")
    with pytest.raises(Unsupported, match="Inductor.*generates code for cpu and cuda, not xla"):
        builtin_backends()["compiled"].run("sgd", inputs, Context("xla", torch.float32))


# ---------------------------------------------------------------- compiled masked mean and coalesce

MASKED_MEAN, COALESCE = "masked_mean", "coalesce"


def _spec_case(spec: str, case_id: str):
    from pathlib import Path

    from conformance.specs.load import load_spec

    loaded = load_spec(Path(__file__).resolve().parents[1] / "specs" / spec)
    return next(case for case in loaded.cases if case.id == case_id)


def test_the_records_declare_the_compiled_functions():
    """masked_mean and coalesce declare the function the compiled backend compiles (``torch_paths``), as the
    optimizer records declare their compiled step; the backend runs each, the masked mean in every dtype."""
    from conformance.ops.coalesce import coalesced
    from conformance.ops.masked_mean import where_masked_mean

    assert OPS[MASKED_MEAN].torch_path("compiled").function is where_masked_mean
    assert OPS[COALESCE].torch_path("compiled").function is coalesced
    assert {ADAGRAD, SGD, MASKED_MEAN, COALESCE} <= set(_compiled().runners)
    assert "masked_mean_compiles" not in _compiled().runners


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_the_compiled_masked_mean_passes_a_spec_case_and_records_dynamos_counts(dtype):
    """The dense formulation under torch.compile(dynamic=True), forward and backward: a NaN and an inf under
    the mask stay out of value and gradient; the record holds one graph, no recompile, no graph break."""
    from conformance.judging.runner import run_item

    ctx = run_item(_spec_case("masked_mean.yaml", "nan-and-inf-under-the-mask"), _compiled(), "cpu", dtype)
    assert ctx.record[COUNTS_KEY] == {"compiler": INDUCTOR, "counts": {
        "dynamo_graphs": 1, "dynamo_recompiles": 0, "dynamo_graph_breaks": 0, "dynamo_frames": 1, "calls": 1}}


def test_the_compiled_masked_mean_with_no_valid_entry_is_nan_with_a_zero_gradient():
    """0 / 0 = NaN, and the backward's 1 / 0 = inf is selected away by where's backward under Inductor too
    (a rewrite into mask * grad would give 0 * inf = NaN)."""
    from conformance.ops.masked_mean import MaskedMeanInputs

    out = _compiled().run(MASKED_MEAN, MaskedMeanInputs(np.array([1.0, 2.0, 3.0]), np.zeros(3, dtype=bool)),
                          RunContext("cpu", torch.float32))
    assert torch.isnan(out["value"]) and torch.equal(out["grad"], torch.zeros(3))


def test_coalesce_does_not_trace_and_its_compiled_items_are_unsupported_with_dynamos_reason():
    """Dynamo will not wrap a sparse input: it skips the frame and coalesce runs eagerly. The item is
    unsupported with the reason Dynamo recorded (its own counters), never an error or an eager pass; with
    fullgraph=True torch raises the same reason (checked here on torch itself)."""
    from conformance.judging.runner import run_item

    record: dict = {}
    with pytest.raises(Unsupported) as refused:
        run_item(_spec_case("coalesce.yaml", "basic-2x3"), _compiled(), "cpu", "float32", record=record)
    assert "compiled no graph" in str(refused.value) and SPARSE_REASON in str(refused.value), refused.value
    assert "gb0015" in str(refused.value) and COUNTS_KEY not in record
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported, match="Attempted to wrap sparse Tensor"):
        torch.compile(OPS[COALESCE].torch_path("compiled").function, fullgraph=True)(SPARSE.to_torch(torch.float32))


def test_a_compiled_function_dynamo_refuses_is_unsupported_with_its_reason(monkeypatch):
    """A declared function Dynamo refuses outright (its own Unsupported: here torch._dynamo.graph_break()
    under fullgraph, standing for any refusal) is an unsupported item with torch's reason, not an error."""
    import functools

    from conformance.ops.masked_mean import MaskedMeanInputs, where_masked_mean

    def breaks(values, mask):
        torch._dynamo.graph_break()
        return where_masked_mean(values, mask)

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", functools.partial(real_compile, fullgraph=True))
    monkeypatch.setitem(OPS, MASKED_MEAN, dataclasses.replace(OPS[MASKED_MEAN], torch_paths=(
        TorchPath("compiled", function=breaks),)))
    with pytest.raises(Unsupported, match="Dynamo does not trace it: .*graph_break"):
        _compiled().run(MASKED_MEAN, MaskedMeanInputs(np.array([1.0, 2.0]), np.array([True, False])),
                        RunContext("cpu", torch.float32))


def test_inductors_cache_is_a_folder_of_the_suites_own_unless_the_user_names_one(monkeypatch, tmp_path):
    """F15: torch's default, /tmp/torchinductor_<user>, is shared by every program of the user; a corrupt
    entry there failed every later run's compiled items. The suite's is per environment, beside the C++
    kernels' build folder; TORCHINDUCTOR_CACHE_DIR, when set, rules."""
    from conformance.backends.compiled import inductor_cache
    from conformance.kernels import suite_cache_directory

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "")  # restored after the test, as it was (set or not)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    ours = inductor_cache()
    assert ours == str(suite_cache_directory("inductor")) == os.environ["TORCHINDUCTOR_CACHE_DIR"]
    assert Path(ours).parent == tmp_path / "torch_sparse_conformance" and "inductor" in Path(ours).name
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert inductor_cache() == str(tmp_path / "mine")


def test_a_compile_failing_as_a_corrupt_cache_entry_makes_it_names_the_cache_folder(monkeypatch, tmp_path):
    """F15: a truncated .so in Inductor's cache fails every later compile of that code ("ImportError: ...
    file too short", inside BackendCompilerFailed), and torch never rebuilds it: the item's error says
    which folder to delete, rather than reading as a bug of stock torch's."""
    from conformance.backends.compiled import InductorCacheSuspect
    from conformance.ops.masked_mean import MaskedMeanInputs

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    truncated = ImportError(f"{tmp_path}/inductor/cj/cjrt7.main.so: file too short")

    def failing_compile(function, **kwargs):
        def call(*args):
            raise torch._dynamo.exc.BackendCompilerFailed(function, truncated, None)
        return call

    monkeypatch.setattr(torch, "compile", failing_compile)
    with pytest.raises(InductorCacheSuspect) as failed:
        _compiled().run(MASKED_MEAN, MaskedMeanInputs(np.array([1.0, 2.0]), np.array([True, False])),
                        RunContext("cpu", torch.float32))
    message = str(failed.value)
    assert message.startswith("torch.compile failed with ImportError, as it does on a corrupt entry of Inductor's "
                              f"cache, which for this run is {tmp_path / 'inductor'}:"), message
    assert "file too short" in message


@pytest.mark.slow  # two runs in child processes, the first compiling cold: about a minute
def test_every_so_of_the_suites_inductor_cache_truncated_the_compiled_item_names_the_folder(tmp_path):
    """F15 end to end: a run compiles into the suite's own folder (not torch's machine-wide one); with each
    .so there truncated to 0 bytes (a full disk, a crash), the next run's compiled item passes or its error
    names that folder. Before: the cache was /tmp/torchinductor_<user>, and such an item was an error
    blamed on stock torch."""
    env = {key: value for key, value in os.environ.items() if key != "TORCHINDUCTOR_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))

    def run() -> dict:
        results = tmp_path / "results.json"
        subprocess.run([sys.executable, "-m", "pytest", *base_args(results), "specs/masked_mean.yaml", "-p", "no:xdist",
                        "-k", "mean-of-valid-entries", "--conformance-examples", "0", "--conformance-backend", "compiled",
                        "--conformance-dtype", "float32"], cwd=REPO, env=env, capture_output=True, timeout=600)
        (record,) = load(results)["records"]
        return record

    assert run()["outcome"] == "passed"
    folder = tmp_path / "xdg" / "torch_sparse_conformance"
    libraries = list(folder.rglob("*.so"))
    assert libraries, "nothing compiled into the suite's own folder"
    for library in libraries:
        library.write_bytes(b"")
    record = run()
    assert record["outcome"] == "passed" or (
        record["outcome"] == "error" and record["message"].startswith("torch.compile failed with ")
        and f"which for this run is {next(folder.iterdir())}:" in record["message"]), record


def _plant_wrong_compiled_masked_mean(monkeypatch) -> None:
    """The function the compiled backend compiles, replaced by a mean 1% too large (what a wrong lowering
    of the masked mean would give); the dense backend's own formulation is left alone."""
    from conformance.ops.masked_mean import where_masked_mean

    def one_percent_too_large(values, mask):
        return where_masked_mean(values, mask) * 1.01

    monkeypatch.setitem(OPS, MASKED_MEAN, dataclasses.replace(OPS[MASKED_MEAN], torch_paths=(
        TorchPath("compiled", function=one_percent_too_large),)))


def test_a_wrong_compiled_masked_mean_fails_the_compiled_item_only(monkeypatch):
    from conformance.judging.runner import run_item

    _plant_wrong_compiled_masked_mean(monkeypatch)
    case = _spec_case("masked_mean.yaml", "mean-of-valid-entries")
    with pytest.raises(Mismatch, match="value"):
        run_item(case, _compiled(), "cpu", "float64")
    for name in ("dense", "masked"):
        run_item(case, builtin_backends()[name], "cpu", "float64")


@pytest.mark.slow
def test_masked_mean_items_pass_compiled_and_a_planted_slip_fails_the_compiled_ones_only(monkeypatch):
    """The main job's compiled masked-mean spec items pass, each with Dynamo's counts in its record; with a
    wrong compiled masked mean planted (the function the backend compiles), the compiled items with a finite
    non-zero value fail and the dense and masked items of the same cases pass."""
    selected = ("--conformance-op", "masked_mean", "--conformance-dtype", "float32,float64", "-k", "not generated")
    code, path = run_inprocess("compiled-mean", "specs", "--conformance-backend", "compiled", *selected)
    records = load(path)["records"]
    assert code == 0 and records and {r["outcome"] for r in records} == {"passed"}, [
        (r["case"], r["outcome"], r.get("message")) for r in records]
    assert all(r[COUNTS_KEY]["compiler"] == INDUCTOR and r[COUNTS_KEY]["counts"]["dynamo_graphs"] == 1
               for r in records), records
    _plant_wrong_compiled_masked_mean(monkeypatch)
    code, path = run_inprocess("compiled-mean-slip", "specs", "--conformance-backend", "compiled,dense,masked",
                               *selected)
    records = load(path)["records"]
    failed = {(r["backend"], r["case"]) for r in records if r["outcome"] == "failed"}
    assert code == 1 and {backend for backend, _ in failed} == {"compiled"}, failed
    assert {case for _, case in failed} >= {"mean-of-valid-entries", "all-valid", "single-valid-entry"}, failed
