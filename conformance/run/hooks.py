"""pytest hooks for results files, per-item timeouts, crashed workers and benchmarks.

Loaded through ``pytest_plugins`` in :mod:`conformance.run.plugin`. Options:

--conformance-results PATH   write the run's results JSON to PATH (atomically: at the end, every
                             ``--conformance-results-every`` seconds while running, and when
                             interrupted), and JUnit XML beside it (``<stem>.junit.xml``) unless
                             ``--junitxml`` names another file
--conformance-label TEXT     the run's name in reports (default: its torch version)
--conformance-timeout S      per-item timeout through pytest-timeout (default 60 s, benchmarks 10x;
                             0 for none); ``--timeout`` or a ``timeout`` ini value takes precedence
--conformance-benchmark      also collect the specs' benchmark sections and time each backend

The results path is checked and locked (``filelock``) when pytest configures: an unusable path (a
directory, a parent that is a file, a folder that cannot be written) or one another run is
writing is a usage error naming the option. SIGINT and SIGTERM end the run as ``interrupted``
with a non-zero exit status even when the ``KeyboardInterrupt`` they raise is swallowed (e.g.
raised inside a gc callback and printed as "Exception ignored"): the handler also sets a flag
that the hooks check.

Under pytest-xdist the records travel from the workers in each report's user properties and the
controller writes the file. The controller collects nothing itself, so each worker's first report
also carries its collection: every conformance item's node id with its identity (``item.record``).
That is how the controller knows which items a run expects, and what an item whose worker died
(segfault, abort) was: it gets an ``error`` record saying so, and the run goes on: unless
``--max-worker-restart`` is given it is raised to :data:`MAX_WORKER_RESTART`, so that many
crashing items do not end the run.
"""

from __future__ import annotations

import argparse
import faulthandler
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.record import ItemRecord
from conformance.run import outcomes
from conformance.results.store import (ResultsWriter, foreign_file_problem, lock_path, now, previous_path,
                                       results_lock, run_metadata)
from conformance.run.state import SELECTION, item_timeout, relative_spec, timeout_user_set
from conformance.types import safe_text

RESULTS = pytest.StashKey["ResultsState"]()
CASE_PROPERTY = "conformance_case"  # user property: {"key": "<spec>::<case>", "context": case_context(case)}
_CASES_SENT = pytest.StashKey[set]()
COLLECTION_PROPERTY = "conformance_collection"  # user property: a worker's [[node id, identity]...], once per process
COLLECTED = pytest.StashKey["Collected"]()
_COLLECTION_SENT = pytest.StashKey[bool]()
DEFAULT_TIMEOUT = 60.0
BENCHMARK_TIMEOUT_FACTOR = 10
DEFAULT_WRITE_EVERY = 10.0
MAX_WORKER_RESTART = 100


MAX_SECONDS = 7 * 24 * 3600  # a week: beyond it the timers (setitimer, faulthandler's watchdog) overflow


