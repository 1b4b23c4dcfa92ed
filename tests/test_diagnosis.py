"""Diagnosis ("looks like: ..."): each single-slip mutant in tests/candidates/mutants.py, run through
the suite as a candidate, fails with its own mistake named -- in the console message, the results
record's ``looks_like`` and the report; correct implementations (torch's own classes, the clean
re-implementations, the built-in backends) never get one; and the matching rules of
:func:`conformance.core.diagnosis.diagnose` hold on hand-made examples."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from conformance.core import diagnosis
from conformance.ops import OPS
from conformance.ops.masked_mean import MaskedMeanInputs
from conformance.ops.optimizers import OptimizerInputs
from conformance.core.tensors import CooArray
from conformance.core.types import RunContext
from tests.candidates import mutants
from tests.conformance_runs import MUTANTS, load, run_inprocess

# mutant -> (its own mistake, other mistakes it also really makes on some spec inputs)
OWN_MISTAKE = {
    "EpsInsideSqrtAdagrad": ("eps inside the root",),
    "NoMaximizeAdagrad": ("no maximize",),
    "LrDecayOffByOneAdagrad": ("lr_decay off by one",),
    "SquareBeforeSumAdagrad": ("squares before summing",),
    "RowwiseAdagrad": ("one accumulator per row",),
    "PerRowStepSparseAdam": ("empty steps not counted",),
    "PerRowBiasCorrectionSparseAdam": ("per-row step counts",),
    "NoMaximizeSparseAdam": ("no maximize",),
    "AdamEpsSparseAdam": ("eps after bias correction",),
    "DenseMomentsSparseAdam": ("non-lazy moments",),
    "multiply_masked_mean": ("multiply-by-mask mean", "NaN gradient with no valid entry"),
    "nansum_masked_mean": ("NaN dropped from the sum (nansum)", "NaN gradient with no valid entry"),
    "numel_masked_mean": ("numel instead of count",),
    "leaky_grad_masked_mean": ("gradient leaking outside the mask",),
    "dropping_coalesce": ("dropping explicit zeros",),
    "column_major_coalesce": ("column-major order",),
    "last_write_wins_coalesce": ("last-write-wins duplicates",),
}
# mutants whose failures show no mistake of their own: raising_coalesce raises on everything
NOT_NAMED = {"raising_coalesce": ()}
CONTROLS = {"CleanAdagrad", "CleanSparseAdam", "TorchAdagrad", "TorchSparseAdam", "where_masked_mean",
            "torch_masked_mean", "torch_coalesce", "SquareThenSumAdagrad"}  # (the last: SquareBeforeSumAdagrad's class)
OP_OF = {"Adagrad": "adagrad", "SparseAdam": "sparse_adam", "masked_mean": "masked_mean", "coalesce": "coalesce"}


def op_of(mutant: str) -> str:
    return next(op for suffix, op in OP_OF.items() if mutant.endswith(suffix))


def test_every_mutant_is_listed_and_at_least_80_percent_get_their_own_mistake():
    defined = {name for name, value in vars(mutants).items()
               if not name.startswith("_") and (inspect.isfunction(value) or inspect.isclass(value))
               and getattr(value, "__module__", None) == mutants.__name__} | {"SquareBeforeSumAdagrad"}
    defined = {name for name in defined if name not in CONTROLS and not name.startswith("Clean")
               and not name.startswith("_")}
    listed = set(OWN_MISTAKE) | set(NOT_NAMED)
    assert defined == listed, f"mutants not listed here: {defined - listed}; listed but gone: {listed - defined}"
    assert len(OWN_MISTAKE) >= 0.8 * len(listed), (len(OWN_MISTAKE), len(listed))
    for mutant, names in OWN_MISTAKE.items():
        catalogue = {m.name for m in OPS[op_of(mutant)].mistakes}
        assert set(names) <= catalogue, (mutant, set(names) - catalogue)


# one mutant per op in each run, so that one pytest run checks up to four of them
ROUNDS = [
    ["EpsInsideSqrtAdagrad", "PerRowBiasCorrectionSparseAdam", "multiply_masked_mean", "column_major_coalesce"],
    ["NoMaximizeAdagrad", "PerRowStepSparseAdam", "leaky_grad_masked_mean", "last_write_wins_coalesce"],
    ["LrDecayOffByOneAdagrad", "AdamEpsSparseAdam", "numel_masked_mean", "dropping_coalesce"],
    ["SquareBeforeSumAdagrad", "DenseMomentsSparseAdam", "nansum_masked_mean", "raising_coalesce"],
    ["RowwiseAdagrad", "NoMaximizeSparseAdam"],
]


def test_rounds_cover_every_mutant():
    assert sorted(m for r in ROUNDS for m in r) == sorted([*OWN_MISTAKE, *NOT_NAMED])


def candidate_run(name: str, impls: list[str], *extra: str) -> dict:
    ops = [op_of(m) for m in impls]
    code, path = run_inprocess(name, "specs", "--conformance-backend", "candidate", "--conformance-dtype", "float64",
                               "--conformance-op", ",".join(ops),
                               *(f"--conformance-impl={op_of(m)}={MUTANTS}:{m}" for m in impls), *extra)
    assert path.exists(), f"{name}: no results (exit code {code})"
    return load(path)


# the fast tier runs the first round, the slow tier the others (1.5-3 s each; the fast tier stays within its 90 s)
@pytest.mark.parametrize("round_", [r if r is ROUNDS[0] else pytest.param(r, marks=pytest.mark.slow) for r in ROUNDS],
                         ids=lambda r: "+".join(r))
@pytest.mark.slow  # 1.5-5 s: the fast tier stays within 90 s in a fresh clone
def test_each_mutant_fails_with_its_own_mistake_named(round_):
    """Spec items only (--conformance-examples 0): every mutant fails, its own mistake is named on
    at least one failing item, no failing item names a mistake it does not make, and the message
    ends with the "looks like" line."""
    document = candidate_run("diagnosis-" + "+".join(round_), round_, "--conformance-examples", "0")
    for mutant in round_:
        records = [r for r in document["records"] if r["op"] == op_of(mutant)]
        failing = [r for r in records if r["outcome"] in ("failed", "error")]
        assert failing, f"{mutant} was not flagged: {[(r['case'], r['outcome']) for r in records]}"
        named = [r["looks_like"]["name"] for r in failing if r.get("looks_like")]
        allowed = OWN_MISTAKE.get(mutant) or NOT_NAMED[mutant]
        assert set(named) <= set(allowed), f"{mutant}: named {sorted(set(named))}, makes only {allowed}"
        if mutant in OWN_MISTAKE:
            own = OWN_MISTAKE[mutant][0]
            assert own in named, f"{mutant}: {own!r} never named: {[(r['case'], r.get('looks_like')) for r in failing]}"
        for record in failing:
            if record.get("looks_like"):
                mistake = record["looks_like"]
                assert f"looks like: {mistake['name']} {diagnosis.DASH} {mistake['explanation']}" in record["message"]
                assert mistake["explanation"]


@pytest.mark.slow
def test_generated_failures_are_diagnosed_too():
    """The generated items: the failing (shrunk) example is diagnosed; a row-wise Adagrad's failure
    says "looks like: one accumulator per row" in its message and record."""
    impls = ["RowwiseAdagrad", "DenseMomentsSparseAdam", "leaky_grad_masked_mean", "last_write_wins_coalesce"]
    # 30 examples: at the ci profile's 10 (seed 0) no draw tells a row-wise accumulator from the reference
    document = candidate_run("diagnosis-generated", impls, "-k", "generated and agrees-with-reference",
                             "--conformance-examples", "30")
    for mutant in impls:
        failing = [r for r in document["records"] if r["op"] == op_of(mutant) and r["outcome"] == "failed"]
        assert failing, mutant
        for record in failing:
            assert record.get("looks_like", {}).get("name") == OWN_MISTAKE[mutant][0], (mutant, record["message"])
            assert "looks like: " + OWN_MISTAKE[mutant][0] in record["message"]
    rowwise = next(r for r in document["records"] if r["op"] == "adagrad" and r["outcome"] == "failed")
    assert "looks like: one accumulator per row" in rowwise["message"]


@pytest.mark.slow
def test_correct_implementations_never_get_a_diagnosis():
    """torch's own classes and the clean re-implementations as candidates, and the built-in backends:
    no record carries looks_like (they do not fail; a diagnosis is only ever of a failure) -- except
    the documented masked-mean idioms' known divergences (xfail), which are the multiply-by-mask
    idiom and are named so."""
    controls = candidate_run("diagnosis-controls", ["CleanAdagrad", "CleanSparseAdam", "where_masked_mean",
                                                     "torch_coalesce"], "-k", "not generated or agrees-with-reference")
    assert controls["records"]
    assert not [r["nodeid"] for r in controls["records"] if r.get("looks_like") or r["outcome"] in ("failed", "error")]
    code, path = run_inprocess("diagnosis-builtin", "specs", "--conformance-examples", "0", "--conformance-dtype",
                               "float32,float64")
    assert code == 0
    named = [r for r in load(path)["records"] if r.get("looks_like")]
    # only the documented masked-mean idioms' known divergences (xfail), which are the multiply-by-mask idiom
    assert not [r["nodeid"] for r in named if r["outcome"] != "xfail" or not r["backend"].startswith("mean-")]
    assert {r["looks_like"]["name"] for r in named} <= {"multiply-by-mask mean", "NaN gradient with no valid entry"}


# ---------------------------------------------------------------- the matching rules, on hand-made examples

def run_on(op, candidate, dtype=torch.float64):
    return lambda inputs: op.run_candidate(candidate, inputs, RunContext("cpu", dtype))


def test_a_model_equal_to_the_reference_on_the_example_is_not_named():
    """eps inside the root with eps = 1e-10 on unit gradients changes nothing measurable: the
    mutant's output is right here, so nothing is named even though the model matches."""
    op = OPS["adagrad"]
    inputs = OptimizerInputs(np.ones((2, 2)), [CooArray(np.array([[0], [1]]), np.array([1.0]), (2, 2))], {"lr": 0.1})
    run = run_on(op, mutants.EpsInsideSqrtAdagrad)
    assert diagnosis.diagnose(op, inputs, run(inputs), "float64") is None
    wide_eps = OptimizerInputs(inputs.param, inputs.grads, {"lr": 0.1, "eps": 0.5})
    assert diagnosis.diagnose(op, wide_eps, run(wide_eps), "float64").name == "eps inside the root"
    assert diagnosis.diagnose(op, wide_eps, run_on(op, torch.optim.Adagrad)(wide_eps), "float64") is None


