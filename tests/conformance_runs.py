"""Helpers for the results, report and gate tests: real runs of the suite, in this process where
possible (torch is imported once), each cached for the whole test session."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SMALL_SPEC = REPO / "tests" / "data" / "robustness_adagrad.yaml"
ROBUST = "tests/candidates/robustness.py"
MUTANTS = "tests/candidates/mutants.py"

# in every pytest run a test starts in its own process: pytest's unraisableexception plugin ends each
# session with gc.collect() five times, about 1 s with torch loaded
NO_GC_AT_EXIT = ("-p", "no:unraisableexception")

_TMP = Path(tempfile.mkdtemp(prefix="conformance-test-runs-"))
atexit.register(shutil.rmtree, _TMP, True)


def base_args(results: Path) -> list[str]:
    return ["-p", "no:cacheprovider", "-q", "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"),
            "-o", "addopts=", *NO_GC_AT_EXIT,
            "--conformance-device", "cpu", "--conformance-results", str(results)]


def run_inprocess(name: str, *args: str, timeout: float = 0) -> tuple[int, Path]:
    """``pytest ARGS --conformance-results <tmp>/<name>.json`` in this process; (exit code, results path)."""
    results = _TMP / name / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    os.environ["CONFORMANCE_TEST_RESULTS"] = str(results)  # for candidates that look at it mid-run
    cwd = os.getcwd()
    os.chdir(REPO)  # candidate paths are relative to the repository
    try:
        code = pytest.main([*base_args(results), "--conformance-timeout", str(timeout), *args])
    finally:
        os.chdir(cwd)
    return int(code), results


def pytest_here(command: list[str]) -> int:
    """``python -m pytest ARGS`` as ``pytest.main(ARGS)`` in this process (for an entry point's
    ``subprocess.call`` of its own pytest)."""
    assert command[:3] == [sys.executable, "-m", "pytest"], command
    return int(pytest.main([*command[3:], *NO_GC_AT_EXIT]))


def replay_here(patch: pytest.MonkeyPatch) -> None:
    """``conformance replay``'s pytest as :func:`pytest_here`, and its probe of the candidate skipped (a
    child interpreter, about 5 s; the slow tier's replays, across the process boundary, run it)."""
    from conformance.entry_points import replay, supervise

    patch.setattr(supervise, "run_pytest", lambda command: (pytest_here(command), None))
    patch.setattr(replay, "_probe", lambda targets, timeout: None)


def run_subprocess(name: str, *args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, Path]:
    """The same in a fresh interpreter (for runs that crash or kill their process)."""
    results = _TMP / name / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "pytest", *base_args(results), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return proc, results


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def by_case(document: dict) -> dict[str, dict]:
    return {f"{r['case']}[{r['backend']}-{r['device']}-{r['dtype']}]": r for r in document["records"]}


@lru_cache(maxsize=None)
def adagrad_run(candidate: str) -> Path:
    """specs/adagrad.yaml with ``candidate`` (from tests/candidates/mutants.py) as the only backend."""
    code, path = run_inprocess(f"adagrad-{candidate}", str(REPO / "specs" / "adagrad.yaml"),
                               "--conformance-impl", f"adagrad={MUTANTS}:{candidate}")
    assert path.exists(), f"the run with {candidate} wrote no results file (exit code {code})"
    return path


@lru_cache(maxsize=None)
def builtin_run() -> Path:
    """specs/coalesce.yaml on three built-in backends, cpu."""
    code, path = run_inprocess("builtin", str(REPO / "specs" / "coalesce.yaml"),
                               "--conformance-backend", "reference,dense,coo")
    assert code == 0, f"the built-in run failed (exit code {code})"
    return path


@lru_cache(maxsize=None)
def benchmark_run(candidate: str) -> Path:
    """The small spec's benchmark with a robustness candidate (TorchAdagrad or SlowAdagrad)."""
    target = f"{MUTANTS}:TorchAdagrad" if candidate == "TorchAdagrad" else f"{ROBUST}:{candidate}"
    code, path = run_inprocess(f"bench-{candidate}", str(SMALL_SPEC), "--conformance-benchmark",
                               "-m", "conformance_benchmark", "--conformance-impl", f"adagrad={target}")
    assert code == 0, f"the benchmark run with {candidate} failed (exit code {code})"
    return path


def fixture_copy(path: Path, name: str, **run_fields) -> Path:
    """A copy of a real results file with run metadata changed -- a TEST FIXTURE standing for a run
    on another torch version (the label says so)."""
    document = load(path)
    document["run"].update(run_fields)
    document["run"]["id"] = f"fixture-{name}"
    out = _TMP / "fixtures" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document), encoding="utf-8")
    return out


