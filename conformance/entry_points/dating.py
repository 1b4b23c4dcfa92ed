"""Findings dated by release: each recorded divergence of torch's has a torch-only reproducer,
``findings/reproducers/<finding>.py``, that exits 1 while the torch running it shows the divergence, 0 once
it does not, and 3 when that torch cannot run it (an API, keyword or kernel it lacks). Run on every
release (the nox sessions ``release`` and ``findings``), their exit codes say from which release to which
each finding holds; ``findings/dates.json`` keeps the measurements, and the registrations' ``torch=``
ranges and docs/findings.md's table are checked against it (tests/test_findings_dates.py).

    python -m conformance.entry_points.dating run --python .nox/findings-torch-2-6-0/bin/python -o out.json
    python -m conformance.entry_points.dating table reports/releases/findings-torch-*.json

Nothing here imports torch: the reproducers run in the release's own interpreter.
"""

from __future__ import annotations

import argparse
import importlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable

from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
REPRODUCERS = ROOT / "findings" / "reproducers"
DATES = ROOT / "findings" / "dates.json"
FINDINGS_DOC = ROOT / "docs" / "findings.md"
BEGIN, END = "<!-- findings-dates: begin (python -m conformance.entry_points.dating table) -->", \
    "<!-- findings-dates: end -->"

SHOWS, DOES_NOT_SHOW, CANNOT_RUN = 1, 0, 3
MARKS = MappingProxyType({SHOWS: "■", DOES_NOT_SHOW: "□", CANNOT_RUN: "–"})  # else (a crash, a timeout): "?"
TIMEOUT = 900.0  # per reproducer: a compiled one on a cold Inductor cache took over 300 s at a load of 10


def reproducers(folder: Path = REPRODUCERS) -> dict[str, Path]:
    """The reproducers by finding name (a ``.py`` file's stem)."""
    return {path.stem: path for path in sorted(folder.glob("*.py")) if not path.name.startswith("_")}


def fingerprint(folder: Path = REPRODUCERS) -> str:
    """A digest of the reproducers' texts: a release measured with the same ones need not run them again."""
    digest = hashlib.sha256()
    for name, path in reproducers(folder).items():
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def run_one(python: str, script: Path, timeout: float = TIMEOUT) -> dict[str, Any]:
    """Run one reproducer in ``python`` (isolated, from an empty folder): its exit code and verdict line.
    An exit 1 with a traceback is an uncaught exception, not the divergence: recorded as a crash."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as cwd:
        try:
            done = subprocess.run([python, "-I", str(script)], cwd=cwd, capture_output=True, text=True,
                                  timeout=timeout, errors="replace",
                                  env={**os.environ, "PYTHONHASHSEED": "0"})
        except subprocess.TimeoutExpired:
            return {"exit": None, "verdict": f"timed out after {timeout:.0f} s", "seconds": round(timeout, 1)}
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    verdict = lines[-1] if lines else ""
    code: int | None = done.returncode
    if code == SHOWS and "Traceback (most recent call last)" in done.stderr:
        code, verdict = None, "crashed: " + (done.stderr.strip().splitlines() or [""])[-1]
    return {"exit": code, "verdict": verdict[:300], "seconds": round(time.monotonic() - started, 1)}


def run_all(python: str, folder: Path = REPRODUCERS, timeout: float = TIMEOUT,
            progress: Any = print) -> dict[str, Any]:
    """Every reproducer run in ``python``: {"torch": its version, "reproducers": fingerprint,
    "findings": {name: run_one(...)}}."""
    version = subprocess.run([python, "-I", "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True, timeout=timeout).stdout.strip() or None
    found = reproducers(folder)
    results = {}
    for position, (name, script) in enumerate(found.items(), 1):
        results[name] = run_one(python, script, timeout)
        progress(f"[{position}/{len(found)}] {name}: exit {results[name]['exit']} ({results[name]['verdict']})")
    return {"torch": version, "reproducers": fingerprint(folder), "findings": results}


def release_of(torch_version: str) -> str:
    """A torch version's release without its local label ("2.6.0+cu124" -> "2.6.0")."""
    return torch_version.split("+")[0]


