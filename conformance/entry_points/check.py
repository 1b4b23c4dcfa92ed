"""conformance check OP=module:attr ...: gate your own implementation against the specs and stock
torch, from your own repository, after pip install of this suite.

It runs the suite's specs (they ship inside the package) in a fresh python -m pytest from the
current directory (so mypkg:MyAdagrad or path/to/file.py:MyAdagrad imports as it would in your
tests), with your candidate and stock torch's own backend for the op side by side. Each generated
property runs 100 Hypothesis examples (--examples; CI's profile runs 8), within the options your
candidate supports (unsupported_options, or learned from its Unsupported). The candidate
runs in pytest-xdist worker processes (--workers, one per core): an item that crashes the process (segfault, abort,
os._exit) or hangs in native code past its timeout costs that item only (an error naming the
signal or "timed out in native code"); the worker is replaced and the run goes on.

It judges only the results file its own run wrote (the previous one is moved to .previous/
first), and writes its own HTML report (default reports/check.html).

Verdict and exit status:
  RESULT: PASS             0  the run completed, at least one candidate item ran, none failed or errored
  RESULT: FAIL             1  a candidate item failed or errored (crashed, timed out); the items are named.
                              When its first --max-crashes (5) items in a row crash or hang and none
                              passes, the run stops early: "crashed or hung on every input tried"
  RESULT: COULD NOT JUDGE  2  no complete results file of this run (interrupted, killed, pytest error,
                              longer than --run-timeout, 4 h),
                              no candidate item, or an item of the specs themselves errored; SIGINT or
                              SIGTERM while the candidate is imported (its process is ended too)
  RESULT: UNSUPPORTED      3  every candidate item was unsupported: nothing was checked
  usage error              4  an unknown option or op, a candidate that cannot be imported (or whose import
                              takes longer than --import-timeout, 120 s), of the wrong kind for its op (an
                              optimizer class for coalesce), with a constructor needing an argument the op never
                              passes, a --device not here (cuda without CUDA, xla without torch_xla), an unusable
                              path (--results, --report, --markdown: a device, a folder, a file this suite did not write;
                              --specs: a path that is not there);
                              nothing is run and no file is touched. Reported before torch is imported
                              where the command line alone shows it

A second check moves the first one's results and report to .previous/ beside them, and its counterexample
scripts to reports/counterexamples/.previous/, and says so (while the first one's run still holds the results
file's lock: a usage error, nothing moved). A file candidate is handed to the run by absolute
path: every replay command and script the run prints works from any directory.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
import uuid
from importlib import resources
from pathlib import Path
from typing import Sequence

from conformance.core.record import CANDIDATE
from conformance.core.target import CandidateTarget
from conformance.core.text import safe_to_show
from conformance.entry_points import check_args, preflight, reproducers
# the rooms of check, and the names its callers read here (the workflow's merge job: judge and the statuses)
from conformance.entry_points.check_args import (DEFAULT_EXAMPLES, DEFAULT_MAX_CRASHES, DEFAULT_WORKERS,  # noqa: F401
                                                 UsageError, _check_outputs, _check_specs, _set_aside, _split_args,
                                                 _validate, declared_op_names)
from conformance.entry_points.check_verdict import (COULD_NOT_JUDGE, FAIL, PASS, UNSUPPORTED, USAGE,  # noqa: F401
                                                    Verdict, _load, judge)
from conformance.entry_points.probe import _load_the_op_records, _probe
from conformance.entry_points.supervise import (CANDIDATE_IMPORT_SECONDS, RUN_TIMEOUT, Interrupted,  # noqa: F401
                                                _environment, _import_measure, _run_within, run_pytest)
from conformance.results.gate import markdown
from conformance.results.store import write_output


def specs_dir() -> Path:
    """The suite's spec files: ``conformance/specs_data/specs`` in an installed package (in a
    checkout it links to the repository's ``specs/``)."""
    return Path(str(resources.files("conformance").joinpath("specs_data", "specs"))).resolve()


def _ops_of(targets: list[CandidateTarget]) -> list[str]:
    return list(dict.fromkeys(target.op for target in targets))


def isolation_args(workers: str = DEFAULT_WORKERS) -> list[str]:
    """Crash and native-hang isolation: pytest-xdist workers (each replaced when it dies; the
    watchdog of conformance.run.timeouts ends one when an item is stuck in native code)."""
    if importlib.util.find_spec("xdist") is None:
        return []
    return ["-n", str(workers), "-p", "no:benchmark"]


