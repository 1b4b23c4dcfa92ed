"""A user's first contact: implementations written the way users write them get the verdict they
deserve (issue 29). Each runs in this process on the packaged specs' generated items."""

from __future__ import annotations

from conformance_runs import by_case, load, run_inprocess

LAZY = "tests/candidates/lazy_state.py"


def _run(name: str, op: str, impl: str, *extra: str, examples: int = 8) -> tuple[int, dict]:
    code, path = run_inprocess(name, "specs", "--conformance-op", op, "--conformance-impl", f"{op}={impl}",
                               "--conformance-backend", "candidate", "--conformance-examples", str(examples), *extra)
    return code, load(path)


def test_an_adagrad_that_creates_its_state_at_the_first_step_passes():
    """torch's Adam and SGD create their state at the first step; the "before" of a lazily created
    accumulator is the documented start in the dtype the candidate creates it in (0.1 in float32 is
    0.10000000149011612), never a float64 value rebuilt by the suite."""
    code, document = _run("lazy-adagrad", "adagrad", f"{LAZY}:LazyAdagrad", "-k", "unspecified-unchanged")
    outcomes = {key: record["outcome"] for key, record in by_case(document).items()}
    assert set(outcomes) == {f"adagrad-unspecified-unchanged[candidate-cpu-{d}]"
                             for d in ("float16", "bfloat16", "float32", "float64")}, outcomes
    assert code == 0 and set(outcomes.values()) == {"passed"}, outcomes
