"""Crashed pytest-xdist workers: xdist's report for an item whose worker died (segfault, abort,
the watchdog's native timeout) gets an ``error`` record saying so, and the run goes on: unless
``--max-worker-restart`` is given it is raised to :data:`MAX_WORKER_RESTART`, so that many
crashing items do not end the run.

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.core.record import ItemRecord
from conformance.run import outcomes
from conformance.run.native_hangs import WorkerEnding, input_of, timed_out_record
from conformance.run.state import is_conformance_run
from conformance.run.timeouts import WATCH
from conformance.run.transfer import collected

MAX_WORKER_RESTART = 100


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report, sched) -> None:
    """xdist's report for an item whose worker died carries no record: make one from the item's
    identity in the workers' collections (an item no worker reported collecting is left as it is),
    saying how the worker ended (the watchdog's "timed out in native code", a signal, an exit status)."""
    config = getattr(sched, "config", None)
    identity = collected(config).identity(crashitem) if config is not None else None
    if config is None or identity is None or outcomes.record_of(report) is not None:
        return
    watch = config.stash.get(WATCH, None)
    ending = watch.ending(getattr(report, "node", None)) if watch is not None else None
    record = crash_record(identity, report.longrepr, ending)
    report.longrepr = f"{report.longrepr}\n{record['message']}"
    report.user_properties.append((outcomes.PROPERTY, record))


def crash_record(identity: ItemRecord, longrepr: Any, ending: WorkerEnding | None = None) -> ItemRecord:
    """The ``error`` record of an item whose worker process died."""
    if ending is not None and ending.timed_out:
        return timed_out_record(identity, ending, replaced=True)
    record: ItemRecord = {**identity, "outcome": outcomes.ERROR.value, "crashed": True}
    where = input_of(identity)
    how = f" (it {ending.how})" if ending is not None and ending.how else ""
    record["message"] = (f"the worker process died{how} while running this item; pytest-xdist replaced the worker and "
                         f"the run went on. {where} ({longrepr})"
                         + (f"\n{ending.where}" if ending is not None and ending.where else "")).rstrip()
    if ending is not None and ending.signal:
        record["signal"] = ending.signal
    return record


def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    if not is_conformance_run(config):
        return  # someone's own tests: xdist's own worker restarts
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "maxworkerrestart", "") is None:
        config.option.maxworkerrestart = str(MAX_WORKER_RESTART)