def pytest_command(targets: list[CandidateTarget], *, results: Path, devices: str = "cpu", extra: Sequence[str] = (),
                   run_id: str | None = None, specs: list[str] | None = None, examples: int = DEFAULT_EXAMPLES,
                   workers: str = DEFAULT_WORKERS, max_crashes: int = DEFAULT_MAX_CRASHES) -> list[str]:
    """The ``python -m pytest`` command line that :func:`main` runs."""
    ops = _ops_of(targets)
    from conformance.ops import OPS  # stock torch's backend beside the candidate: Op.stock_backend

    backends = [CANDIDATE] + sorted({stock for op in ops if op in OPS and (stock := OPS[op].stock_backend)})
    paths, rootdir = ([str(specs_dir())], str(specs_dir().parent)) if not specs else (list(specs), str(Path.cwd()))
    command = [sys.executable, "-m", "pytest", *paths, "--rootdir", rootdir,
               "-p", "no:cacheprovider", "-o", "addopts=", "--assert=plain", "-q", "-rfE", *isolation_args(workers),
               "--conformance-progress",
               "--conformance-examples", str(examples),
               "--conformance-device", devices, "--conformance-backend", ",".join(backends),
               "--conformance-results", str(results), "--conformance-max-crashes", str(max_crashes)]
    if run_id:
        command += ["--conformance-run-id", run_id]
    if ops:
        command += ["--conformance-op", ",".join(ops)]
    for target in targets:
        command += ["--conformance-impl", str(target)]
    return command + list(extra)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The command line of check (:mod:`conformance.entry_points.check_args`), running :func:`run`."""
    return check_args.build_parser(parser, func=run, description=__doc__)


def run(args: argparse.Namespace) -> int:
    results = Path(args.results).resolve()
    report = Path(args.report).resolve()
    try:
        named, targets, extra, imported, moved = _prepare(args, results, report)
    except UsageError as exc:
        print(f"conformance check: usage error: {exc}", file=sys.stderr)
        return USAGE
    except Interrupted as exc:
        print(f"conformance check: RESULT: COULD NOT JUDGE: {exc} received while importing the candidate; its "
              "process was ended and nothing was run", file=sys.stderr)
        return COULD_NOT_JUDGE
    for line in moved:
        print(safe_to_show(f"conformance check: {line}"), flush=True)
    run_id = uuid.uuid4().hex
    extra = ["--conformance-label", args.label or f"candidate {named}", *extra]
    command = pytest_command(targets, results=results, devices=args.device, extra=extra, run_id=run_id,
                             specs=args.specs, examples=args.examples, workers=args.workers,
                             max_crashes=args.max_crashes)
    print(safe_to_show(f"conformance check: {shlex.join(command[1:])}"), flush=True)
    with _environment(_import_measure(imported)):
        status, received = _run_within(command, args.run_timeout)
    if status == 4 and not results.exists():  # pytest's usage error: it printed the reason
        print("conformance check: usage error (pytest exit status 4, printed above); nothing was run", file=sys.stderr)
        return USAGE
    document, problem = _load(results)
    verdict = judge(document, run_id=run_id, status=status, ops=_ops_of(targets), signal_name=received,
                    problem=problem)
    lines = [f"conformance check: {named}", *verdict.lines()]
    if received == RUN_TIMEOUT:
        lines.insert(1, f"conformance check: the run took longer than --run-timeout {args.run_timeout:g} s and was "
                        "stopped")
    if document is not None and document["run"].get("id") == run_id:
        # lazy: the op records import torch, which check's own start does not
        from conformance.results.coverage_map import coverage_lines

        lines += coverage_lines(document.get("records") or [], CANDIDATE)  # what the verdict covered, per op
        lines += _report_lines(results, report, verdict)
    print(safe_to_show("\n".join(lines)), flush=True)  # an item's id, a skip's reason: the specs' and candidate's text
    if args.markdown:
        _append_markdown(args.markdown, lines, named)
    return verdict.code


def _prepare(args: argparse.Namespace, results: Path, report: Path
             ) -> tuple[str, list[CandidateTarget], list[str], float, list[str]]:
    """What is checked before anything runs (raises UsageError, or Interrupted while the candidate is
    imported): the targets as the user named them and as absolute ones, pytest's extra arguments, what
    the probe's import measured, and the lines saying what the previous check's files were set aside as."""
    extra = _split_args(args.pytest_args)
    given = _validate(args.impl)
    named = " ".join(map(str, given))  # as the user wrote them; the run and its reproducers get absolute paths
    targets = reproducers.absolute_targets(given)
    _check_specs(args.specs)
    early = preflight.early_device_problem(args.device)
    if early:
        raise UsageError(early)
    if report == results:
        raise UsageError("--report and --results name the same file")
    _check_outputs(report, args.markdown)
    imported = _probe(targets, args.import_timeout, meanwhile=_load_the_op_records, devices=args.device)
    moved = _set_aside(results, report, reproducers.counterexamples_folder(results, extra))
    return named, targets, extra, imported, moved


def _report_lines(results: Path, report: Path, verdict: Verdict) -> list[str]:
    """Write the run's HTML report with the verdict; the lines naming the results file and the report."""
    # imported here: the report stands on the top level of the package, and check imports it only
    # once its run wrote a results file of its own
    from conformance.results.report import build_report

    try:
        built = build_report([results], str(report), verdict=verdict.lines()).path
        return [f"results: {results}", f"report:  {Path(built).resolve()}"]
    except Exception as exc:  # noqa: BLE001 - the verdict stands without its report
        return [f"results: {results}", f"report:  not written ({type(exc).__name__}: {exc})"]


def _append_markdown(path: str, lines: list[str], named: str) -> None:
    """Append the verdict to ``--markdown``'s file (e.g. $GITHUB_STEP_SUMMARY); a file that cannot be
    written is said on stderr."""
    try:
        write_output(path, markdown("\n".join(lines[1:]), f"Conformance check: {named}"), "append")
    except OSError as exc:
        print(f"conformance check: cannot write --markdown {exc.filename or path}: "
              f"{exc.strerror or exc}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
