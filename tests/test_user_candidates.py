"""Implementations written the way users write them (tests/candidates/users.py), pinned: a refusal
in the implementation's own words conforms (issue 29, point 6), a refusal of another exception
type does not, and the wrong ones are diagnosed by the mistake they make (point 9): NaN at
entries the gradient does not specify, a step that does nothing, nondeterminism on the properties
that compare separate runs, and an exception without text shown by its type.

Each run is in this process (tests/conformance_runs.py), on the few items it is about."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.core import diagnosis
from conformance.cases.checks import check_rejects_invalid
from conformance.cases.trial import Trial
from conformance.ops import OPS
from conformance.ops.optimizers import OptimizerInputs
from conformance.judging.runner import expected_error_problem
from conformance.specs.load import load_spec
from conformance.core.tensors import CooArray
from conformance.core.types import Mismatch, RunContext, exception_text
from tests.candidates import users
from tests.conformance_runs import REPO, load, run_inprocess

USERS = "tests/candidates/users.py"
WEIGHT_DECAY_CASE = "sparse-gradient-with-weight-decay"


def candidate_run(name: str, candidate: str, dtypes: str, select: str, *extra: str, op: str = "adagrad") -> list[dict]:
    """``select`` (a -k expression) of the suite's items for ``op`` with ``candidate`` (from
    users.py) as the only backend; the run's records."""
    code, path = run_inprocess(name, "specs", "--conformance-backend", "candidate", "--conformance-op", op,
                               "--conformance-dtype", dtypes, f"--conformance-impl={op}={USERS}:{candidate}",
                               "-k", select, *extra)
    assert path.exists(), f"{name}: no results (exit code {code})"
    records = load(path)["records"]
    assert records, f"{name}: no item ran"
    return records


def failure_lines(record: dict) -> str:
    return record.get("message") or ""


# ---------------------------------------------------------------- refusals judged by kind (point 6)

@pytest.mark.slow  # 2-3 s: the fast tier stays within its 90 s
def test_a_refusal_in_its_own_words_conforms():
    """OwnWordsAdagrad raises RuntimeError with its own text where torch raises: the spec case and the
    generated property pass, and the record keeps the candidate's words."""
    records = candidate_run("users-own-words", "OwnWordsAdagrad", "float32,float64",
                            f"{WEIGHT_DECAY_CASE} or rejects-invalid", "--conformance-examples", "30")
    assert {r["outcome"] for r in records} == {"passed"}, [(r["nodeid"], r["message"]) for r in records]
    spec_items = [r for r in records if r["case"] == WEIGHT_DECAY_CASE]
    generated = [r for r in records if r["case"] == "adagrad-rejects-invalid"]
    assert len(spec_items) == 2 and len(generated) == 2
    for record in spec_items:
        assert record["verdict"] == "conforms"
        assert record["message"] == f"raised RuntimeError as torch does: {users.SPARSE_WEIGHT_DECAY}"
    assert all(r["examples"] >= 10 for r in generated)


@pytest.mark.slow
def test_a_refusal_of_another_exception_type_fails():
    """ValueErrorAdagrad raises ValueError where torch raises RuntimeError: `except RuntimeError`
    would not catch it, so the spec case and the generated property fail, saying what was raised."""
    records = candidate_run("users-value-error", "ValueErrorAdagrad", "float64",
                            f"{WEIGHT_DECAY_CASE} or rejects-invalid", "--conformance-examples", "30")
    assert {r["case"]: r["outcome"] for r in records} == {WEIGHT_DECAY_CASE: "failed",
                                                          "adagrad-rejects-invalid": "failed"}
    for record in records:
        assert "expected RuntimeError, the type torch raises here" in record["message"], record["message"]
        assert f"it raised ValueError: {users.SPARSE_WEIGHT_DECAY}" in record["message"], record["message"]