def _seconds(minimum_exclusive: bool):
    """An argparse type: a finite number of seconds, > 0 or >= 0, at most a week (pytest reports a
    bad one as a usage error)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < 0 or (minimum_exclusive and value == 0):
            raise argparse.ArgumentTypeError(
                f"{text!r}: must be a finite number of seconds {'> 0' if minimum_exclusive else '>= 0'}")
        if value > MAX_SECONDS:
            raise argparse.ArgumentTypeError(f"{text!r}: must be at most {MAX_SECONDS} seconds (a week)")
        return value

    return parse


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance")
    group.addoption("--conformance-results", metavar="PATH", default=None,
                    help="write the run's results JSON here (atomically; also every "
                         "--conformance-results-every seconds and on interruption), and JUnit XML "
                         "beside it as <stem>.junit.xml unless --junitxml is given. "
                         "Default: the 'conformance_results' ini value, else none.")
    group.addoption("--conformance-results-every", metavar="SECONDS", type=_seconds(True), default=DEFAULT_WRITE_EVERY,
                    help=f"rewrite the results file at most this often while running (default {DEFAULT_WRITE_EVERY:g})")
    group.addoption("--conformance-label", metavar="TEXT", default=None,
                    help="the run's name in reports (default: 'torch <version>')")
    group.addoption("--conformance-progress", action="store_true", default=False,
                    help="say on the console when a generated item found a failing example and Hypothesis "
                         "shrinks it (minutes, at times): 'shrinking <item>...'; conformance check turns it on")
    group.addoption("--conformance-run-id", metavar="ID", default=None,
                    help="the run's id in the results file (default: a fresh random one); conformance check "
                         "gives its own, so that it judges only a file its own run wrote")
    group.addoption("--conformance-timeout", metavar="SECONDS", type=_seconds(False), default=DEFAULT_TIMEOUT,
                    help=f"per-item timeout via pytest-timeout (default {DEFAULT_TIMEOUT:g}; benchmark items "
                         f"x{BENCHMARK_TIMEOUT_FACTOR}; 0: none). --timeout or the 'timeout' ini value wins.")
    group.addoption("--conformance-benchmark", action="store_true", default=False,
                    help="also time each backend on the specs' benchmark sections with pytest-benchmark "
                         "(add -m conformance_benchmark to run only those; needs -n 0 or -n 1)")
    parser.addini("conformance_results", "default for --conformance-results", default="")


class ResultsState:
    """The controller's results writer, registered as a plugin of its own for the run's hooks."""

    def __init__(self, config: pytest.Config, path: Path):
        self.config = config
        self.path = path
        self.writer: ResultsWriter | None = None
        self.last_write = 0.0
        self.every = float(config.getoption("conformance_results_every"))
        self.lock = results_lock(path)
        self.write_error: str | None = None  # the results file could not be written (disk full, ...)
        self.session: pytest.Session | None = None

    @property
    def expected(self) -> set[str]:
        """The results keys of every conformance item collected (by this process or by the workers)."""
        return collected(self.config).keys()

    def write(self, status: str | None = None) -> None:
        assert self.writer is not None
        run = self.writer.run
        expected = self.expected
        if expected:
            run["records_expected"] = len(expected)
        run["not_run"] = sorted(expected - set(self.writer.records))
        try:
            self.writer.write(status)
        except OSError as exc:  # disk full, quota, folder gone: stop the run with a clean message
            self.write_error = f"cannot write the results file {self.path}: {exc.strerror or exc}; the run stopped"
            _stop_run(self.config, self.session, self.write_error)
            return
        self.last_write = time.monotonic()

    # hooks

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return [f"conformance results: {self.path}"]

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        selection = self.config.stash.get(SELECTION, None)
        devices = selection.devices if selection is not None else ["cpu"]
        self.writer = ResultsWriter(self.path, run_metadata(
            devices=devices, options=_options(self.config), label=self.config.getoption("conformance_label"),
            hypothesis_seed=_hypothesis_seed(self.config), run_id=self.config.getoption("conformance_run_id")),
            companions=tuple(Path(p) for p in [getattr(self.config.option, "xmlpath", None)] if p))
        self.write()

    def pytest_runtest_logreport(self, report) -> None:
        if self.writer is None:
            return
        for key, value in getattr(report, "user_properties", ()):
            if key == CASE_PROPERTY:
                self.writer.add_case(_relative_case_key(value["key"], self.config), value["context"])
        record = _record_of(report)
        if record is None:
            return
        self.writer.add(record_key(report.nodeid, record), relative_spec(record, self.config))
        if time.monotonic() - self.last_write >= self.every:
            self.write()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus) -> None:
        if self.writer is None:
            return
        run = self.writer.run
        exitstatus = session.exitstatus  # the signal hook below may have turned it into INTERRUPTED
        run["finished"] = now()
        run["exit_status"] = int(exitstatus)
        missing = self.expected - set(self.writer.records)
        received = signal_received(self.config)
        interrupted = int(exitstatus) == int(pytest.ExitCode.INTERRUPTED) or bool(missing) or received is not None
        if received is not None:
            run["interrupted_by"] = received
        interrupted = interrupted or self.write_error is not None
        self.write("interrupted" if interrupted else "complete")
        if self.write_error is not None and session.exitstatus in (
                pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.INTERRUPTED

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.lock.release()

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        if self.writer is None:
            return
        if self.write_error is not None:
            terminalreporter.write_line(f"conformance: {self.write_error}", red=True)
        not_run = len(self.writer.run.get("not_run") or [])
        extra = f", {not_run} collected items not run" if not_run else ""
        terminalreporter.write_line(
            f"conformance results: {self.path} ({len(self.writer.records)} records{extra}; "
            f"status {self.writer.run['status']})")


def _stop_run(config: pytest.Config, session: pytest.Session | None, reason: str) -> None:
    """Stop after the item now running, in this process and (pytest-xdist's controller, which reads
    only its own flag) in the distributed session."""
    if session is not None and not session.shouldstop:
        session.shouldstop = reason
    dsession = config.pluginmanager.getplugin("dsession")
    if dsession is not None and not getattr(dsession, "shouldstop", True):
        dsession.shouldstop = reason


_ACTIVE: list["Signals"] = []  # the sessions of this process (an in-process pytest.main nests one)


class Signals:
    """SIGINT/SIGTERM in the controller: raise KeyboardInterrupt (pytest unwinds and the results are
    written) and remember the signal, so that a KeyboardInterrupt swallowed on its way up (raised in
    a gc callback or a ``__del__``, printed as "Exception ignored") still ends the run interrupted."""

    def __init__(self) -> None:
        self.received: str | None = None
        self.repeats = 0
        self.session: pytest.Session | None = None
        self.previous: dict[int, Any] = {}

    def _handle(self, signum, frame):
        name = signal.Signals(signum).name
        if self.received is not None:  # a second signal while the run stops: no second KeyboardInterrupt
            self.repeats += 1  # (raised in the middle of writing the results, it printed a long traceback)
            if self.repeats >= 2:  # a third: the default action, at once
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            try:
                os.write(2, f"\nconformance: {name} again: already stopping (interrupted by {self.received}), "
                            "writing the results; send it once more to end the process at once\n".encode())
            except OSError:
                pass
            return
        self.received, self.repeats = name, 0
        if self.session is not None and not self.session.shouldstop:
            self.session.shouldstop = f"interrupted by {name}"
        raise KeyboardInterrupt(name)

    def install(self, session: pytest.Session) -> None:
        self.received, self.session = None, session
        _ACTIVE.append(self)
        for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
            if signal.getsignal(signum) is not default:
                continue  # someone else's handler: leave it
            try:
                self.previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread
                pass

    def uninstall(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous.clear()
        self.session = None
        if self in _ACTIVE:
            _ACTIVE.remove(self)

    def check(self) -> None:
        """Called between items: stop the run if a signal came and its KeyboardInterrupt got lost."""
        if self.received and self.session is not None and not self.session.shouldstop:
            self.session.shouldstop = f"interrupted by {self.received}"


SIGNALS = pytest.StashKey[Signals]()


def signal_received(config: pytest.Config) -> str | None:
    signals = config.stash.get(SIGNALS, None)
    return signals.received if signals is not None else None


def pytest_sessionstart(session: pytest.Session) -> None:
    if _SESSIONS["depth"] == 0:
        _SESSIONS["outermost"] = session
    _SESSIONS["depth"] += 1
    if _is_controller(session.config):
        session.config.stash[SIGNALS] = Signals()
        session.config.stash[SIGNALS].install(session)


def pytest_runtest_logreport(report) -> None:
    for signals in _ACTIVE:
        signals.check()


class Collected:
    """The conformance items a run expects, each with its identity record (``item.record``): those
    this process collected, or (in the xdist controller) those the workers' first reports brought."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[str, ItemRecord]] = {}  # results key -> (node id, identity)

    def add(self, pairs) -> None:
        for nodeid, identity in pairs:
            self.items[record_key(nodeid, identity)] = (nodeid, identity)

    def keys(self) -> set[str]:
        return set(self.items)

    def pairs(self) -> list[list]:
        return [[nodeid, identity] for nodeid, identity in self.items.values()]

    def identity(self, nodeid: str) -> ItemRecord | None:
        return next((identity for known, identity in self.items.values() if known == nodeid), None)


