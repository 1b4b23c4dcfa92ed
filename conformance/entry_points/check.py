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
                              path (--results, --report, --markdown: a device, a folder, a file this suite did not write);
                              nothing is run and no file is touched. Reported before torch is imported
                              where the command line alone shows it

A second check moves the first one's results and report to .previous/ beside them, and its counterexample
scripts to reports/counterexamples/.previous/, and says so. A file candidate is handed to the run by absolute
path: every replay command and script the run prints works from any directory.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from conformance.core.arguments import MAX_EXAMPLES, examples_count, whole_number
from conformance.core.record import ItemRecord
from conformance.core.target import CandidateTarget, TargetError, parse_targets
from conformance.entry_points import preflight, reproducers

PASS, FAIL, COULD_NOT_JUDGE, UNSUPPORTED, USAGE = 0, 1, 2, 3, 4
PROBE_OK = "conformance-check-probe: ok"
# the child that imports the candidate: the device, then each candidate's kind, contract and constructor
# (conformance.entry_points.preflight); argv: the --device value, then the targets
PROBE = f"""
import sys
from conformance.entry_points.preflight import probe
sys.exit(probe(sys.argv[1], sys.argv[2:], ok={PROBE_OK!r}, usage={USAGE}))
"""
KILL_AFTER = 60.0  # seconds a signalled pytest gets to write its results before it is killed
PROBE_TIMEOUT = 120.0  # seconds the candidate's import may take (--import-timeout)
RUN_TIMEOUT = "--run-timeout"  # what ended a run that took longer than --run-timeout
DEFAULT_RUN_TIMEOUT = 4 * 3600.0  # seconds the whole pytest run may take (--run-timeout)
DEFAULT_MAX_CRASHES = 5  # the candidate's first items in a row that crash or hang before check stops (--max-crashes)


def specs_dir() -> Path:
    """The suite's spec files: ``conformance/specs_data/specs`` in an installed package (in a
    checkout it links to the repository's ``specs/``)."""
    return Path(str(resources.files("conformance").joinpath("specs_data", "specs"))).resolve()


def _ops_of(targets: list[CandidateTarget]) -> list[str]:
    return list(dict.fromkeys(target.op for target in targets))


DEFAULT_EXAMPLES = 100  # Hypothesis examples per generated item: a gate looks harder than CI's 8
DEFAULT_WORKERS = "auto"


def isolation_args(workers: str = DEFAULT_WORKERS) -> list[str]:
    """Crash and native-hang isolation: pytest-xdist workers (each replaced when it dies; the
    watchdog of conformance.run.timeouts ends one when an item is stuck in native code)."""
    if importlib.util.find_spec("xdist") is None:
        return []
    return ["-n", str(workers), "-p", "no:benchmark"]


