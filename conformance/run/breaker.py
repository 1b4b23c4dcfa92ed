"""A circuit breaker, as pytest-xdist's ``--max-worker-restart`` is one: ``--conformance-max-crashes N``
stops the run when the candidate's first N items in a row crashed or hung (a dead worker, a native
hang the watchdog ended, a pytest-timeout) and none of its items gave a result yet. A candidate
that crashes or deadlocks on every input would otherwise cost each item its timeout and a worker
restart, one after another (over 15 minutes before anything was reported). Once one candidate item
ran to a result (passed, failed, xfail), the breaker is off for the rest of the run. ``conformance
check`` gives ``--conformance-max-crashes 5``; the default, 0, never stops a run.

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import pytest

from conformance.core.record import ItemRecord
from conformance.run import outcomes
from conformance.run.signals import stop_run
from conformance.run.state import is_conformance_run, is_controller

CANDIDATE = "candidate"  # the backend of --conformance-impl (conformance/run/plugin.py)
PYTEST_TIMEOUT = "from pytest-timeout"  # pytest-timeout's failure message: "Timeout (>60.0s) from pytest-timeout."


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

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        if self.tripped:
            terminalreporter.write_line(f"conformance: {self.tripped}", red=True)
            for nodeid in self.in_a_row:
                terminalreporter.write_line(f"  crashed or hung: {nodeid}", red=True)


BREAKER = pytest.StashKey[Breaker]()


def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    limit = int(config.getoption("conformance_max_crashes", 0) or 0)
    if limit <= 0 or not is_conformance_run(config) or not is_controller(config) or BREAKER in config.stash:
        return
    config.stash[BREAKER] = Breaker(config, limit)
    config.pluginmanager.register(config.stash[BREAKER], "conformance-breaker")