def test_the_exact_text_is_asked_of_torch_and_the_builtin_backends_only():
    """The same refusal in other words: judged by kind (a candidate) it is met; judged with the
    text (stock torch's and the built-in backends' own items) it is missed, and a subclass of the
    expected type (NotImplementedError is a RuntimeError) is met by kind."""
    case = next(c for c in load_spec(REPO / "specs" / "adagrad.yaml").cases if c.id == WEIGHT_DECAY_CASE)

    def raising(error):
        def call():
            raise error
        return call

    own_words = RuntimeError(users.SPARSE_WEIGHT_DECAY)
    assert expected_error_problem(case, raising(own_words), by_kind=True) is None
    missed = expected_error_problem(case, raising(own_words))
    assert missed is not None and missed.how == "other-message"
    assert repr(users.SPARSE_WEIGHT_DECAY) in str(missed)
    assert expected_error_problem(case, raising(NotImplementedError()), by_kind=True) is None
    other = expected_error_problem(case, raising(ValueError()), by_kind=True)
    assert other is not None and other.how == "other-type" and str(other).endswith("it raised ValueError")
    assert expected_error_problem(case, lambda: None, by_kind=True).how == "nothing-raised"


# ---------------------------------------------------------------- sharper diagnoses (point 9)

NAN_MISTAKE = "NaN at entries the gradient does not specify"


@pytest.mark.slow  # 2-3 s: the fast tier stays within its 90 s
def test_nan_at_entries_the_gradient_does_not_specify_is_named():
    """DenseUpdateAdagrad in float16 (eps = 1e-10 rounds to 0): 0/0 at entries no gradient touched.
    unspecified-unchanged and rounds-correctly fail naming it, and rounds-correctly's message says
    NaN, not "truncation or accumulating in a lower precision"."""
    records = candidate_run("users-nan", "DenseUpdateAdagrad", "float16",
                            "generated and (unspecified-unchanged or rounds-correctly)", "--conformance-examples", "20")
    failing = [r for r in records if r["outcome"] == "failed"]
    assert {r["case"] for r in failing} == {"adagrad-unspecified-unchanged", "adagrad-rounds-correctly"}, \
        [(r["case"], r["outcome"]) for r in records]
    for record in failing:
        assert record.get("looks_like", {}).get("name") == NAN_MISTAKE, record["message"]
        assert f"looks like: {NAN_MISTAKE} {diagnosis.DASH}" in record["message"]
    rounding = next(r for r in failing if r["case"] == "adagrad-rounds-correctly")
    assert "param is NaN at " in rounding["message"] and "Truncation instead of" not in rounding["message"]


def test_nan_at_unspecified_entries_by_hand():
    """The model on a hand-made example: eps = 1e-10 in float16 and eps = 0 in float64 write 0/0 at
    entries 1 and 2; eps = 1e-10 in float64 writes nothing (then the candidate conforms there)."""
    op = OPS["adagrad"]
    inputs = OptimizerInputs(np.array([1.0, 2.0, -1.0]), [CooArray(np.array([[0]]), np.array([0.5]), (3,))],
                             {"lr": 0.1, "eps": 1e-10})
    for dtype, eps in (("float16", 1e-10), ("float64", 0.0)):
        example = OptimizerInputs(inputs.param, inputs.grads, {"lr": 0.1, "eps": eps})
        run = run_on(op, users.DenseUpdateAdagrad, dtype)
        outputs = run(example)
        assert np.isnan(outputs["param"][1:].double().numpy()).all()
        assert diagnosis.diagnose(op, example, outputs, dtype, run).name == NAN_MISTAKE
    run = run_on(op, users.DenseUpdateAdagrad, "float64")
    assert not np.isnan(run(inputs)["param"].numpy()).any()


def run_on(op, candidate, dtype: str):
    return lambda inputs: op.run_candidate(candidate, inputs, RunContext("cpu", getattr(torch, dtype)))