def pytest_command(targets: list[CandidateTarget], *, results: Path, devices: str = "cpu", extra: list[str] = (),
                   run_id: str | None = None, specs: list[str] | None = None, examples: int = DEFAULT_EXAMPLES,
                   workers: str = DEFAULT_WORKERS, max_crashes: int = DEFAULT_MAX_CRASHES) -> list[str]:
    """The ``python -m pytest`` command line that :func:`main` runs."""
    ops = _ops_of(targets)
    from conformance.ops import OPS  # stock torch's backend beside the candidate: Op.stock_backend

    backends = ["candidate"] + sorted({OPS[op].stock_backend for op in ops if op in OPS and OPS[op].stock_backend})
    paths, rootdir = ([str(specs_dir())], str(specs_dir().parent)) if not specs else (list(specs), str(Path.cwd()))
    command = [sys.executable, "-m", "pytest", *paths, "--rootdir", rootdir,
               "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-rfE", *isolation_args(workers), "--conformance-progress",
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


IMPL_HELP = ("your implementation of OP (one of: {ops}), e.g. adagrad=mypkg.optim:FusedAdagrad or "
             "adagrad=path/to/file.py:FusedAdagrad")


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The command line of check. Building and parsing it imports neither torch nor the op records
    (a usage error is reported at once); ``--help`` loads the op names when it is printed."""
    parser = parser or argparse.ArgumentParser(prog="conformance check", description=__doc__,
                                               formatter_class=argparse.RawDescriptionHelpFormatter)
    impl = parser.add_argument("impl", nargs="+", metavar="OP=module:attr", help=IMPL_HELP.format(ops="see --help"))
    format_help = parser.format_help

    def help_with_the_op_names() -> str:
        from conformance.ops import OPS

        impl.help = IMPL_HELP.format(ops=", ".join(OPS)) + ". What each op's candidate must be: " + "; ".join(
            f"{name}: {op.candidate_contract}" for name, op in OPS.items())
        return format_help()

    parser.format_help = help_with_the_op_names
    parser.add_argument("--specs", nargs="+", metavar="PATH", default=None,
                        help="spec files or folders to run instead of the suite's own (e.g. your own cases)")
    parser.add_argument("--device", default="cpu", help="device(s) to run on, comma-separated (default: %(default)s)")
    parser.add_argument("--results", default="reports/candidate.json",
                        help="results JSON (default: %(default)s; the previous one is moved to .previous/ beside it)")
    parser.add_argument("--report", default="reports/check.html",
                        help="HTML report of this check (default: %(default)s; the main job's reports/index.html "
                             "is left alone)")
    parser.add_argument("--label", default=None, help="the run's name in the report (default: the candidate)")
    parser.add_argument("--markdown", metavar="FILE", default=None,
                        help="append a summary to FILE (e.g. $GITHUB_STEP_SUMMARY)")
    parser.add_argument("--examples", type=examples_count, default=DEFAULT_EXAMPLES, metavar="N",
                        help="Hypothesis examples per generated item (default: %(default)s; 0 runs the spec cases "
                             f"only; at most {MAX_EXAMPLES:,}; an item also stops at its time budget, --conformance-budget)")
    parser.add_argument("--workers", type=_workers, default=DEFAULT_WORKERS, metavar="N",
                        help="pytest-xdist worker processes, a number or 'auto' (default: %(default)s, one per CPU "
                             "core); each crashed or hung worker is replaced and costs one item")
    parser.add_argument("--import-timeout", type=_positive_seconds, default=PROBE_TIMEOUT, metavar="SECONDS",
                        help="how long importing the candidate (in a child process, before the run) may take "
                             "(default: %(default)g); longer is a usage error")
    parser.add_argument("--run-timeout", type=_positive_seconds, default=DEFAULT_RUN_TIMEOUT, metavar="SECONDS",
                        help="how long the whole pytest run may take (default: %(default)g); then it is stopped "
                             "as by SIGTERM (its results are written, interrupted) and the verdict is COULD NOT "
                             "JUDGE, or FAIL for what failed before")
    parser.add_argument("--max-crashes", type=whole_number, default=DEFAULT_MAX_CRASHES, metavar="N",
                        help="stop early when the candidate's first N items in a row crash or hang and none "
                             "passed: it crashes or hangs on every input tried (default: %(default)s; 0: never)")
    parser.add_argument("--pytest-args", default="", metavar="ARGS",
                        help="more pytest options, one string (e.g. \"-k 'not generated'\", \"-rx\" for the "
                             "reasons of xfail items, \"-n 0\" to run in one process without crash isolation)")
    parser.set_defaults(func=run)
    parser.error = _usage_error(parser)  # a bad option is a usage error (4), not "could not judge" (2)
    return parser


def _usage_error(parser: argparse.ArgumentParser):
    def error(message: str):
        parser.print_usage(sys.stderr)
        parser.exit(USAGE, f"{parser.prog}: error: {message}\n")
    return error


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value > 0 and value != float("inf")):  # NaN fails too
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def _workers(text: str) -> str:
    if text == "auto" or (text.isdigit() and int(text) >= 1):
        return text
    raise argparse.ArgumentTypeError(f"expected a number >= 1 or 'auto', got {text!r}")


# ------------------------------------------------------------------ before the run

class UsageError(Exception):
    pass


def declared_op_names() -> set[str] | None:
    """The op names the records declare, read from their source without importing them (nor
    torch): each module of ``conformance/ops`` that assigns ``OP = SomeOp()`` where ``SomeOp`` is a
    class of that module with ``name = "<literal>"``. None when a record does not read so (then only
    :data:`conformance.ops.OPS` knows)."""
    import ast

    names: set[str] = set()
    try:
        for path in sorted((Path(__file__).resolve().parents[1] / "ops").rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            made = [node.value for node in tree.body if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "OP" for t in node.targets)]
            if not made:
                continue
            if len(made) != 1 or not (isinstance(made[0], ast.Call) and isinstance(made[0].func, ast.Name)):
                return None
            classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
            cls = classes.get(made[0].func.id)
            literal = [node.value.value for node in (cls.body if cls else []) if isinstance(node, ast.Assign)
                       and any(isinstance(t, ast.Name) and t.id == "name" for t in node.targets)
                       and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)]
            if len(literal) != 1:
                return None
            names.add(literal[0])
    except (OSError, SyntaxError, ValueError):
        return None
    return names or None


def _validate(impls: list[str]) -> list[CandidateTarget]:
    """What can be checked without running the candidate's code: syntax, op names, files; the parsed
    targets. An op name no record declares is reported before torch is imported
    (:func:`declared_op_names`)."""
    try:
        targets = parse_targets(impls)
    except TargetError as exc:
        raise UsageError(str(exc)) from None
    declared = declared_op_names()
    if declared is None:
        from conformance.ops import OPS

        declared = set(OPS)
    for target in targets:
        if target.op not in declared:
            raise UsageError(f"{str(target)!r}: unknown op {target.op!r}; known ops: {', '.join(sorted(declared))}")
        if target.is_file and not Path(target.module).is_file():
            raise UsageError(f"{str(target)!r}: no such file {target.module}")
    return targets


class Interrupted(Exception):
    """SIGINT or SIGTERM reached check before pytest started (its children are already ended)."""


def _kill_group(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        try:
            child.kill()
        except OSError:
            pass


def _probe(targets: list[CandidateTarget], timeout: float = PROBE_TIMEOUT, *,
           meanwhile: Callable[[], object] | None = None, devices: str = "cpu") -> float:
    """Import the candidates in a child process (an import that ends the process, os._exit(0)
    included, cannot end this one) and check the devices and each candidate against its op's
    contract (conformance.entry_points.preflight: its kind, its constructor). An import that takes
    longer than ``timeout`` seconds is a usage error; SIGINT or SIGTERM to check ends the child (and
    whatever it started) before check ends (:class:`Interrupted`). Returns the seconds it took: what
    importing python, torch and the candidate costs on this machine now, from which the run sets the
    candidate's first-call limit (conformance.run.plugin.first_call_limit). ``meanwhile`` runs in
    this process while the child imports (check loads the op records there: torch's import, twice
    at once instead of one after the other)."""
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", PROBE, devices, *map(str, targets)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True, preexec_fn=_preexec)
    received: list[str] = []

    def stop(signum, frame):
        received.append(signal.Signals(signum).name)
        _kill_group(child)

    previous = {}
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, stop)
    except ValueError:  # not the main thread: no handlers, the timeout still holds
        pass
    try:
        if meanwhile is not None:
            meanwhile()
        try:
            stdout, stderr = child.communicate(timeout=max(0.0, timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            _kill_group(child)
            child.communicate()
            raise UsageError(f"importing the candidate did not finish within {timeout:g} s (an import that hangs, "
                             "or waits for input?); its process was ended (--import-timeout SECONDS to wait "
                             "longer)") from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        raise Interrupted(received[0])
    if child.returncode == 0 and PROBE_OK in stdout:
        return time.monotonic() - started
    error = [line for line in stderr.splitlines() if line.startswith("conformance check: ")]
    if error:
        raise UsageError(error[-1].removeprefix("conformance check: "))
    tail = "\n".join((stdout + stderr).strip().splitlines()[-5:])
    raise UsageError(f"importing the candidate ended the process (exit status {child.returncode}) before it was "
                     f"loaded{': ' + tail if tail else ''}")


def _load_the_op_records() -> None:
    """Import the op records (and torch), which :func:`pytest_command` reads."""
    importlib.import_module("conformance.ops")


def _check_outputs(report: Path, markdown: str | None) -> None:
    """--report and --markdown: files check may write (never a device, a folder, or a file that is
    not one of this suite's reports; --markdown is appended to, so any regular file)."""
    from conformance.results.store import output_problem

    for option, path, kind in (("--report", report, "report"), ("--markdown", markdown, "append")):
        problem = path and output_problem(path, kind)
        if problem:
            raise UsageError(f"{option} {path}: {problem}")


def _split_args(text: str | None) -> list[str]:
    try:
        return shlex.split(text or "")
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"--pytest-args {text!r}: {exc}") from None


def _set_aside(results: Path, report: Path, counterexamples: Path | None = None) -> list[str]:
    """Move the previous check's results and report out of the way (to .previous/ beside them; an
    incomplete run's results are removed), and its counterexample scripts to .previous/ in their
    folder (conformance.entry_points.reproducers); what was moved, one line each, to be said."""
    from conformance.results.store import _complete_run_id, output_problem, previous_path, set_aside

    problem = output_problem(results, "results")
    if problem:
        raise UsageError(f"--results {results}: {problem}")
    moved = []
    try:
        results.parent.mkdir(parents=True, exist_ok=True)
        kept = results.is_file() and _complete_run_id(results) is not None  # set_aside keeps a complete run's
        set_aside(results, [results.with_name(f"{results.stem}.junit.xml")])
        if kept:
            moved.append(f"moved the previous results to {_shown(previous_path(results))}")
        if report.is_file():
            target = previous_path(report)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(report, target)
            moved.append(f"moved the previous report to {_shown(target)}")
        if counterexamples is not None:
            moved += reproducers.set_aside_counterexamples(counterexamples, shown=_shown)
    except OSError as exc:
        raise UsageError(f"cannot move the previous results aside ({exc.filename or results}): "
                         f"{exc.strerror or exc}") from None
    return moved


def _shown(path: Path) -> str:
    """``path`` relative to the current directory when inside it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# ------------------------------------------------------------------ the run

# the environment variable that carries the probe's wall time to the run: conformance.run.plugin's
# CANDIDATE_IMPORT_SECONDS (named, not imported: run/ is the plugin, loaded by pytest only;
# tests/test_hangs.py checks that the two names agree)
CANDIDATE_IMPORT_SECONDS = "CONFORMANCE_CANDIDATE_IMPORT_SECONDS"


def _import_measure(seconds: float | None) -> dict[str, str]:
    """The run's environment that carries the probe's measure of the candidate's import to the
    pytest run and its workers (conformance.run.plugin.first_call_limit)."""
    if not isinstance(seconds, (int, float)) or not seconds > 0:
        return {}
    return {CANDIDATE_IMPORT_SECONDS: f"{seconds:.3f}"}


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    """``values`` in os.environ while the run starts and runs (its processes inherit them), then as before."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _preexec() -> None:  # pragma: no cover - runs in the child
    """The pytest child ends with this process (Linux: SIGTERM when its parent dies)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: nothing to do
        pass


def run_pytest(command: list[str]) -> tuple[int, str | None]:
    """Run pytest in its own process group; SIGINT and SIGTERM sent to this process reach it (it
    writes its results as interrupted), and a child that does not end within KILL_AFTER seconds of
    a signal is killed with its workers; whatever is left of its process group when it ends (a
    stray worker, a process the candidate started) is killed too. Returns (exit status, the signal
    received or None). :func:`_run_within` bounds it in time."""
    child = subprocess.Popen(command, start_new_session=True, preexec_fn=_preexec)
    received: list[str] = []
    since: list[float] = []

    def forward(signum, frame):
        received.append(signal.Signals(signum).name)
        if not since:
            since.append(time.monotonic())
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                status = child.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                pass
            if since and time.monotonic() - since[0] > KILL_AFTER:
                _kill_group(child)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _end_group(child)  # what is left of its group: nothing outlives check
    return status, (received[0] if received else None)


GROUP_GRACE = 5.0  # seconds what is left of pytest's process group gets to end by itself


def _end_group(child: subprocess.Popen, grace: float = GROUP_GRACE) -> None:
    """Wait up to ``grace`` seconds for the rest of the child's process group to end (the run's
    sidecar, which writes a crashed or hung item's record after the run's process died,
    conformance/run/timeouts.py), then kill what is left."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(child.pid, 0)
        except OSError:
            return  # nothing left
        time.sleep(0.05)
    _kill_group(child)