@lru_cache(maxsize=None)
def stock_adagrad_run() -> Path:
    """specs/adagrad.yaml on stock torch (the coo backend), cpu: the baseline beside a candidate run."""
    code, path = run_inprocess("stock-adagrad", str(REPO / "specs" / "adagrad.yaml"), "--conformance-backend", "coo",
                               "--conformance-label", "stock torch")
    assert code == 0, f"the stock torch run failed (exit code {code})"
    return path


def wrong_adagrad_source() -> str:
    """The README's wrong Adagrad (tests/candidates/mutants.py:SquareBeforeSumAdagrad) as a file of
    its own, the way a user has it in their repository: the module's imports and constants, the
    class, its base and the name."""
    import ast

    source = (REPO / MUTANTS).read_text(encoding="utf-8")
    keep = {"CleanAdagrad", "SquareThenSumAdagrad", "SquareBeforeSumAdagrad", "WEIGHT_DECAY_ERROR"}
    parts = []
    for node in ast.parse(source).body:
        names = {getattr(node, "name", None)} | {getattr(t, "id", None) for t in getattr(node, "targets", [])}
        if isinstance(node, (ast.Import, ast.ImportFrom)) or names & keep:
            parts.append(ast.get_source_segment(source, node))
    return "\n\n\n".join(parts) + "\n"


# a spec file of a user's own (tests/test_replay.py, tests/test_outside_project.py)
# the smallest valid spec: the base the bad-input tests change one thing of
MINIMAL_COALESCE_SPEC = """\
op: coalesce
cases:
  - id: a
    derivation: "1 + 2 = 3"
    dtypes: [float32]
    inputs:
      tensor: {indices: [[1, 1]], values: [1.0, 2.0], size: [2]}
    expected:
      values: [3.0]
"""

OWN_COALESCE_SPEC = """\
op: coalesce
title: my own coalesce spec
sources:
  mine: {title: "torch.Tensor.coalesce's documented contract", derivation: "duplicates summed, indices sorted"}
defaults: {source: mine, dtypes: [float32]}
cases:
  - id: one-duplicate
    derivation: "(1,0) -> 4 + 5 = 9; (0,2) -> 3 sorts first"
    inputs:
      tensor: {indices: [[1, 0, 1], [0, 2, 0]], values: [4.0, 3.0, 5.0], size: [2, 3]}
    expected: {indices: [[0, 1], [2, 0]], values: [3.0, 9.0], nnz: 2}
"""


# a narrow run with a failing candidate beside two built-in backends (spec cases only: which example a
# generated item reports depends on what the process ran before it), whole and in three shards
SHARDED_RUN = [str(SMALL_SPEC), "--conformance-backend", "reference,coo,candidate", "--conformance-examples", "0",
               "--conformance-dtype", "float64", "--conformance-impl", f"adagrad={MUTANTS}:SquareBeforeSumAdagrad"]


@lru_cache(maxsize=None)
def sharded_runs() -> dict[str, Path]:
    """``SHARDED_RUN`` in this process: {"whole": ..., "shard-1": ..., "shard-2": ..., "shard-3": ...}."""
    code, whole = run_inprocess("sharded-whole", *SHARDED_RUN)
    assert code == 1, f"the wrong candidate should fail the whole run (exit code {code})"  # `after`
    paths = {"whole": whole}
    for k in (1, 2, 3):
        code, path = run_inprocess(f"sharded-{k}", *SHARDED_RUN, "--conformance-shard", f"{k}/3")
        assert code in (0, 1) and path.exists(), f"shard {k}/3: exit code {code}"
        paths[f"shard-{k}"] = path
    return paths


def stub_checks_pytest(patch: pytest.MonkeyPatch, records: list[dict], **run_fields) -> None:
    """``conformance check`` with its probe skipped and its pytest stubbed: the run writes a complete
    results file of ``records`` (exit status 0), under the run id check gave it."""
    from conformance.entry_points import check, supervise
    from test_results_files import document

    patch.setattr(check, "_probe", lambda *args, **kwargs: None)

    def fake_pytest(command):
        run_id = command[command.index("--conformance-run-id") + 1]
        results = Path(command[command.index("--conformance-results") + 1])
        results.write_text(json.dumps(document(records, id=run_id, exit_status=0, **run_fields)))
        return 0, None

    patch.setattr(supervise, "run_pytest", fake_pytest)
