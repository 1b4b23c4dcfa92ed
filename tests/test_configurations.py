"""The configuration dimension (issue 50): each optimizer's declared space, its covering array (every pair
of settings and every triple of hyperparameter values in an explicit example, computed here from the
declarations, not from the generator), torch passing every configuration, and candidates that are torch
except for one interaction of two settings (tests/candidates/interactions.py) exposed and named."""

from __future__ import annotations

import itertools
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from conformance.core.types import RunContext
from conformance.ops import OPS
from conformance.ops.optimizers.configurations import (STEPS, ConfigurationSpace, covering_rows, describe, inputs_of,
                                                       refusal, uncoverable, valid_rows)
from conformance.ops.optimizers.drive import run_optimizer
from conformance_runs import REPO, load, run_inprocess
from tests.candidates import interactions

INTERACTIONS = "tests/candidates/interactions.py"
SPACED = [name for name, op in OPS.items() if getattr(op, "configuration_space", None) is not None]


def combinations_of(row: dict, space: ConfigurationSpace) -> set[tuple]:
    """Every pair of the row's settings and every triple of its hyperparameter values."""
    factors = list(space.factors())
    groups = [*itertools.combinations(factors, 2), *itertools.combinations(list(space.hyperparameters), 3)]
    return {tuple((name, repr(row[name])) for name in names) for names in groups}


def test_every_optimizer_declares_a_space():
    assert set(SPACED) == {name for name, op in OPS.items() if op.is_optimizer} == {"adagrad", "sgd", "sparse_adam"}


@pytest.mark.parametrize("name", SPACED)
def test_every_pair_and_triple_torch_runs_is_in_an_explicit_example(name):
    op = OPS[name]
    space = op.configuration_space
    wanted = set().union(*(combinations_of(row, space) for row in valid_rows(op)))
    got = set().union(*(combinations_of(row, space) for row in covering_rows(op)))
    assert wanted <= got, sorted(wanted - got)[:5]
    assert all(refusal(op, row) is None for row in covering_rows(op))
    # far fewer examples than configurations: the point of a covering array
    assert len(covering_rows(op)) <= len(valid_rows(op)) // 2


def test_what_torch_refuses_is_never_an_example_and_is_listed():
    sgd = OPS["sgd"]
    refused = uncoverable(sgd)
    assert (("nesterov", "True"), ("weight_decay", "0.1"), (STEPS, "'sparse'")) not in refused  # a triple is not a pair
    assert (("momentum", "0.0"), ("nesterov", "True")) in refused  # ValueError: nesterov needs momentum
    assert (("weight_decay", "0.1"), (STEPS, "'sparse'")) in refused  # RuntimeError: sparse + weight decay
    row = {**{k: v[0] for k, v in sgd.configuration_space.hyperparameters.items()}, "nesterov": True, STEPS: "dense"}
    assert refusal(sgd, row).startswith("ValueError: Nesterov momentum requires")
    assert all(row["steps"] in ("sparse", "empty") for row in covering_rows(OPS["sparse_adam"]))


def test_the_generator_on_a_space_with_a_refusal():
    """A toy record: three factors, one pair refused; every other pair is covered, the refused one never."""
    class Toy:
        configuration_space = ConfigurationSpace({"a": (0, 1, 2), "b": (False, True)}, step_kinds=("sparse", "dense"))

        @staticmethod
        def reference(inputs):
            if inputs.hyperparameters["a"] == 2 and isinstance(inputs.grads[0], np.ndarray):
                raise RuntimeError("a=2 refuses dense steps")
            return {}

    rows = covering_rows(Toy())
    pairs = {(("a", repr(r["a"])), (STEPS, repr(r[STEPS]))) for r in rows}
    assert (("a", "2"), (STEPS, "'dense'")) not in pairs and (("a", "2"), (STEPS, "'sparse'")) in pairs
    assert len({(r["a"], r["b"]) for r in rows}) == 6  # every (a, b) pair
    assert uncoverable(Toy()) == {(("a", "2"), (STEPS, "'dense'"))}


