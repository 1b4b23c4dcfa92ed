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


def test_a_library_that_imports_slowly_is_not_timed_out_on_its_first_item():
    """The first call of each op (a library imported at its first use) is made before any item's
    timer starts: with a 1 s item timeout, a 3 s first import costs no item."""
    code, path = run_inprocess("slow-import", "specs", "--conformance-op", "adagrad", "--conformance-backend",
                               "candidate", "--conformance-impl", "adagrad=tests/candidates/slow_import.py:SlowImportAdagrad",
                               "--conformance-examples", "0", "-k", "tutorial-step-1 and float32", timeout=1)
    (record,) = load(path)["records"]
    assert (code, record["outcome"]) == (0, "passed"), record
