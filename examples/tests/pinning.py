"""Run ``pytest specs`` on one candidate in a subprocess and compare its results JSON with the
verdicts pinned for it.

Each adapter's test names the items whose outcome is pinned (``{nodeid: outcome}``, or
``{nodeid: (outcome, text the message must contain)}``); every other item of the run must end in
one of ``ALLOWED`` (by default passed, xfail, unsupported), so a new failure of an outside library,
or an item that starts failing because the suite changed, fails the test with the item named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Hypothesis examples per generated item: JAX and TensorFlow compile a program for every new
# shape, so the pinned runs keep the generated items small (the spec cases all run).
EXAMPLES = os.environ.get("CONFORMANCE_EXAMPLES_EXAMPLES", "4")
ALLOWED = frozenset({"passed", "xfail", "unsupported", "skipped"})
_CACHE: dict[tuple[str, ...], dict[str, dict]] = {}


def run_candidates(impls: dict[str, str], *extra: str) -> dict[str, dict]:
    """{nodeid: record} of one ``pytest specs`` run gating ``{op: target}`` together (one process per
    library: importing JAX or TensorFlow costs more than most of its items), cached per process."""
    key = (*sorted(impls.items()), *extra)
    if key not in _CACHE:
        with tempfile.TemporaryDirectory() as tmp:
            results = Path(tmp) / "r.json"
            # no shrinking (CONFORMANCE_EXAMPLES_SHRINK=1 keeps it): the pinned runs need each item's
            # outcome only, and shrinking tries a new input shape per call, which JAX and TensorFlow
            # compile; a failing float16 JAX coalesce item shrank past the 300 s per-item timeout
            shrink = [] if os.environ.get("CONFORMANCE_EXAMPLES_SHRINK") == "1" else ["--conformance-no-shrink"]
            command = [sys.executable, "-m", "pytest", "specs", *shrink, "--conformance-device", "cpu",
                       "--conformance-op", ",".join(sorted(impls)),
                       *[f"--conformance-impl={op}={target}" for op, target in sorted(impls.items())],
                       "--conformance-examples", EXAMPLES, "--conformance-results", str(results),
                       "--conformance-counterexamples", str(Path(tmp) / "counterexamples"),
                       "--conformance-timeout", "300", "-p", "no:cacheprovider", "-q", "-o", "addopts=", *extra]
            proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            if not results.is_file():
                raise AssertionError(f"{' '.join(command)} wrote no results (exit {proc.returncode}):\n"
                                     f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
            data = json.loads(results.read_text())
        records = {r["nodeid"]: r for r in data["records"]}
        if not records:
            raise AssertionError(f"{' '.join(command)} ran no item:\n{proc.stdout[-4000:]}")
        _CACHE[key] = records
    return _CACHE[key]


def run_candidate(op: str, target: str, *extra: str, together: dict[str, str] | None = None) -> dict[str, dict]:
    """The records of ``op`` from the run that gates ``op=target`` (with the ``together`` candidates
    of the same library, run in the same process)."""
    records = run_candidates({**(together or {}), op: target}, *extra)
    return {nodeid: r for nodeid, r in records.items() if r.get("op") == op}


def check(records: dict[str, dict], pinned: dict[str, str | tuple[str, str]],
          allowed: frozenset[str] = ALLOWED) -> None:
    """Every pinned item has its pinned outcome (and message text); every other item an allowed one."""
    problems = []
    for nodeid, want in pinned.items():
        outcome, text = (want, None) if isinstance(want, str) else want
        record = records.get(nodeid)
        if record is None:
            problems.append(f"{nodeid}: pinned {outcome!r} but the run has no such item")
            continue
        if record["outcome"] != outcome:
            problems.append(f"{nodeid}: pinned {outcome!r}, got {record['outcome']!r}: {record['message']}")
        elif text is not None and text not in (record["message"] or ""):
            problems.append(f"{nodeid}: {outcome!r} as pinned, but the message lacks {text!r}: {record['message']}")
    for nodeid, record in records.items():
        if nodeid not in pinned and record["outcome"] not in allowed:
            problems.append(f"{nodeid}: unexpected {record['outcome']!r}: {(record['message'] or '')[:600]}")
    assert not problems, "verdicts differ from the pinned ones:\n" + "\n".join(problems)


def item(spec: str, case: str, dtype: str) -> str:
    """The node id of a spec case (``spec`` without .yaml) or, with spec 'generated', a property."""
    if spec == "generated":
        return f"specs::generated::{case}[candidate-cpu-{dtype}]"
    return f"specs/{spec}.yaml::{case}[candidate-cpu-{dtype}]"


def items(spec: str, case: str, dtypes, outcome, text: str | None = None) -> dict:
    """Pin ``case`` at each of ``dtypes`` to the same outcome."""
    return {item(spec, case, dtype): outcome if text is None else (outcome, text) for dtype in dtypes}