def test_a_missed_refusal_names_no_mistake_of_values():
    """NoEpsCheckAdagrad takes a negative eps without torch's ValueError: rejects-invalid fails saying
    nothing was raised, and no "looks like" follows (its catalogue is of wrong results: it named "step
    that does nothing" here, for a step the harness never got to compare)."""
    records = candidate_run("users-no-eps-check", "NoEpsCheckAdagrad", "float64", "generated and rejects-invalid",
                            "--conformance-examples", "20")
    assert [r["outcome"] for r in records] == ["failed"]
    assert "but nothing was raised" in records[0]["message"]
    assert "looks_like" not in records[0] and "looks like:" not in records[0]["message"], records[0]["message"]


def test_a_step_that_does_nothing_is_named():
    """OutOfPlaceAdagrad (``p = p.add(...)``) never moves the parameter: agrees-with-reference
    fails with "looks like: step that does nothing"."""
    records = candidate_run("users-unmoved", "OutOfPlaceAdagrad", "float32,float64",
                            "generated and agrees-with-reference", "--conformance-examples", "20")
    assert {r["outcome"] for r in records} == {"failed"}
    for record in records:
        assert record.get("looks_like", {}).get("name") == diagnosis.STEP_DOES_NOTHING.name, record["message"]
        assert f"looks like: {diagnosis.STEP_DOES_NOTHING.name} {diagnosis.DASH}" in record["message"]


def test_a_hyperparameter_rounded_to_zero_is_a_step_that_does_nothing():
    """DeviceBetasSparseAdam keeps beta1 = 0.999 in bfloat16, where it is 1.0: the parameter never
    moves, and the failure says so (not "truncation"); in float32 it is right."""
    op = OPS["sparse_adam"]
    inputs = OptimizerInputs(np.array([1.0, 2.0, -1.0]), [CooArray(np.array([[0, 2]]), np.array([0.5, -1.0]), (3,))],
                             {"lr": 0.1, "betas": (0.999, 0.999)})
    run = run_on(op, users.DeviceBetasSparseAdam, "bfloat16")
    outputs = run(inputs)
    assert outputs["param"].tolist() == [1.0, 2.0, -1.0]
    record: dict = {}
    failure = diagnosis.looks_like(op, inputs, outputs, "bfloat16", record, Mismatch("param differs"), run)
    assert record["looks_like"]["name"] == "step that does nothing"
    assert str(failure).splitlines()[-1].strip().startswith(f"looks like: step that does nothing {diagnosis.DASH}")
    right = run_on(op, users.DeviceBetasSparseAdam, "float32")
    assert diagnosis.diagnose(op, inputs, right(inputs), "float32", right) is None


SEPARATE_RUNS = ("unspecified-unchanged", "param-groups", "state-dict-resume", "sparse-equals-dense")


@pytest.mark.slow
def test_nondeterminism_is_the_likely_cause_on_properties_that_compare_separate_runs():
    """PooledStateAdagrad shares its accumulators between instances: deterministic fails, and so do
    the properties that compare separate runs -- each saying "looks like: nondeterministic", not
    naming a semantic mistake."""
    names = " or ".join(("deterministic", *SEPARATE_RUNS))
    records = candidate_run("users-nondeterministic", "PooledStateAdagrad", "float64",
                            f"generated and ({names})", "--conformance-examples", "10", "--conformance-no-shrink")
    outcomes = {r["case"].removeprefix("adagrad-"): r["outcome"] for r in records}
    assert outcomes == {name: "failed" for name in ("deterministic", *SEPARATE_RUNS)}, outcomes
    for record in records:
        assert record.get("looks_like", {}).get("name") == "nondeterministic", (record["case"], record["message"])
        assert f"looks like: nondeterministic {diagnosis.DASH}" in record["message"]


def test_a_deterministic_implementation_is_not_called_nondeterministic():
    op = OPS["adagrad"]
    inputs = OptimizerInputs(np.array([1.0, 2.0, -1.0]), [CooArray(np.array([[0, 0]]), np.array([0.5, 1.0]), (3,))],
                             {"lr": 0.1})
    assert not diagnosis.nondeterministic(inputs, run_on(op, users.OwnWordsAdagrad, "float64"))
    assert diagnosis.nondeterministic(inputs, run_on(op, users.PooledStateAdagrad, "float64"))