def test_the_closest_model_wins_and_an_unexplained_failure_gets_none():
    op = OPS["masked_mean"]
    inputs = MaskedMeanInputs(np.array([np.nan, 1.0, 2.0]), np.array([True, True, False]))
    def tensors(value, grad):
        return {"value": torch.tensor(value, dtype=torch.float64), "grad": torch.tensor(grad, dtype=torch.float64)}

    outputs = tensors(1.0, [0.0, 1.0, 0.0])  # pandas: [nan, 1] -> 1.0, the NaN neither counted nor differentiated
    assert diagnosis.diagnose(op, inputs, outputs, "float64").name == "skipna mean"
    outputs = tensors(0.5, [0.0, 0.5, 0.0])  # (values * mask).nansum() / count
    assert diagnosis.diagnose(op, inputs, outputs, "float64").name == "NaN dropped from the sum (nansum)"
    outputs["value"] = torch.tensor(7.0, dtype=torch.float64)
    assert diagnosis.diagnose(op, inputs, outputs, "float64") is None


def test_a_coalesce_summing_duplicates_in_half_precision_is_named():
    """Three float16 duplicates added one after another in float16 (index_add_ in input order): 2048 + 1 + 1
    is 2048 in float16 arithmetic (2049 lies halfway between 2048 and 2050 and rounds to even), 2050 exactly;
    the catalogue names it."""
    from tests.candidates.precision import index_add_coalesce

    op = OPS["coalesce"]
    inputs = CooArray(np.array([[0, 0, 0, 1]]), np.array([2048.0, 1.0, 1.0, 2.0]), (2,))
    outputs = run_on(op, index_add_coalesce, torch.float16)(inputs)
    assert float(outputs["values"][0]) == 2048.0  # (the hand derivation, checked)
    assert diagnosis.diagnose(op, inputs, outputs, "float16").name == "half-precision accumulation"
    assert diagnosis.diagnose(op, inputs, run_on(op, torch.Tensor.coalesce, torch.float32)(inputs), "float32") is None