def _run_within(command: list[str], timeout: float) -> tuple[int, str | None]:
    """:func:`run_pytest` with --run-timeout: past ``timeout`` seconds, this process sends itself
    SIGTERM, which run_pytest forwards to the run as any SIGTERM (results written as interrupted;
    killed with its group a minute later). The signal received reads ``"--run-timeout"``."""
    expired, finished = threading.Event(), threading.Event()

    def expire() -> None:
        if not finished.is_set() and signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
            expired.set()
            os.kill(os.getpid(), signal.SIGTERM)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        status, received = run_pytest(command)
    finally:
        finished.set()
        timer.cancel()
    if expired.is_set() and received in ("SIGTERM", None):
        received = RUN_TIMEOUT
    return status, received


# ------------------------------------------------------------------ the verdict

@dataclass
class Verdict:
    code: int
    word: str
    reason: str
    counts: Counter = field(default_factory=Counter)
    failed: list[str] = field(default_factory=list)
    crashed: list[str] = field(default_factory=list)
    torch_findings: list[str] = field(default_factory=list)  # stock torch's own items that failed beside yours

    def lines(self) -> list[str]:
        counts = ", ".join(f"{n} {o}" for o, n in sorted(self.counts.items()))
        head = f"RESULT: {self.word}" + (f" ({counts})" if counts else "") + (f": {self.reason}" if self.reason else "")
        crashed = {item.split(" (")[0] for item in self.crashed}
        findings = [f"  torch:   {item} (a finding about stock torch, not your implementation)"
                    for item in self.torch_findings]
        return [head, *(f"  crashed: {item}" for item in self.crashed),
                *(f"  failed:  {item}" for item in self.failed if item not in crashed), *findings]


