"""The judging core (conformance.verdict) and the generated search around it, on real runs: the
properties read every state from the implementation, and outside-like candidates that are right
(tests/candidates/outside_like.py) pass."""

from __future__ import annotations

import numpy as np
import torch

from conformance.backends.candidate import CandidateBackend
from conformance.cases.generated import Trial, check_unspecified_unchanged
from conformance.ops import OPS
from conformance.ops.optimizer_steps import OptimizerInputs, empty_gradient
from conformance_runs import by_case, load, run_inprocess

OUTSIDE = "tests/candidates/outside_like.py"


def _candidate_trial(op: str, candidate, dtype: str = "float32") -> Trial:
    return Trial(OPS[op], CandidateBackend("candidate", {op: candidate}), "cpu", dtype)


def test_unspecified_unchanged_reads_the_state_before_the_first_step():
    """A float64 accumulator holding torch's float32 0.1, widened (0.10000000149011612), is not
    "changed" by an empty gradient: the property reads the state the optimizer starts with."""
    from tests.candidates.outside_like import Float64StateAdagrad

    inputs = OptimizerInputs(np.array([1.0, -2.0, 0.5]), [empty_gradient((3,))],
                             {"lr": 0.1, "initial_accumulator_value": 0.1})
    trial = _candidate_trial("adagrad", Float64StateAdagrad)
    before = OPS["adagrad"].state_before_steps(trial.run, inputs)
    assert before["state_sum"].dtype == torch.float64
    assert float(before["state_sum"][0]) == float(np.float32(0.1)) != 0.1
    check_unspecified_unchanged(trial, inputs)  # raised "0.10000000149011612 vs 0.1" when rebuilt


def test_lazily_created_state_falls_back_to_the_documented_start():
    """torch's SparseAdam creates its moments at the first step: nothing to read before it, so the
    documented zeros stand in (and stock torch passes)."""
    inputs = OptimizerInputs(np.array([1.0, 2.0]), [empty_gradient((2,))], {"lr": 0.1})
    trial = _candidate_trial("sparse_adam", torch.optim.SparseAdam)
    before = OPS["sparse_adam"].state_before_steps(trial.run, inputs)
    assert not before["exp_avg"].any() and not before["exp_avg_sq"].any()
    check_unspecified_unchanged(trial, inputs)


def test_a_float64_state_adagrad_passes_every_item():
    code, path = run_inprocess("float64-state", "specs", "--conformance-op", "adagrad", "--conformance-backend",
                               "candidate,coo", "--conformance-impl", f"adagrad={OUTSIDE}:Float64StateAdagrad")
    outcomes = {key: record["outcome"] for key, record in by_case(load(path)).items() if "candidate" in key}
    assert not [k for k, v in outcomes.items() if v in ("failed", "error")], outcomes
    assert outcomes["adagrad-unspecified-unchanged[candidate-cpu-float32]"] == "passed"
    assert code == 0