def test_an_error_is_named_only_where_its_trigger_is_and_the_control_runs():
    """A coalesce raising on sparse_dim == 0 is named; one raising on everything is not (its
    control, the same entries with a sparse dim, raises too)."""
    op = OPS["coalesce"]
    scalar = CooArray(np.zeros((0, 1), dtype=np.int64), np.array([3.0]), ())

    def no_scalars(tensor):
        if tensor.sparse_dim() == 0:
            raise RuntimeError("sparse_dim must be positive")
        return tensor.coalesce()

    error = RuntimeError("sparse_dim must be positive")
    found = diagnosis.diagnose(op, scalar, error, "float64", run_on(op, no_scalars))
    assert found is not None and found.name == "rejects a tensor without sparse dims"
    assert diagnosis.diagnose(op, scalar, error, "float64", run_on(op, mutants.raising_coalesce)) is None


def test_looks_like_adds_the_line_and_the_record_field():
    from conformance.core.compare import Mismatch

    op = OPS["masked_mean"]
    inputs = MaskedMeanInputs(np.array([1.0, 3.0]), np.array([True, False]))
    record: dict = {}
    failure = Mismatch("value differs", 1.0, 0.5)
    outputs = run_on(op, mutants.numel_masked_mean)(inputs)
    raised = diagnosis.looks_like(op, inputs, outputs, torch.float64, record, failure)
    assert isinstance(raised, Mismatch) and raised.max_abs_error == 1.0
    assert str(raised).splitlines()[-1].strip().startswith("looks like: numel instead of count \u2014 divides by")
    assert record["looks_like"]["name"] == "numel instead of count"
    quiet: dict = {}
    right = run_on(op, mutants.where_masked_mean)(inputs)
    assert diagnosis.looks_like(op, inputs, right, torch.float64, quiet, failure) is failure and not quiet