@pytest.mark.parametrize("bad, field", [
    (dict(hyperparameters={"lr": (0.1,)}, step_kinds=("sparse", "diagonal")), "step_kinds"),
    (dict(hyperparameters={"lr": ()}), "hyperparameters['lr']"),
    (dict(hyperparameters={"lr": (0.1, 0.1)}), "hyperparameters['lr']"),
])
def test_a_space_that_cannot_be_is_refused_naming_its_field(bad, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        ConfigurationSpace(**bad)


def test_a_configuration_is_named_by_what_differs_from_the_defaults():
    sgd = OPS["sgd"]
    defaults = {k: v[0] for k, v in sgd.configuration_space.hyperparameters.items()}
    row = {**defaults, "weight_decay": 0.1, "maximize": True, STEPS: "dense"}
    assert describe(sgd, inputs_of(row)) == "weight_decay=0.1, maximize=True, dense steps"
    assert describe(sgd, inputs_of({**defaults, STEPS: "empty"})) == "empty steps"


def _disagreeing_rows(op, implementation) -> list[str]:
    """The covering rows where ``implementation`` (float64) leaves the reference (parameter or named state)."""
    found = []
    for row in covering_rows(op):
        inputs = inputs_of(row)
        want = op.reference(inputs)
        got = run_optimizer(implementation, inputs, RunContext("cpu", torch.float64), op.state_outputs)
        for name in ("param", *op.state_tensors):
            if not np.allclose(np.asarray(got[name].cpu(), dtype=np.float64), want[name], rtol=1e-7, atol=1e-9):
                found.append(describe(op, inputs))
                break
    return found


@pytest.mark.parametrize("name", SPACED)
def test_torch_agrees_with_the_reference_on_every_covering_row(name):
    op = OPS[name]
    assert _disagreeing_rows(op, op.torch_implementation) == []


@pytest.mark.parametrize("candidate", interactions.PLANTED, ids=lambda c: c.__name__)
def test_each_interaction_is_exposed_by_a_row_that_sets_both_of_its_settings(candidate):
    op = OPS[interactions.op_of(candidate)]
    exposed = _disagreeing_rows(op, candidate)
    assert exposed, f"{candidate.__name__} agrees with the reference on every covering row"
    # some exposing configuration sets each setting the candidate names (away from torch's default)
    wanted = [f"{setting}=" if setting != STEPS else f"{value} steps" for setting, value in
              candidate.EXPOSED_BY.items()]
    assert any(all(part in label for part in wanted) for label in exposed), (exposed, candidate.EXPOSED_BY)


@pytest.mark.slow  # 8 in-process runs of the configurations items (float64), seconds each
@pytest.mark.parametrize("candidate", interactions.PLANTED, ids=lambda c: c.__name__)
def test_each_planted_candidate_fails_its_configurations_items_naming_the_configuration(candidate):
    op = interactions.op_of(candidate)
    code, path = run_inprocess(f"interaction-{candidate.__name__}", "specs", "--conformance-backend", "candidate",
                               "--conformance-op", op, "--conformance-dtype", "float64",
                               f"--conformance-impl={op}={INTERACTIONS}:{candidate.__name__}", "-k", "configurations")
    records = load(path)["records"]
    assert code == 1 and records and {r["outcome"] for r in records} == {"failed"}, \
        [(r["nodeid"], r["outcome"], r["message"]) for r in records]
    for record in records:
        assert "configuration " in record["message"], record["message"]
        assert any(f"{k}=" in record["message"] for k in candidate.EXPOSED_BY if k != STEPS), record["message"]


@pytest.mark.acceptance  # conformance check at its defaults, from an empty directory, three candidates at once
def test_check_at_its_defaults_fails_interaction_candidates_from_an_empty_directory(tmp_path):
    impls = [f"{interactions.op_of(c)}={REPO / INTERACTIONS}:{c.__name__}" for c in
             (interactions.DocsOrderMaximizeSGD, interactions.UndecayedSumAdagrad,
              interactions.BiasCorrectedDenominatorSparseAdam)]
    proc = subprocess.run([sys.executable, "-m", "conformance", "check", *impls], cwd=tmp_path, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 1 and "RESULT: FAIL" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    records = load(tmp_path / "reports" / "candidate.json")["records"]
    failed = {r["op"] for r in records if r["backend"] == "candidate" and r["case"].endswith("-configurations")
              and r["outcome"] == "failed" and "configuration " in (r["message"] or "")}
    assert failed == {"sgd", "adagrad", "sparse_adam"}, failed


def test_the_coverage_map_says_what_ran_what_was_unsupported_and_what_torch_refuses():
    from conformance.results.coverage_map import coverage_lines, coverage_map, coverage_rows

    def record(case, outcome, message=None, backend="candidate"):
        return {"generated": True, "op": "sgd", "case": f"sgd-{case}", "backend": backend, "outcome": outcome,
                "message": message}

    records = [record("configurations", "failed", "configuration ..."), record("lifecycle", "passed"),
               record("complex-agrees", "unsupported", "unsupported: the candidate does not declare supports_complex"),
               record("lifecycle", "passed", backend="coo"),
               {"op": "sgd", "case": "basic", "backend": "candidate", "outcome": "passed"}]  # a spec case: not a property
    entry = coverage_map(records, "candidate")["sgd"]
    assert entry["ran"] == ["configurations", "lifecycle"]
    assert entry["unsupported"] == {"complex-agrees": "the candidate does not declare supports_complex"}
    sgd = OPS["sgd"]
    assert entry["configurations"] == {"explicit": len(covering_rows(sgd)), "valid": len(valid_rows(sgd)),
                                       "refused": len(uncoverable(sgd))}
    lines = coverage_lines(records, "candidate")
    assert lines[0].startswith("  covered: sgd: 2 properties ran; configurations: ") and "torch refuses" in lines[0]
    assert lines[1] == "    unsupported: complex-agrees: the candidate does not declare supports_complex"
    # the report's rows: the candidate always, another backend only where something was unsupported
    assert [(r["op"], r["backend"]) for r in coverage_rows(records, ["coo", "candidate"])] == [("sgd", "candidate")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_coalesce_on_complex_values_fails_a_real_accumulator_and_passes_torch(dtype):
    from conformance.backends.candidate import CandidateBackend
    from conformance.cases.trial import Trial
    from conformance.core.tensors import CooArray
    from conformance.core.types import Mismatch
    from conformance.ops.coalesce import check_complex_coalesce

    coo = CooArray(np.array([[1, 0, 1, 2]]), np.array([1.0, 2.0, -0.5, 4.0]), (3,))  # a duplicate at 1
    check_complex_coalesce(Trial(OPS["coalesce"], CandidateBackend("candidate", {"coalesce": torch.Tensor.coalesce}),
                                 "cpu", dtype), coo)
    wrong = Trial(OPS["coalesce"], CandidateBackend("candidate", {"coalesce": interactions.real_accumulator_coalesce}),
                  "cpu", dtype)
    with pytest.raises(Mismatch, match=r"values\.imag differs from .* complex(64|128) values"):
        check_complex_coalesce(wrong, coo)


def test_every_op_covers_every_dimension_or_says_why_not():
    """The input space's dimensions (conformance.ops.base.DIMENSIONS): each op has the property that covers
    it, or a written reason in its declarations; a reason for a dimension the op does cover is stale."""
    from conformance.ops.base import DIMENSIONS

    problems = []
    for name, op in OPS.items():
        properties = {p.name for p in op.all_properties()}
        for dimension, prop in DIMENSIONS.items():
            covered, reason = prop in properties, op.dimensions_left_out.get(dimension, "").strip()
            if not covered and not reason:
                problems.append(f"{name} has no {prop} property and no reason for leaving out {dimension}")
            if covered and reason:
                problems.append(f"{name} covers {dimension} ({prop}) yet gives a reason for leaving it out")
        problems += [f"{name}: unknown dimension {d!r}" for d in op.dimensions_left_out if d not in DIMENSIONS]
    assert not problems, "\n".join(problems)