def judge(document: dict | None, *, run_id: str, status: int, ops: list[str], signal_name: str | None = None,
          problem: str | None = None) -> Verdict:
    """The verdict of one check from the results file its run wrote (None: there is none)."""
    if document is None:
        why = problem or "no results file was written"
        return Verdict(COULD_NOT_JUDGE, "COULD NOT JUDGE",
                       f"{why}; pytest exited with status {status}" + (f" ({signal_name})" if signal_name else ""))
    run = document.get("run") or {}
    if run.get("id") != run_id:
        return Verdict(COULD_NOT_JUDGE, "COULD NOT JUDGE",
                       f"the results file is another run's (id {run.get('id')!r}, not {run_id!r}); pytest exited "
                       f"with status {status}")
    records: list[ItemRecord] = document.get("records") or []
    candidate = [r for r in records if r.get("backend") == "candidate"]
    counts = Counter(r.get("outcome") for r in candidate)
    bad = [r for r in candidate if r.get("outcome") in ("failed", "error")]
    verdict = Verdict(COULD_NOT_JUDGE, "COULD NOT JUDGE", "", counts,
                      failed=[r.get("nodeid", "?") for r in bad],
                      crashed=[f"{r.get('nodeid', '?')} ({_crash_reason(r)})" for r in bad if r.get("crashed")])
    not_run = list(run.get("not_run") or [])
    complete = run.get("status") == "complete" and not not_run
    incomplete = "" if complete else (f"the run did not complete (status {run.get('status')!r}"
                                      + (f", interrupted by {run['interrupted_by']}" if run.get("interrupted_by") else "")
                                      + (f", {len(not_run)} items not run" if not_run else "") + ")")
    if bad:
        verdict.code, verdict.word = FAIL, "FAIL"
        verdict.reason = f"{len(bad)} candidate item(s) failed or errored" + (f"; {incomplete}" if incomplete else "")
        tried = [r for r in candidate if r.get("outcome") not in ("skipped", "unsupported")]
        if incomplete and all(_crashed_or_hung(r) for r in tried):  # --max-crashes stopped it, or a signal
            verdict.reason = (f"the candidate crashed or hung on every input tried ({len(tried)} item(s), none "
                              f"passed); {incomplete}")
        return verdict
    if not complete:
        verdict.reason = incomplete
        return verdict
    missing = [op for op in ops if not any(r.get("op") == op for r in candidate)]
    if missing:
        verdict.reason = f"no candidate item of {', '.join(missing)} was collected (a -k or --conformance-* option?)"
        return verdict
    others = [r for r in records if r.get("backend") != "candidate" and r.get("outcome") in ("failed", "error")]
    # stock torch's own items beside the candidate's: a failure there is a finding about torch (the
    # candidate's items are judged against the reference on their own), never the user's problem
    findings = [r for r in others if _is_stock_torch(r)]
    verdict.torch_findings = [r.get("nodeid", "?") for r in findings]
    others = [r for r in others if not _is_stock_torch(r)]
    if others:
        verdict.reason = (f"{len(others)} item(s) of the specs themselves failed or errored "
                          f"(e.g. {others[0].get('nodeid')}): the suite, not the candidate, needs a look")
        return verdict
    ran = sum(n for outcome, n in counts.items() if outcome in ("passed", "xfail", "xpass"))
    if ran == 0:
        if counts.get("unsupported"):
            verdict.code, verdict.word = UNSUPPORTED, "UNSUPPORTED"
            verdict.reason = "every candidate item was unsupported: nothing was checked"
        else:
            why = Counter(r.get("message") for r in candidate if r.get("outcome") == "skipped" and r.get("message"))
            verdict.reason = "no candidate item ran" + (
                f": every one was skipped ({'; '.join(reason for reason, _ in why.most_common(2))})" if why else "")
        return verdict
    if status != 0 and not (status == 1 and findings):
        verdict.reason = f"pytest exited with status {status} although every candidate item passed"
        return verdict
    verdict.code, verdict.word = PASS, "PASS"
    if findings:
        verdict.reason = (f"stock torch failed {len(findings)} item(s) beside yours: a finding about torch, not your "
                          f"implementation (worth reporting upstream; docs/findings.md lists the known ones)")
    return verdict