def test_the_report_shows_the_likely_cause(tmp_path):
    """The report's item data carries looks_like, and the details panel writes "looks like: ..."."""
    import json

    from conformance.results.report import build_report
    from test_report import Page

    code, path = run_inprocess("diagnosis-report", "specs/adagrad.yaml", "--conformance-examples", "0",
                               "--conformance-dtype", "float64", f"--conformance-impl=adagrad={MUTANTS}:RowwiseAdagrad")
    out = tmp_path / "index.html"
    build_report([path], out)
    text = out.read_text(encoding="utf-8")
    items = json.loads(Page(text).data_text)["items"]
    named = [it for it in items if it.get("looks_like")]
    assert named and all(it["backend"] == "candidate" and it["outcome"] == "failed" for it in named)
    assert named[0]["looks_like"]["name"] == "one accumulator per row"
    assert 'it.looks_like.name' in text and '"looks like: "' in text  # the panel's script renders it


class CoalescedOnlyAdagrad(torch.optim.Adagrad):
    """torch's Adagrad behind a check some fused optimizers make (DeepSpeed's CPU Adagrad): an
    uncoalesced sparse gradient -- what nn.Embedding(sparse=True) produces -- is rejected."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and p.grad.is_sparse and not p.grad.is_coalesced():
                    raise RuntimeError("expected a coalesced sparse gradient")
        return super().step(closure)


def test_a_rejected_uncoalesced_gradient_is_named():
    op = OPS["adagrad"]
    inputs = OptimizerInputs(np.zeros(3), [CooArray(np.array([[2, 0, 2]]), np.array([1.0, 2.0, 3.0]), (3,))], {})
    run = run_on(op, CoalescedOnlyAdagrad)
    with pytest.raises(RuntimeError) as raised:
        run(inputs)
    found = diagnosis.diagnose(op, inputs, raised.value, "float64", run)
    assert found is not None and found.name == "rejected uncoalesced gradients"
    other = RuntimeError("out of memory")
    assert diagnosis.diagnose(op, inputs, other, "float64", run) is None  # an error that does not say so


@pytest.mark.slow  # about 2-3.5 s: the fast tier stays within its 90 s (95.8 s on 2026-11-28)
def test_rounding_mistakes_are_named_bit_for_bit():
    """tests/candidates/precision.py's rounding slips fail rounds-correctly, and the failure names the
    slip (matched bit for bit, told apart from the correctly rounded reference)."""
    precision = "tests/candidates/precision.py"
    own = {"adagrad": ("TruncatingAdagrad", "truncating stores"),
           "coalesce": ("truncating_coalesce", "truncating stores"),
           "masked_mean": ("half_sum_masked_mean", "half-precision accumulation")}
    code, path = run_inprocess("diagnosis-rounding", "specs", "--conformance-backend", "candidate",
                               "--conformance-dtype", "float16,bfloat16", "--conformance-op", ",".join(own),
                               "-k", "rounds-correctly", "--conformance-no-shrink",
                               *(f"--conformance-impl={op}={precision}:{name}" for op, (name, _) in own.items()))
    records = load(path)["records"]
    for op, (name, mistake) in own.items():
        failing = [r for r in records if r["op"] == op and r["outcome"] == "failed"]
        assert {r["dtype"] for r in failing} == {"float16", "bfloat16"}, (name, [(r["dtype"], r["outcome"]) for r in records if r["op"] == op])
        assert all(r.get("looks_like", {}).get("name") == mistake for r in failing), (name, failing[0]["message"])


class NoMaximizeSGD(torch.optim.SGD):
    """SGD that drops maximize."""

    def __init__(self, params, maximize=False, **kwargs):
        super().__init__(params, maximize=False, **kwargs)


def test_sgd_mistakes():
    op = OPS["sgd"]
    inputs = OptimizerInputs(np.ones(3), [CooArray(np.array([[0, 2]]), np.array([1.0, -2.0]), (3,))],
                             {"lr": 0.1, "maximize": True})
    assert diagnosis.diagnose(op, inputs, run_on(op, NoMaximizeSGD)(inputs), "float64").name == "no maximize"
    assert diagnosis.diagnose(op, inputs, run_on(op, torch.optim.SGD)(inputs), "float64") is None
    damped = OptimizerInputs(np.ones(3), [np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, -1.0])],
                             {"lr": 0.1, "momentum": 0.9, "dampening": 0.5})
    modelled = next(m for m in op.mistakes if m.name == "dampened first step").model(damped)["param"]
    # by hand: buf1 = 0.5 * g1, p1 = 1 - 0.1 * buf1; buf2 = 0.9 * buf1 + 0.5 * g2, p2 = p1 - 0.1 * buf2
    g1, g2 = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, -1.0])
    buf1 = 0.5 * g1
    buf2 = 0.9 * buf1 + 0.5 * g2
    np.testing.assert_allclose(modelled, 1 - 0.1 * buf1 - 0.1 * buf2)


def test_square_then_sum_in_bfloat16_is_not_one_update_per_duplicate_entry():
    """Both models match square-then-sum here (the state is the same sum of squares; the parameter,
    an ulp of 0.125 away from every update, does not move in bfloat16), and rounding puts the
    per-entry model's float64 parameter nearer: the example cannot tell them apart, so the mistake
    the catalogue lists first is named, not the one the noise favours."""
    op = OPS["adagrad"]
    inputs = OptimizerInputs(np.array([-20.875]), [CooArray(np.array([[0, 0, 0]]), np.array([1.0, 0.0, -2.0]), (1,))],
                             {"lr": 0.0169, "eps": 1.0, "initial_accumulator_value": 1.0})
    run = run_on(op, mutants.SquareThenSumAdagrad, torch.bfloat16)
    found = diagnosis.diagnose(op, inputs, run(inputs), "bfloat16", run)
    assert found is not None and found.name == "squares before summing"
    per_entry = next(m for m in op.mistakes if m.name == "one update per duplicate entry")
    assert per_entry.model(inputs) is not None  # (it does match: both were candidates)