def test_an_exception_without_text_is_shown_by_its_type():
    """A bare ``raise NotImplementedError``: the record's message, the generated failure and the
    checks' messages show "NotImplementedError", never an empty text."""
    assert exception_text(NotImplementedError()) == "NotImplementedError"
    assert exception_text(RuntimeError("float16")) == "RuntimeError: float16"
    records = candidate_run("users-no-text", "HalfUnsupportedAdagrad", "float16",
                            "duplicates-summed-before-squaring or (generated and agrees-with-reference)",
                            "--conformance-examples", "5")
    spec_item = next(r for r in records if r["case"] == "duplicates-summed-before-squaring")
    assert spec_item["outcome"] == "error" and spec_item["message"] == "NotImplementedError"
    generated = next(r for r in records if r["case"] == "adagrad-agrees-with-reference")
    assert generated["outcome"] == "error" and "\n  NotImplementedError\n" in generated["message"]

    class Bare:  # a backend that refuses negative learning rates without a word, as the wrong type
        judged_against_torch = True
        is_oracle = False
        name = "bare"

        def run(self, op, inputs, ctx):
            raise NotImplementedError

    op = OPS["adagrad"]
    invalid = OptimizerInputs(np.ones(2), [CooArray(np.array([[0]]), np.array([1.0]), (2,))], {"lr": -1.0})
    with pytest.raises(AssertionError) as raised:
        check_rejects_invalid(Trial(op, Bare(), "cpu", "float64"), invalid)
    assert str(raised.value).endswith("but it raised NotImplementedError")


# ---------------------------------------------------------------- a constructor without an option

def test_a_constructor_without_one_of_torchs_options_is_told_how_to_decline_it():
    """torch's constructor is the contract, so an item that sets maximize is an error for a
    constructor without it (the others pass); its message says how to decline the option instead
    (take it, raise Unsupported; unsupported_options for the draws)."""
    records = candidate_run("users-no-maximize", "NoMaximizeArgumentAdagrad", "float32",
                            "maximize or tutorial-step-1", "--conformance-examples", "0")
    outcome = {r["case"]: r["outcome"] for r in records}
    assert outcome == {"maximize": "error", "dense-step-maximize-with-initial-accumulator": "error",
                       "tutorial-step-1": "passed"}, outcome
    message = next(r for r in records if r["case"] == "maximize")["message"]
    assert message.startswith("TypeError: NoMaximizeArgumentAdagrad.__init__() got an unexpected keyword argument "
                              "'maximize'; torch.optim.Adagrad's constructor takes 'maximize'. If "
                              "NoMaximizeArgumentAdagrad does not support it, take it and raise "
                              "conformance.Unsupported when it is set"), message
    assert "unsupported_options = {'maximize'}" in message


def test_other_type_errors_of_a_constructor_are_left_as_they_are():
    from conformance.ops.optimizers.contract import option_not_taken

    op = OPS["adagrad"]
    named = TypeError("X.__init__() got an unexpected keyword argument 'maximize'")
    assert option_not_taken(op, users.NoMaximizeArgumentAdagrad, named, {"maximize": True}).startswith(
        "torch.optim.Adagrad's constructor takes 'maximize'")
    assert option_not_taken(op, users.NoMaximizeArgumentAdagrad, TypeError("lr must be a float"), {"lr": 1}) is None
    not_an_option = TypeError("X.__init__() got an unexpected keyword argument 'foreach'")
    assert option_not_taken(op, users.NoMaximizeArgumentAdagrad, not_an_option, {"foreach": True}) is None
    not_given = TypeError("inner() got an unexpected keyword argument 'maximize'")  # raised deeper, not by us
    assert option_not_taken(op, users.NoMaximizeArgumentAdagrad, not_given, {"lr": 1.0}) is None