def merge(files: Iterable[Path], names: Iterable[str] | None = None) -> dict[str, Any]:
    """The runs of ``files`` (run_all's output, one per release) as {"releases": [...] in order,
    "findings": {name: {release: {"exit", "verdict"}}}}; with ``names`` (the reproducers there are now), only
    those: a run of a reproducer since removed or renamed is left out."""
    wanted = None if names is None else set(names)
    runs = []
    for path in files:
        data = json.loads(Path(path).read_text())
        if not data.get("torch"):
            raise ValueError(f"{path}: no torch version (the release's interpreter did not import torch)")
        runs.append(data)
    runs.sort(key=lambda data: Version(release_of(data["torch"])))
    releases = [release_of(data["torch"]) for data in runs]
    findings: dict[str, dict[str, Any]] = {}
    for data, release in zip(runs, releases):
        for name, result in data["findings"].items():
            if wanted is not None and name not in wanted:
                continue
            findings.setdefault(name, {})[release] = {"exit": result["exit"], "verdict": result["verdict"]}
    return {"releases": releases, "findings": dict(sorted(findings.items()))}


def shown_on(codes: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(releases that show it, releases that run it and do not), in release order."""
    ordered = sorted(codes, key=Version)
    return ([r for r in ordered if codes[r]["exit"] == SHOWS], [r for r in ordered if codes[r]["exit"] == DOES_NOT_SHOW])


def range_text(codes: dict[str, Any]) -> str:
    """The measured range in words: "2.3.1-2.11.0", "every release that runs it", "none"."""
    shows, not_shown = shown_on(codes)
    if codes and all(c["exit"] == CANNOT_RUN and "no CUDA device" in c["verdict"] for c in codes.values()):
        return "needs a CUDA device: not measured here"
    if not shows:
        return "none measured"
    if not not_shown:
        return f"{shows[0]}-{shows[-1]} (every release that runs it)"
    return f"{shows[0]}-{shows[-1]}"


def disagreements(codes: dict[str, Any], shown_by: Any) -> list[str]:
    """The measured releases where ``shown_by(release)`` (a registration's torch range) says otherwise."""
    shows, not_shown = shown_on(codes)
    return ([f"{r} shows it, outside the registered range" for r in shows if not shown_by(r)]
            + [f"{r} does not show it, inside the registered range" for r in not_shown if shown_by(r)])


def table(dates: dict[str, Any], registered: dict[str, str | None] | None = None) -> str:
    """docs/findings.md's table: one row per finding, a mark per release, its measured range and the
    registered one (``registered``: finding -> torch specifier or None, when known)."""
    releases = dates["releases"]
    head = "| finding | " + " | ".join(releases) + " | shows it | registered |"
    lines = [head, "|" + "---|" * (len(releases) + 3)]
    for name, codes in dates["findings"].items():
        marks = [MARKS.get(codes[r]["exit"], "?") if r in codes else " " for r in releases]
        torch_range = (registered or {}).get(name)
        lines.append(f"| `{name}` | " + " | ".join(marks) + f" | {range_text(codes)} | "
                     + (f"`torch{torch_range}`" if torch_range else "every release") + " |")
    legend = ("■ shows it (exit 1), □ runs it and does not (exit 0), – cannot run it (exit 3: an API, "
              "keyword or kernel that release lacks, or no CUDA device), ? crashed or timed out, blank: not run on "
              "that release (its run predates the reproducer).")
    return "\n".join(lines) + "\n\n" + legend + "\n"


def write_section(document: Path, text: str) -> bool:
    """Replace the generated section of ``document`` (between BEGIN and END) by ``text``; whether it changed."""
    old = document.read_text()
    if BEGIN not in old or END not in old:
        raise ValueError(f"{document}: no generated section (lines {BEGIN!r} ... {END!r})")
    head, rest = old.split(BEGIN, 1)
    new = head + BEGIN + "\n" + text + rest[rest.index(END):]
    if new != old:
        document.write_text(new)
    return new != old


def finding_records() -> list[Any]:
    """Every record of a divergence of torch's that names a finding: the Python records' (behaviour
    stock-torch) and the spec entries with a ``finding``. Several records may share one finding (a spec
    case and the property that found it): each must give it the measured range."""
    # here, not at the top: they import torch and every op record, which running reproducers in another
    # interpreter (the nox sessions' use of this module) does not need
    import conformance.backends
    import conformance.cases.lowprec  # noqa: F401 - registers stock torch's half-precision arithmetic
    import conformance.ops  # noqa: F401 - registers the op records' divergences
    from conformance.core.divergences import _REGISTERED
    from conformance.results.rerun import suite_specs
    from conformance.specs.load import load_spec

    for name in conformance.backends.BUILTIN_BACKEND_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # the kernels' backend on a torch without custom_op: none of its records are torch's
            continue
    records = [d for d in _REGISTERED.values() if d.is_torch_behaviour]
    for path in sorted(suite_specs().glob("*.yaml")):
        records += [d for case in load_spec(path).cases for d in case.known_divergences if d.finding]
    return records


def registered_findings() -> dict[str, Any]:
    """The first record of each finding, by name."""
    found: dict[str, Any] = {}
    for record in finding_records():
        found.setdefault(record.finding_name, record)
    return dict(sorted(found.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.entry_points.dating", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run every reproducer in a release's interpreter")
    run.add_argument("--python", required=True, help="the interpreter of the torch release to measure")
    run.add_argument("-o", "--output", required=True, type=Path, help="the JSON file to write")
    run.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds per reproducer (default %(default)s)")
    tab = sub.add_parser("table", help="merge releases' runs into findings/dates.json and docs/findings.md's table")
    tab.add_argument("runs", nargs="+", type=Path, help="the run files (reports/releases/findings-torch-*.json)")
    tab.add_argument("--dates", type=Path, default=DATES, help="where the merged measurements go (%(default)s)")
    tab.add_argument("--document", type=Path, default=FINDINGS_DOC, help="the document whose table is generated")
    args = parser.parse_args(argv)
    if args.command == "run":
        if not Path(args.python).exists():
            parser.error(f"--python {args.python}: no such interpreter")
        # absolute: each reproducer runs from an empty folder of its own (a relative path would name nothing there)
        data = run_all(str(Path(args.python).absolute()), timeout=args.timeout)
        if data["torch"] is None:
            print(f"{args.python} cannot import torch", file=sys.stderr)
            return 2
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(data, indent=2) + "\n")
        print(f"wrote {args.output} (torch {data['torch']}, {len(data['findings'])} reproducers)")
        return 0
    missing = [str(p) for p in args.runs if not p.is_file()]
    if missing:
        parser.error(f"no such run file: {', '.join(missing)}")
    try:
        dates = merge(args.runs, names=reproducers())
    except (OSError, ValueError, KeyError) as exc:
        print(f"cannot merge the runs: {exc}", file=sys.stderr)
        return 2
    args.dates.parent.mkdir(parents=True, exist_ok=True)
    args.dates.write_text(json.dumps(dates, indent=2) + "\n")
    registered = {name: record.torch for name, record in registered_findings().items()}
    try:
        changed = write_section(args.document, table(dates, registered))
    except (OSError, ValueError) as exc:
        print(f"wrote {args.dates}; cannot write the table into {args.document}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.dates} ({len(dates['releases'])} releases, {len(dates['findings'])} findings); "
          f"{args.document} {'updated' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
