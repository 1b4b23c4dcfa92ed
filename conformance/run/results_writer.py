"""The results file: ``--conformance-results PATH`` writes the run's results JSON to PATH (atomically:
at the end, every ``--conformance-results-every`` seconds while running, and when interrupted), and
JUnit XML beside it (``<stem>.junit.xml``) unless ``--junitxml`` names another file.

The results path is checked and locked (``filelock``) when pytest configures: an unusable path (a
directory, a parent that is a file, a folder that cannot be written) or one another run is
writing is a usage error naming the option. Under pytest-xdist the controller writes the file from
the records the workers' reports bring (conformance/run/transfer.py).

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from conformance.run import outcomes
from conformance.results.store import (ResultsLocked, ResultsWriter, foreign_file_problem, junit_beside, lock_path,
                                       now, previous_path, results_lock, run_metadata, take_lock)
from conformance.run.signals import signal_received, stop_run
from conformance.run.state import SELECTION, is_controller, relative_spec
from conformance.run.transfer import CASE_PROPERTY, collected, record_key

RESULTS = pytest.StashKey["ResultsState"]()


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
        self.failed_last = False  # the latest write failed: the file holds ``on_disk``
        self.on_disk: tuple[int, str] | None = None  # records and status of the last write that fit
        self.removed: list[Path] = []  # the JUnit XML, removed when it would describe more than the file
        self.session: pytest.Session | None = None

    @property
    def expected(self) -> set[str]:
        """The results keys of every conformance item collected (by this process or by the workers)."""
        return collected(self.config).keys()

    def write(self, status: str | None = None) -> bool:
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
            stop_run(self.config, self.session, self.write_error)
            self.failed_last = True
            return False
        self.failed_last = False
        self.on_disk = (len(self.writer.records), run["status"])
        self.last_write = time.monotonic()
        return True

    # hooks

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return [f"conformance results: {self.path}"]

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        selection = self.config.stash.get(SELECTION, None)
        devices = selection.devices if selection is not None else ["cpu"]
        self.writer = ResultsWriter(self.path, run_metadata(
            devices=devices, backends=selection.backends if selection is not None else (),
            options=_options(self.config), label=self.config.getoption("conformance_label"),
            hypothesis_seed=_hypothesis_seed(self.config), run_id=self.config.getoption("conformance_run_id")),
            companions=tuple(Path(p) for p in [getattr(self.config.option, "xmlpath", None)] if p))
        self.write()

    def pytest_runtest_logreport(self, report) -> None:
        if self.writer is None:
            return
        for key, value in getattr(report, "user_properties", ()):
            if key == CASE_PROPERTY:
                self.writer.add_case(_relative_case_key(value["key"], self.config), value["context"])
        record = outcomes.record_of(report)
        if record is None:
            return
        self.writer.add(record_key(report.nodeid, record), relative_spec(record, self.config))
        if time.monotonic() - self.last_write >= self.every:
            self.write()

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus):
        """The final write, after every other plugin's sessionfinish (the JUnit XML's), even one that raised."""
        try:
            return (yield)
        finally:
            self._finish(session)

    def _finish(self, session: pytest.Session) -> None:
        if self.writer is None:
            return
        run = self.writer.run
        exitstatus = session.exitstatus  # conformance/run/signals.py may have turned it into INTERRUPTED
        run["finished"] = now()
        run["exit_status"] = int(exitstatus)
        missing = self.expected - set(self.writer.records)
        received = signal_received(self.config)
        interrupted = int(exitstatus) == int(pytest.ExitCode.INTERRUPTED) or bool(missing) or received is not None
        if received is not None:
            run["interrupted_by"] = received
        interrupted = interrupted or self.write_error is not None
        if not self.write("interrupted" if interrupted else "complete"):
            self.removed = [path for path in self.writer.companions if path.is_file()]
            for path in self.removed:  # the JUnit XML would describe more than the file holds
                path.unlink()
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
        held = f"{len(self.writer.records)} records{extra}; status {self.writer.run['status']}"
        if self.failed_last:  # say what the file holds, then what the run had
            fit = (f"last write that fit: {self.on_disk[0]} records, status {self.on_disk[1]}" if self.on_disk
                   else "none of this run's writes fit")
            held = f"{fit}; the run had {held}" + "".join(f"; removed the JUnit XML {path}" for path in self.removed)
        terminalreporter.write_line(f"conformance results: {self.path} ({held})")


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



def _relative_case_key(key: str, config: pytest.Config) -> str:
    spec, sep, case = key.partition("::")
    return relative_spec({"spec": spec}, config)["spec"] + sep + case



def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    path = config.getoption("conformance_results") or config.getini("conformance_results")
    if path and is_controller(config) and not config.getoption("collectonly"):
        path = Path(path)
        if not path.is_absolute():
            path = config.invocation_params.dir / path
        state = ResultsState(config, _usable_results_path(path))
        _usable_junit_path(config)
        _take_lock(state)
        config.stash[RESULTS] = state
        config.pluginmanager.register(state, "conformance-results")
        if not getattr(config.option, "xmlpath", None):
            config.option.xmlpath = str(junit_beside(path))


def _usable_results_path(path: Path) -> Path:
    """``path`` when a results file can be written there, else a usage error naming the option."""
    option = f"--conformance-results {path}"
    _writable(path, option, "results.json")
    problem = foreign_file_problem(path)
    if problem:
        raise pytest.UsageError(f"{option}: {problem}")
    keep = previous_path(path).parent
    if keep.exists() and not keep.is_dir():
        raise pytest.UsageError(f"{option}: {keep} is a file, but the previous run's results are kept in that "
                                "folder; move the file away")
    kept = previous_path(path)
    if (kept.exists() or kept.is_symlink()) and not kept.is_file():
        raise pytest.UsageError(f"{option}: {kept} is not a regular file, but the previous run's results are kept "
                                "there; move it away")
    return path


def _usable_junit_path(config: pytest.Config) -> None:
    """``--junitxml``, which pytest writes at the end: checked now, as the results path is (else a
    traceback at the end, and the results file left ``running``)."""
    given = getattr(config.option, "xmlpath", None)
    if given:  # pytest's junitxml resolves it so
        _writable(Path(os.path.abspath(os.path.expanduser(os.path.expandvars(given)))), f"--junitxml {given}",
                  "junit.xml")


def _writable(path: Path, option: str, example: str) -> None:
    """A usage error naming ``option`` unless a file can be written at ``path`` (its folder created)."""
    if path.is_dir():
        raise pytest.UsageError(f"{option}: is a directory; give a file path such as {path / example}")
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
    try:  # what os.access does not tell root: /proc, say
        handle, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
    except OSError as exc:
        raise pytest.UsageError(f"{option}: not writable (cannot create a file in {path.parent}: "
                                f"{exc.strerror or exc})") from None
    os.close(handle)
    os.unlink(probe)


def _take_lock(state: ResultsState) -> None:
    """One run per results path: a second one is told which run holds it, never overwrites it."""
    option = f"--conformance-results {state.path}"
    try:
        take_lock(state.path, state.lock)
    except ResultsLocked as exc:
        raise pytest.UsageError(f"{option}: {exc.message}; wait for it to finish, or give this run another "
                                "--conformance-results path") from None
    except OSError as exc:
        raise pytest.UsageError(f"{option}: cannot create files in {state.path.parent} "
                                f"(the lock {lock_path(state.path).name}): {exc.strerror or exc}") from None