def _is_stock_torch(record: ItemRecord) -> bool:
    """Whether ``record`` is an item of stock torch's own backend for its op (Op.stock_backend)."""
    from conformance.ops import OPS

    op = OPS.get(str(record.get("op")))
    return op is not None and bool(record.get("backend")) and record.get("backend") == op.stock_backend


def _crashed_or_hung(record: ItemRecord) -> bool:
    """The item's process died (crash, native hang) or it ran past its timeout (the rule of the run's
    circuit breaker, conformance/run/breaker.py, which check's --max-crashes sets)."""
    return bool(record.get("crashed") or record.get("timed_out")) or (
        record.get("outcome") in ("error", "failed") and "from pytest-timeout" in str(record.get("message") or ""))


def _crash_reason(record: ItemRecord) -> str:
    """How a crashed item's worker ended, in a few words (its record's message has the rest)."""
    import re

    if record.get("timed_out"):
        return "timed out in native code"
    if record.get("signal"):
        return f"killed by {record['signal']}"
    found = re.search(r"exited with status -?\d+", str(record.get("message") or ""))
    return found.group(0) if found else "the worker process died"


def _load(path: Path) -> tuple[dict | None, str | None]:
    from conformance.results.store import ResultsError, load_results

    if not path.exists():
        return None, "pytest wrote no results file"
    try:
        results = load_results(path, max_bytes=None)  # this run's own file, however large its messages made it
    except ResultsError as exc:
        return None, f"the results file is unusable ({exc.message})"
    return {"run": results.run, "records": results.records}, None


