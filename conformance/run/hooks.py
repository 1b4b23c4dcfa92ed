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
import math
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from conformance.run import outcomes
from conformance.results.store import ResultsWriter, lock_path, now, results_lock, run_metadata

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
CRASH_MESSAGE = ("the worker process died while running this item (segfault, abort, os._exit, or a "
                 "--timeout-method=thread timeout); the worker's stderr above says which. "
                 "pytest-xdist replaced the worker and the run went on.")


def _seconds(minimum_exclusive: bool):
    """An argparse type: a finite number of seconds, > 0 or >= 0 (pytest reports a bad one as a usage error)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < 0 or (minimum_exclusive and value == 0):
            raise argparse.ArgumentTypeError(
                f"{text!r}: must be a finite number of seconds {'> 0' if minimum_exclusive else '>= 0'}")
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
        self.writer.write(status)
        self.last_write = time.monotonic()

    # hooks

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return [f"conformance results: {self.path}"]

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        selection = _selection(self.config)
        devices = selection.devices if selection is not None else ["cpu"]
        self.writer = ResultsWriter(self.path, run_metadata(
            devices=devices, options=_options(self.config), label=self.config.getoption("conformance_label"),
            hypothesis_seed=_hypothesis_seed(self.config)),
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
        self.writer.add(record_key(report.nodeid, record), _relative_spec(record, self.config))
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
        self.write("interrupted" if interrupted else "complete")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.lock.release()

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        if self.writer is None:
            return
        not_run = len(self.writer.run.get("not_run") or [])
        extra = f", {not_run} collected items not run" if not_run else ""
        terminalreporter.write_line(
            f"conformance results: {self.path} ({len(self.writer.records)} records{extra}; "
            f"status {self.writer.run['status']})")


_ACTIVE: list["Signals"] = []  # the sessions of this process (an in-process pytest.main nests one)


class Signals:
    """SIGINT/SIGTERM in the controller: raise KeyboardInterrupt (pytest unwinds and the results are
    written) and remember the signal, so that a KeyboardInterrupt swallowed on its way up (raised in
    a gc callback or a ``__del__``, printed as "Exception ignored") still ends the run interrupted."""

    def __init__(self) -> None:
        self.received: str | None = None
        self.session: pytest.Session | None = None
        self.previous: dict[int, Any] = {}

    def _handle(self, signum, frame):
        name = signal.Signals(signum).name
        self.received = self.received or name
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
        self.items: dict[str, tuple[str, dict[str, Any]]] = {}  # results key -> (node id, identity)

    def add(self, pairs) -> None:
        for nodeid, identity in pairs:
            self.items[record_key(nodeid, identity)] = (nodeid, identity)

    def keys(self) -> set[str]:
        return set(self.items)

    def pairs(self) -> list[list]:
        return [[nodeid, identity] for nodeid, identity in self.items.values()]

    def identity(self, nodeid: str) -> dict[str, Any] | None:
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


def _selection(config: pytest.Config):
    from conformance.run.plugin import SELECTION

    return config.stash.get(SELECTION, None)


def _hypothesis_seed(config: pytest.Config):
    try:
        seed = config.getoption("hypothesis_seed")
    except ValueError:
        return None
    return seed if seed is None or isinstance(seed, int) else str(seed)


def _options(config: pytest.Config) -> dict[str, Any]:
    """The command line and every option that changes what runs or how."""
    names = [name for name in vars(config.option) if name.startswith("conformance_")]
    names += ["benchmark_skip", "benchmark_disable", "benchmark_enable", "benchmark_timer", "benchmark_disable_gc"]
    names += ["numprocesses", "maxworkerrestart", "timeout", "timeout_method", "keyword", "markexpr", "xmlpath",
              "hypothesis_seed", "hypothesis_profile"]
    options = {name: getattr(config.option, name) for name in names if hasattr(config.option, name)}
    options["args"] = list(config.invocation_params.args)
    options["rootdir"] = str(config.rootpath)
    return {k: (v if isinstance(v, (str, int, float, bool, list, type(None))) else str(v)) for k, v in options.items()}


def _relative_spec(record: dict, config: pytest.Config) -> dict:
    """Spec paths relative to the rootdir, so that runs from different checkouts match up."""
    spec = record.get("spec")
    if spec and os.path.isabs(spec):
        try:
            record = {**record, "spec": Path(spec).resolve().relative_to(config.rootpath.resolve()).as_posix()}
        except ValueError:
            pass
    return record


def record_key(nodeid: str, record: dict) -> str:
    """The item's key in the results file: its node id, with the spec path in front where pytest
    leaves the file out (a spec file given on the command line outside the rootdir has node id
    ``::name``, so two such files would collide)."""
    return f"{record.get('spec')}{nodeid}" if nodeid.startswith("::") and record.get("spec") else nodeid


def _relative_case_key(key: str, config: pytest.Config) -> str:
    spec, sep, case = key.partition("::")
    return _relative_spec({"spec": spec}, config)["spec"] + sep + case


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


def _timeout_user_set(config: pytest.Config) -> bool:
    if not config.pluginmanager.hasplugin("timeout"):
        return True  # nothing to set
    if config.getoption("timeout", None) is not None or os.environ.get("PYTEST_TIMEOUT"):
        return True
    try:
        return bool(config.getini("timeout"))
    except ValueError:
        return False


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = float(config.getoption("conformance_timeout") or 0)
    if seconds > 0 and not _timeout_user_set(config):
        for item in items:
            if not hasattr(item, "record") or item.get_closest_marker("timeout") is not None:
                continue
            factor = BENCHMARK_TIMEOUT_FACTOR if item.get_closest_marker("conformance_benchmark") else 1
            item.add_marker(pytest.mark.timeout(seconds * factor))


# ------------------------------------------------------------------ records


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report, sched) -> None:
    """xdist's report for an item whose worker died carries no record: make one from the item's
    identity in the workers' collections (an item no worker reported collecting is left as it is)."""
    identity = collected(sched.config).identity(crashitem) if sched is not None else None
    if identity is None or _record_of(report) is not None:
        return
    report.user_properties.append((outcomes.PROPERTY, crash_record(identity, report.longrepr)))


def crash_record(identity: dict[str, Any], longrepr: Any) -> dict[str, Any]:
    """The ``error`` record of an item whose worker process died."""
    return {**identity, "outcome": outcomes.ERROR.value, "crashed": True, "message": f"{CRASH_MESSAGE} ({longrepr})"}
