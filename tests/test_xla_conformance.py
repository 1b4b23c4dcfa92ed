"""The XLA device inside the harness: xla items exist (skipped with the reason when torch_xla is
absent), record compile counts, sparse COO on XLA is unsupported, and the compile-count spec can
fail (a masked_select idiom under the static expectation)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from conformance.core import devices, xla_support
from conformance.backends import Unsupported, builtin_backends
from conformance.backends.base import Backend
from conformance.backends.masked_mean_idioms import APPROACHES, _masked_mean_runner
from conformance.core.compare import Mismatch
from conformance.ops.masked_mean_compiles import run_series
from conformance.judging.runner import run_item
from conformance.specs.load import load_spec

SPECS = Path(__file__).resolve().parent.parent / "specs"
XLA_REASON = xla_support.xla_unavailable_reason()
needs_xla = pytest.mark.skipif(XLA_REASON is not None, reason=f"XLA device: {XLA_REASON}")


def _case(spec: str, case_id: str, shape: list[int] | None = None):
    """A spec case; ``shape`` replaces its inputs' shape so that no other item in this process
    has compiled its graphs (XLA's graph cache lives as long as the process)."""
    case = next(c for c in load_spec(SPECS / spec).cases if c.id == case_id)
    if shape is not None:
        case = dataclasses.replace(case, inputs={**case.inputs, "shape": shape})
    return case


def test_xla_is_a_default_device_with_a_reason_when_absent():
    assert "xla" in devices.DEFAULT_DEVICES
    assert devices.unavailable_reason("xla") == XLA_REASON


def test_idiom_backends_are_registered_for_their_two_ops_only():
    backends = builtin_backends()
    for name in APPROACHES:
        backend = backends[f"mean-{name}"]
        assert sorted(backend.runners) == ["masked_mean", "masked_mean_compiles"]
        assert backend.lists_unimplemented_ops is False


@pytest.mark.slow
def test_xla_items_are_collected_and_skipped_with_the_reason(pytester: pytest.Pytester, warm_imports):
    pytester.makefile(".yaml", **{"specs/mm": (SPECS / "masked_mean.yaml").read_text()})
    ids = ["*mean-of-valid-entries[[]dense-xla-float32[]]*", "*mean-of-valid-entries[[]coo-xla-float32[]]*"]
    if XLA_REASON is None:  # xla is here: collecting is the claim (running them is the XLA session's)
        result = pytester.runpytest_subprocess("specs", "-p", "no:cacheprovider", "--collect-only", "-q",
                                               "--conformance-backend", "dense,coo", "--conformance-device", "xla")
        result.stdout.fnmatch_lines(ids)
        return
    # one run: every xla item is collected (-v lists it) and skipped with the reason (-rs)
    run = pytester.runpytest_subprocess("specs", "-p", "no:cacheprovider", "-v", "-rs", "--conformance-examples", "0",
                                        "--conformance-backend", "dense,coo", "--conformance-device", "xla")
    run.stdout.fnmatch_lines(ids)
    run.stdout.fnmatch_lines([f"*SKIPPED*{XLA_REASON[:40]}*"])
    cases = len(load_spec(SPECS / "masked_mean.yaml").cases)
    run.assert_outcomes(skipped=cases * 2 * 4)  # every case x {dense, coo} x 4 dtypes, none run


def test_compile_series_is_unsupported_off_xla():
    backend = builtin_backends()["mean-where"]
    case = _case("masked_mean_compiles.yaml", "static-shape-idioms-compile-once-over-10-masks")
    with pytest.raises(Unsupported, match="xla device only"):
        run_item(case, backend, "cpu", "float32")


@needs_xla
def test_dense_on_xla_records_compile_counts():
    ctx = run_item(_case("masked_mean.yaml", "mean-of-valid-entries"), builtin_backends()["dense"], "xla", "float32")
    compiled = ctx.record[xla_support.COMPILES_KEY]
    assert compiled["compiler"] == "torch_xla", compiled
    counts = compiled["counts"]
    assert set(counts) == {"compile_time_samples", "uncached_compile", "cached_compile"}
    assert all(isinstance(v, int) and v >= 0 for v in counts.values())
    assert counts["uncached_compile"] + counts["cached_compile"] >= 1  # the graph ran


@needs_xla
def test_expected_error_items_on_xla_record_compile_counts_too():
    record: dict = {}
    run_item(_case("sparse_adam.yaml", "dense-gradient-rejected"), builtin_backends()["dense"], "xla", "float32",
             record=record)
    assert record[xla_support.COMPILES_KEY]["counts"]["uncached_compile"] >= 0


@needs_xla
def test_coo_on_xla_is_unsupported_not_an_error():
    with pytest.raises(Unsupported, match="SparseXLA"):
        run_item(_case("coalesce.yaml", "basic-2x3"), builtin_backends()["coo"], "xla", "float32")


@needs_xla
def test_compile_spec_fails_a_dynamic_idiom_under_the_static_expectation():
    # A backend that claims to be static but uses masked_select: the spec must catch it.
    select = _masked_mean_runner(APPROACHES["select"])
    impostor = Backend({"masked_mean_compiles": lambda inputs, ctx: run_series(select, inputs, ctx)})
    impostor.name = "impostor"
    case = _case("masked_mean_compiles.yaml", "static-shape-idioms-with-repeated-counts", shape=[7, 19])
    record: dict = {}
    with pytest.raises(Mismatch, match="recompiles"):
        run_item(case, impostor, "xla", "float32", record=record)
    # what it measured is kept for the failed item's record
    assert record[xla_support.COMPILES_KEY]["counts"]["uncached_compile"] >= 4
    assert record["compiles_per_mask"][1:] == [1, 0, 1, 0, 0, 1, 0, 0, 0]


@needs_xla
def test_compile_spec_records_per_mask_compiles():
    case = _case("masked_mean_compiles.yaml", "masked-select-compiles-once-per-distinct-count", shape=[5, 23])
    ctx = run_item(case, builtin_backends()["mean-select"], "xla", "float32")
    per_mask = ctx.record["compiles_per_mask"]
    assert len(per_mask) == 10
    assert per_mask[0] >= 1  # warm-up: this shape was never compiled in this process
    assert per_mask[1:] == [1, 0, 1, 0, 0, 1, 0, 0, 0]


@needs_xla
@pytest.mark.parametrize("backend", ["dense", "masked"])
def test_torch_on_cpu_stands_in_where_torch_has_no_xla_kernel(backend):
    """Stock torch's sparse Adagrad cannot run on XLA; torch on cpu stands in, and a backend that
    shows torch's recorded float16 behaviour is xfail "same as torch", saying so."""
    from conformance.judging.verdict import SameAsTorch

    record: dict = {}
    with pytest.raises(SameAsTorch, match=r"same as torch \(on cpu; on xla torch has no kernel for .*SparseXLA"):
        run_item(_case("adagrad.yaml", "duplicates-cancel-half-precision"), builtin_backends()[backend], "xla",
                 "float16", record=record)
    assert "SparseXLA" in record["torch_stand_in"]
    assert record["verdict"] == "same-as-torch"


def test_the_coalesce_spec_declares_torchs_half_precision_duplicates_on_xla_too():
    """torch's float16/bfloat16 accumulation of duplicates is declared for cpu and xla, not cuda (its
    coalesce sums in float32): declared for cpu alone, the XLA session's dense items on xla failed,
    2048 (float16) and 256 (bfloat16) where torch on cpu, standing in, gives the same."""
    case = _case("coalesce.yaml", "many-duplicates-half-precision")
    for dtype in ("float16", "bfloat16"):
        assert case.torch_divergence_for("cpu", dtype) is not None
        assert case.torch_divergence_for("xla", dtype) is not None
        assert case.torch_divergence_for("cuda", dtype) is None
    assert case.torch_divergence_for("xla", "float32") is None


@needs_xla
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_xla_adds_duplicates_in_half_precision_as_torch_on_cpu_does(dtype):
    """The dense backend on xla (index_put_ with accumulate=True, as XLA runs it) gives torch's
    CPU values (2048, 256): xfail "same as torch", with the stand-in named."""
    from conformance.judging.verdict import SameAsTorch

    record: dict = {}
    with pytest.raises(SameAsTorch, match=r"same as torch \(on cpu; on xla torch has no kernel"):
        run_item(_case("coalesce.yaml", "many-duplicates-half-precision"), builtin_backends()["dense"], "xla",
                 dtype, record=record)
    assert record["verdict"] == "same-as-torch"


@needs_xla
def test_the_cpu_stand_in_does_not_excuse_a_different_result():
    """A backend on XLA that misses the spec otherwise than torch (on cpu) does: failed, with the
    stand-in named and torch's one-line error, not its dispatcher table."""

    class Halving(Backend):
        name = "halving"

        def implements(self, op):
            return op == "coalesce"

        def run(self, op, inputs, ctx):
            outputs = builtin_backends()["dense"].run(op, inputs, ctx)
            return {**outputs, "values": outputs["values"] / 2}

    with pytest.raises(Mismatch, match=r"stock torch on cpu \(on xla torch has no kernel") as raised:
        run_item(_case("coalesce.yaml", "many-duplicates-half-precision"), Halving(), "xla", "float16")
    assert "AutogradXLA" not in str(raised.value)
