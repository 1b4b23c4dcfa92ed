"""A circuit breaker, as pytest-xdist's ``--max-worker-restart`` is one: ``--conformance-max-crashes N``
stops the run when the candidate's first N items in a row crashed or hung (a dead worker, a native
hang the watchdog ended, a pytest-timeout) and none of its items gave a result yet. A candidate
that crashes or deadlocks on every input would otherwise cost each item its timeout and a worker
restart, one after another (over 15 minutes before anything was reported). Once one candidate item
ran to a result (passed, failed, xfail), the breaker is off for the rest of the run. ``conformance
check`` gives ``--conformance-max-crashes 5``; the default, 0, never stops a run. Under pytest-xdist
a tripped breaker also stops the workers after the item each is running (:class:`WorkerStop`): the
controller stops sending items, but a worker would run all those it was already sent (minutes of a
built-in backend's generated items beside a candidate whose every item was refused at once).

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.core.record import CANDIDATE, ItemRecord
from conformance.run import outcomes, timeouts
from conformance.run.signals import stop_run
from conformance.run.state import is_conformance_run, is_controller

PYTEST_TIMEOUT = "from pytest-timeout"  # pytest-timeout's failure message: "Timeout (>60.0s) from pytest-timeout."
TRIPPED = "breaker-tripped"  # the file in the workers' watch folder (timeouts.WATCH_DIR) that tells them to stop


def crashed_or_hung(record: ItemRecord) -> bool:
    """The item's process died (crash, native hang) or the item ran past its timeout."""
    return bool(record.get("crashed") or record.get("timed_out")) or (
        record.get("outcome") in (outcomes.ERROR.value, outcomes.FAILED.value)
        and PYTEST_TIMEOUT in str(record.get("message") or ""))


class Breaker:
    """The controller's count of the candidate's crashed or hung items in a row, from the start."""

    def __init__(self, config: pytest.Config, limit: int):
        self.config = config
        self.limit = limit
        self.in_a_row: list[str] = []
        self.off = False  # a candidate item gave a result: the breaker never trips in this run
        self.tripped: str | None = None
        self.session: pytest.Session | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report) -> None:
        record = outcomes.record_of(report)
        if record is None or record.get("backend") != CANDIDATE or self.off or self.tripped:
            return
        if crashed_or_hung(record):
            self.in_a_row.append(report.nodeid)
        elif record.get("outcome") in (outcomes.SKIPPED.value, outcomes.UNSUPPORTED.value):
            return  # not run: says nothing either way
        else:
            self.off = True
            return
        if len(self.in_a_row) >= self.limit:
            self.tripped = (f"the candidate crashed or hung on every input tried: its first {len(self.in_a_row)} "
                            f"items in a row, and none passed (--conformance-max-crashes {self.limit}); "
                            "the run stopped early")
            stop_run(self.config, self.session, self.tripped)
            watch = self.config.stash.get(timeouts.WATCH, None)
            if watch is not None:  # the workers' side: WorkerStop
                try:
                    (watch.directory / TRIPPED).write_text(self.tripped, encoding="utf-8")
                except OSError:
                    pass

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        if self.tripped:
            terminalreporter.write_line(f"conformance: {self.tripped}", red=True)
            for nodeid in self.in_a_row:
                terminalreporter.write_line(f"  crashed or hung: {nodeid}", red=True)


class WorkerStop:
    """In a pytest-xdist worker: once the controller's breaker tripped (it writes :data:`TRIPPED` in
    the watch folder), stop after the item running, as pytest-xdist's worker stops on its own
    session's ``shouldstop``; the items it was sent and did not run are listed ``not_run``."""

    def __init__(self, path: Path):
        self.path = path
        self.session: pytest.Session | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        if self.session is None or self.session.shouldstop or not self.path.exists():
            return
        try:
            reason = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            reason = ""
        self.session.shouldstop = reason or "the candidate crashed or hung on every input tried"


BREAKER = pytest.StashKey[Breaker]()


def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    limit = int(config.getoption("conformance_max_crashes", 0) or 0)
    if limit <= 0 or not is_conformance_run(config):
        return
    directory = getattr(config, "workerinput", {}).get(timeouts.WATCH_DIR)
    if directory:
        if not config.pluginmanager.has_plugin("conformance-breaker-stop"):
            config.pluginmanager.register(WorkerStop(Path(directory) / TRIPPED), "conformance-breaker-stop")
        return
    if not is_controller(config) or BREAKER in config.stash:
        return
    config.stash[BREAKER] = Breaker(config, limit)
    config.pluginmanager.register(config.stash[BREAKER], "conformance-breaker")