def run(args: argparse.Namespace) -> int:
    results = Path(args.results).resolve()
    report = Path(args.report).resolve()
    try:
        extra = _split_args(args.pytest_args)
        given = _validate(args.impl)
        named = " ".join(map(str, given))  # as the user wrote them; the run and its reproducers get absolute paths
        targets = reproducers.absolute_targets(given)
        early = preflight.early_device_problem(args.device)
        if early:
            raise UsageError(early)
        if report == results:
            raise UsageError("--report and --results name the same file")
        _check_outputs(report, args.markdown)
        imported = _probe(targets, args.import_timeout, meanwhile=_load_the_op_records, devices=args.device)
        moved = _set_aside(results, report, reproducers.counterexamples_folder(results, extra))
    except UsageError as exc:
        print(f"conformance check: usage error: {exc}", file=sys.stderr)
        return USAGE
    except Interrupted as exc:
        print(f"conformance check: RESULT: COULD NOT JUDGE: {exc} received while importing the candidate; its "
              "process was ended and nothing was run", file=sys.stderr)
        return COULD_NOT_JUDGE
    for line in moved:
        print(f"conformance check: {line}", flush=True)
    run_id = uuid.uuid4().hex
    extra = ["--conformance-label", args.label or f"candidate {named}", *extra]
    command = pytest_command(targets, results=results, devices=args.device, extra=extra, run_id=run_id,
                             specs=args.specs, examples=args.examples, workers=args.workers,
                             max_crashes=args.max_crashes)
    print("conformance check:", shlex.join(command[1:]), flush=True)
    with _environment(_import_measure(imported)):
        status, received = _run_within(command, args.run_timeout)
    if status == 4 and not results.exists():  # pytest's usage error: it printed the reason
        print(f"conformance check: usage error (pytest exit status 4, printed above); nothing was run", file=sys.stderr)
        return USAGE
    document, problem = _load(results)
    verdict = judge(document, run_id=run_id, status=status, ops=_ops_of(targets), signal_name=received,
                    problem=problem)
    lines = [f"conformance check: {named}", *verdict.lines()]
    if received == RUN_TIMEOUT:
        lines.insert(1, f"conformance check: the run took longer than --run-timeout {args.run_timeout:g} s and was "
                        "stopped")
    if document is not None and document["run"].get("id") == run_id:
        from conformance.results.report import build_report

        try:
            built = build_report([results], str(report), verdict=verdict.lines()).path
            lines += [f"results: {results}", f"report:  {Path(built).resolve()}"]
        except Exception as exc:  # noqa: BLE001 - the verdict stands without its report
            lines += [f"results: {results}", f"report:  not written ({type(exc).__name__}: {exc})"]
    print("\n".join(lines), flush=True)
    if args.markdown:
        from conformance.results.gate import markdown
        from conformance.results.store import write_output

        try:
            write_output(args.markdown, markdown("\n".join(lines[1:]), f"Conformance check: {named}"),
                         "append")
        except OSError as exc:
            print(f"conformance check: cannot write --markdown {exc.filename or args.markdown}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
    return verdict.code


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