def collected(config: pytest.Config) -> Collected:
    return config.stash.setdefault(COLLECTED, Collected())


def pytest_collection_finish(session: pytest.Session) -> None:
    collected(session.config).add(
        (item.nodeid, item.record) for item in session.items if isinstance(getattr(item, "record", None), dict))


class WorkerCollections:
    """The controller's side of the ledger: takes in each worker's collection from its first report.
    tryfirst, so that the results writer and a crashed item's record see it."""

    def __init__(self, config: pytest.Config):
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report) -> None:
        for key, value in getattr(report, "user_properties", ()):
            if key == COLLECTION_PROPERTY:
                collected(self.config).add(value)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    _SESSIONS["depth"] = max(0, _SESSIONS["depth"] - 1)
    if signal_received(session.config) is not None and session.exitstatus in (
            pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.INTERRUPTED


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if signal_received(config) is not None:
        terminalreporter.write_line(f"conformance: interrupted by {signal_received(config)}", red=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    signals = config.stash.get(SIGNALS, None)
    if signals is not None:
        signals.uninstall()


def _hypothesis_seed(config: pytest.Config):
    try:
        seed = config.getoption("hypothesis_seed")
    except ValueError:
        return None
    return seed if seed is None or isinstance(seed, int) else str(seed)


def _options(config: pytest.Config) -> dict[str, Any]:
    """The command line and every option that changes what runs or how."""
    names = [name for name in vars(config.option) if name.startswith("conformance_") and name != "conformance_run_id"]
    names += ["benchmark_skip", "benchmark_disable", "benchmark_enable", "benchmark_timer", "benchmark_disable_gc"]
    names += ["numprocesses", "maxworkerrestart", "timeout", "timeout_method", "keyword", "markexpr", "xmlpath",
              "hypothesis_seed", "hypothesis_profile"]
    options = {name: getattr(config.option, name) for name in names if hasattr(config.option, name)}
    options["args"] = list(config.invocation_params.args)
    options["rootdir"] = str(config.rootpath)
    return {k: (v if isinstance(v, (str, int, float, bool, list, type(None))) else str(v)) for k, v in options.items()}


def record_key(nodeid: str, record: ItemRecord) -> str:
    """The item's key in the results file: its node id, with the spec path in front where pytest
    leaves the file out (a spec file given on the command line outside the rootdir has node id
    ``::name``, so two such files would collide)."""
    return f"{record.get('spec')}{nodeid}" if nodeid.startswith("::") and record.get("spec") else nodeid


def _relative_case_key(key: str, config: pytest.Config) -> str:
    spec, sep, case = key.partition("::")
    return relative_spec({"spec": spec}, config)["spec"] + sep + case


def case_context(case) -> dict[str, Any]:
    """What a report needs of a spec case beyond its records (the results file's ``cases`` map)."""
    error = case.expected_error
    return {"source": case.source, "derivation": case.derivation or None, "inputs": case.inputs,
            "expected": case.expected,
            "expected_error": {"type": error.type, "match": error.match} if error is not None else None,
            "line": case.line}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Each spec case's context travels once per process with the first report of one of its items."""
    report = yield
    if not _is_controller(item.config) and not item.config.stash.get(_COLLECTION_SENT, False):
        item.config.stash[_COLLECTION_SENT] = True
        report.user_properties.append((COLLECTION_PROPERTY, collected(item.config).pairs()))
    case = getattr(item, "case", None)
    if case is not None and hasattr(case, "inputs") and hasattr(case, "spec_path"):
        key = f"{case.spec_path}::{case.id}"
        sent = item.config.stash.setdefault(_CASES_SENT, set())
        if key not in sent:
            sent.add(key)
            try:
                report.user_properties.append((CASE_PROPERTY, {"key": key, "context": case_context(case)}))
            except Exception:  # noqa: BLE001 - context is for the report; never fail an item over it
                pass
    return report


_record_of = outcomes.record_of


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


# ------------------------------------------------------------------ configuration


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance_benchmark: a benchmark item (--conformance-benchmark)")
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "maxworkerrestart", "") is None:
        config.option.maxworkerrestart = str(MAX_WORKER_RESTART)
    if _is_controller(config) and not config.pluginmanager.has_plugin("conformance-collections"):
        config.pluginmanager.register(WorkerCollections(config), "conformance-collections")
    if _is_controller(config) and getattr(config.option, "numprocesses", None) and WATCH not in config.stash:
        config.stash[WATCH] = WorkerWatch()
        config.pluginmanager.register(config.stash[WATCH], "conformance-worker-watch")
    directory = getattr(config, "workerinput", {}).get(WATCH_DIR)
    if directory and not config.pluginmanager.has_plugin("conformance-watchdog"):
        config.pluginmanager.register(WorkerWatchdog(config, directory), "conformance-watchdog")
    if config.getoption("conformance_progress") and not config.pluginmanager.has_plugin("conformance-progress"):
        progress = Path(directory) / f"{config.workerinput['workerid']}.progress" if directory else None
        config.pluginmanager.register(ShrinkNotice(config, progress), "conformance-progress")
    if config.getoption("conformance_benchmark") and getattr(config.option, "numprocesses", None) == 1:
        # benchmark items keep timing in a single xdist worker (conformance/benchmark.py)
        config.addinivalue_line("filterwarnings", "ignore:Benchmarks are automatically disabled because xdist")
    path = config.getoption("conformance_results") or config.getini("conformance_results")
    if path and _is_controller(config) and not config.getoption("collectonly"):
        path = Path(path)
        if not path.is_absolute():
            path = config.invocation_params.dir / path
        state = ResultsState(config, _usable_results_path(path))
        _take_lock(state)
        config.stash[RESULTS] = state
        config.pluginmanager.register(state, "conformance-results")
        if not getattr(config.option, "xmlpath", None):
            config.option.xmlpath = str(path.with_name(f"{path.stem}.junit.xml"))


def _usable_results_path(path: Path) -> Path:
    """``path`` when a results file can be written there, else a usage error naming the option."""
    option = f"--conformance-results {path}"
    if path.is_dir():
        raise pytest.UsageError(f"{option}: is a directory; give a file path such as {path / 'results.json'}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise pytest.UsageError(f"{option}: {parent} is a file, not a folder")
            break
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise pytest.UsageError(f"{option}: cannot create the folder {path.parent}: {exc.strerror or exc}") from None
    if path.exists() and not path.is_file():
        raise pytest.UsageError(f"{option}: exists and is not a regular file")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise pytest.UsageError(f"{option}: not writable")
    problem = foreign_file_problem(path)
    if problem:
        raise pytest.UsageError(f"{option}: {problem}")
    keep = previous_path(path).parent
    if keep.exists() and not keep.is_dir():
        raise pytest.UsageError(f"{option}: {keep} is a file, but the previous run's results are kept in that "
                                "folder; move the file away")
    return path


def _take_lock(state: ResultsState) -> None:
    """One run per results path: a second one is told which run holds it, never overwrites it."""
    import filelock

    option = f"--conformance-results {state.path}"
    try:
        state.lock.acquire(timeout=0)
    except filelock.Timeout:
        raise pytest.UsageError(
            f"{option}: another run is writing this results file (it holds the lock {lock_path(state.path)}); "
            "wait for it to finish, or give this run another --conformance-results path") from None
    except OSError as exc:
        raise pytest.UsageError(f"{option}: cannot create files in {state.path.parent} "
                                f"(the lock {lock_path(state.path).name}): {exc.strerror or exc}") from None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = float(config.getoption("conformance_timeout") or 0)
    if seconds > 0 and not timeout_user_set(config):
        for item in items:
            if not hasattr(item, "record") or item.get_closest_marker("timeout") is not None:
                continue
            factor = BENCHMARK_TIMEOUT_FACTOR if item.get_closest_marker("conformance_benchmark") else 1
            item.add_marker(pytest.mark.timeout(seconds * factor, func_only=True))  # not in its report


# ------------------------------------------------------------------ records


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report, sched) -> None:
    """xdist's report for an item whose worker died carries no record: make one from the item's
    identity in the workers' collections (an item no worker reported collecting is left as it is),
    saying how the worker ended (the watchdog's "timed out in native code", a signal, an exit status)."""
    config = getattr(sched, "config", None)
    identity = collected(config).identity(crashitem) if config is not None else None
    if identity is None or _record_of(report) is not None:
        return
    watch = config.stash.get(WATCH, None)
    ending = watch.ending(getattr(report, "node", None)) if watch is not None else None
    record = crash_record(identity, report.longrepr, ending)
    report.longrepr = f"{report.longrepr}\n{record['message']}"
    report.user_properties.append((outcomes.PROPERTY, record))


def crash_record(identity: ItemRecord, longrepr: Any, ending: "WorkerEnding | None" = None) -> ItemRecord:
    """The ``error`` record of an item whose worker process died."""
    record: ItemRecord = {**identity, "outcome": outcomes.ERROR.value, "crashed": True}
    where = (f"input: the spec case {identity.get('spec')}::{identity.get('case')}" if identity.get("kind") == "case"
             else "input: the example it was running (re-run the item to see it)")
    if ending is not None and ending.timed_out:
        record["message"] = (f"timed out in native code: still running {ending.after:g} s after it started "
                             f"(its timeout: {ending.timeout:g} s), in code that no Python-level timeout can "
                             "interrupt (C code holding the GIL, or a native wait); the watchdog killed the worker "
                             f"and pytest-xdist replaced it. {where}\n{ending.where}").rstrip()
        record["timed_out"] = True
        return record
    how = f" (it {ending.how})" if ending is not None and ending.how else ""
    record["message"] = (f"the worker process died{how} while running this item; pytest-xdist replaced the worker and "
                         f"the run went on. {where} ({longrepr})"
                         + (f"\n{ending.where}" if ending is not None and ending.where else "")).rstrip()
    if ending is not None and ending.signal:
        record["signal"] = ending.signal
    return record


# ------------------------------------------------------------------ isolation: native hangs, exits, stray threads

WATCH = pytest.StashKey["WorkerWatch"]()
WATCH_DIR = "conformance_watch_dir"  # workerinput key: the controller's folder for the workers' watchdog files


def native_timeout_grace(seconds: float) -> float:
    """How long past an item's timeout the watchdog waits for the Python-level timeout to act (and for
    the failure report it raises to be written, which takes seconds on a loaded machine)."""
    return min(60.0, max(10.0, 0.25 * seconds))


@dataclass
class WorkerEnding:
    """How a worker process ended while running an item."""

    timed_out: bool = False
    timeout: float = 0.0
    after: float = 0.0
    how: str = ""  # "was killed by SIGSEGV (Segmentation fault)", "exited with status 0"
    signal: str | None = None
    where: str = ""  # faulthandler's traceback, trimmed


class WorkerWatch:
    """The controller's side of the watchdog: a folder where each worker's faulthandler writes (the
    item it runs, its traceback on a fatal signal or a native timeout), read when a worker dies."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="conformance-workers-"))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        node.workerinput[WATCH_DIR] = str(self.directory)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def ending(self, node) -> WorkerEnding | None:
        worker = getattr(getattr(node, "gateway", None), "id", None)
        if worker is None:
            return None
        ending = WorkerEnding()
        try:
            text = (self.directory / f"{worker}.txt").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        header, _, dump = text.partition("\n")
        if header.startswith("timeout "):
            ending.timeout, ending.after = (float(x) for x in header.split()[1:3])
        if dump.startswith("Timeout ("):
            ending.timed_out = True
        status = _exit_status(node)
        if status is not None and status < 0:
            try:
                name = signal.Signals(-status).name
                ending.signal, ending.how = name, f"was killed by {name} ({signal.strsignal(-status)})"
            except ValueError:
                ending.how = f"was killed by signal {-status}"
        elif status is not None:
            ending.how = f"exited with status {status} ({'os._exit(0) or exit(0) in C' if status == 0 else 'os._exit, exit() in C, or a --timeout-method=thread timeout'})"
        ending.where = _main_thread_frames(dump)
        return ending


def _main_thread_frames(dump: str, limit: int = 30) -> str:
    """Of faulthandler's dump (one block per thread), the block of the thread that ran the item."""
    blocks, current = [], []
    for line in dump.splitlines():
        if line.startswith(("Thread 0x", "Current thread 0x")) and current:
            blocks.append(current)
            current = []
        if line.strip():
            current.append(line)
    if current:
        blocks.append(current)
    if not blocks:
        return ""
    head = [blocks[0][0]] if blocks[0] and not blocks[0][0].startswith(("Thread", "Current")) else []
    chosen = next((b for b in blocks if any("runtest" in line for line in b)), blocks[-1])
    return "\n".join(head + [line for line in chosen if line not in head][:limit])


def _exit_status(node) -> int | None:
    """The dead worker's exit status (negative: the signal), when execnet's Popen is reachable."""
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    if popen is None:
        return None
    try:
        return popen.wait(timeout=5)
    except Exception:  # noqa: BLE001 - a detail for the message, never worth failing the run
        return None


class WorkerWatchdog:
    """In a pytest-xdist worker: faulthandler's watchdog, a C thread that needs no GIL, ends the worker
    when an item runs past its timeout plus :func:`native_timeout_grace` -- that is, when the
    Python-level timeout (pytest-timeout's signal method) could not act because the item is stuck in
    native code, with the GIL held or not. It writes the traceback to this worker's file first; the
    controller names the item "timed out in native code" and xdist starts a new worker."""

    def __init__(self, config: pytest.Config, directory: str):
        self.handle = open(Path(directory) / f"{config.workerinput['workerid']}.txt", "w+",  # noqa: SIM115
                           encoding="utf-8")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # after pytest's faulthandler plugin, which points it at stderr: fatal signals write here too
        faulthandler.enable(file=self.handle, all_threads=True)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        seconds = item_timeout(item)
        self.handle.seek(0)
        self.handle.truncate()
        after = seconds + native_timeout_grace(seconds) if seconds else 0.0
        self.handle.write(f"timeout {seconds:g} {after:g} {item.nodeid}\n")
        self.handle.flush()
        if seconds:
            faulthandler.dump_traceback_later(after, exit=True, file=self.handle)
        try:
            return (yield)
        finally:
            faulthandler.cancel_dump_traceback_later()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        faulthandler.cancel_dump_traceback_later()
        self.handle.close()


class CandidateExit(Exception):
    """``pytest.exit()`` called from an implementation's code: that item's error, not the run's end."""


_STRAY_THREADS: list[threading.Thread] = []
_SESSIONS: dict[str, Any] = {"depth": 0, "outermost": None}  # the outermost session's status is the process's


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """An item's implementation may not end the run (``pytest.exit``), and threads it leaves running
    (non-daemon) are noted so that they cannot keep the process from exiting."""
    if not isinstance(getattr(item, "record", None), dict):
        return (yield)
    before = set(threading.enumerate())
    try:
        return (yield)
    except pytest.exit.Exception as exc:
        raise CandidateExit(f"the implementation called pytest.exit({safe_text(exc.msg)!r}, "
                            f"returncode={exc.returncode!r}) during this item; an item cannot end the run") from None
    finally:
        stray = [t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon]
        if stray:
            _not_waiting_for(stray)


def _not_waiting_for(threads: list[threading.Thread]) -> None:
    if not _STRAY_THREADS:
        register = getattr(threading, "_register_atexit", None)  # runs before the interpreter joins threads
        if register is not None:
            register(_exit_past_stray_threads)
    _STRAY_THREADS.extend(threads)


def _exit_past_stray_threads() -> None:
    alive = [t for t in _STRAY_THREADS if t.is_alive()]
    if not alive:
        return
    try:
        sys.stdout.flush()
        sys.stderr.write(f"conformance: not waiting for {len(alive)} non-daemon thread(s) an implementation "
                         f"left running ({', '.join(sorted({t.name for t in alive}))}); exiting\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    session = _SESSIONS["outermost"]
    os._exit(int(session.exitstatus) if session is not None else 1)


class ShrinkNotice:
    """``--conformance-progress``: a generated item whose search found a failing example says so on
    the console while Hypothesis shrinks it ("shrinking <item>..."), through Hypothesis's
    observability callbacks. In an xdist worker the line goes to a file of the controller's
    :class:`WorkerWatch` folder, which the controller prints as it comes."""

    def __init__(self, config: pytest.Config, path: Path | None):
        self.config, self.path = config, path
        self.printer: threading.Thread | None = None
        self.stop = threading.Event()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        record = getattr(item, "record", None)
        try:
            from hypothesis.internal.observability import add_observability_callback, remove_observability_callback
        except ImportError:  # an older Hypothesis: no notice
            return (yield)
        if not (isinstance(record, dict) and record.get("generated")) or self.config.getoption(
                "conformance_no_shrink", False):
            return (yield)
        said: list[bool] = []

        def observe(observation) -> None:
            if said or getattr(observation, "type", None) != "test_case" or getattr(observation, "status", "") != "failed":
                return
            said.append(True)
            self.announce(f"shrinking {item.nodeid}: an example failed; Hypothesis is looking for the smallest "
                          "failing example (--conformance-no-shrink skips this)...")

        add_observability_callback(observe)
        try:
            return (yield)
        finally:
            remove_observability_callback(observe)

    def announce(self, text: str) -> None:
        if self.path is not None:
            try:
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(text + "\n")
            except OSError:
                pass
            return
        _console(self.config, text)

    # the controller of an xdist run: print the workers' lines

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        watch = self.config.stash.get(WATCH, None)
        if self.path is None and watch is not None:
            self.printer = threading.Thread(target=self._print_workers, args=(watch.directory,),
                                            name="conformance-progress", daemon=True)
            self.printer.start()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.stop.set()

    def _print_workers(self, directory: Path) -> None:
        offsets: dict[Path, int] = {}
        while not self.stop.wait(1.0):
            for path in sorted(directory.glob("*.progress")):
                try:
                    with open(path, encoding="utf-8") as handle:
                        handle.seek(offsets.get(path, 0))
                        text = handle.read()
                        offsets[path] = handle.tell()
                except OSError:
                    continue
                for line in text.splitlines():
                    _console(self.config, line)


def _console(config: pytest.Config, text: str) -> None:
    terminal = config.pluginmanager.getplugin("terminalreporter")
    capture = config.pluginmanager.getplugin("capturemanager")
    if terminal is None:
        return
    try:
        if capture is not None and threading.current_thread() is threading.main_thread():
            with capture.global_and_fixture_disabled():
                terminal.write_line(text, yellow=True)
        else:
            terminal.write_line(text, yellow=True)
    except Exception:  # noqa: BLE001 - a notice, never worth failing a run
        pass
