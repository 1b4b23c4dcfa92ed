"""What the native-hang watchdogs share (:mod:`conformance.run.timeouts`, an xdist worker's;
:mod:`conformance.run.first_calls_watch`, the first calls'; :mod:`conformance.run.plain_watchdog`, a
run in one process's): how long past an item's timeout they wait for the Python-level timeout to act
(:func:`native_timeout_grace`), the longest wait they arm (:func:`capped`), the terminal's stderr
past pytest's capture (:func:`stderr_fd`), the controller's folder for the workers' watch files
(:data:`WATCH_DIR`), and the ``error`` record of an item a watchdog ended (:func:`timed_out_record`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest

from conformance.core.record import ItemRecord
from conformance.core.types import Outcome

WATCH_DIR = "conformance_watch_dir"  # workerinput key: the controller's folder for the workers' watchdog files

# the longest wait a watchdog is armed for: faulthandler refuses a deadline past the platform's time_t
# (between 1e9 and 1e10 seconds from now) and a thread's wait one past threading.TIMEOUT_MAX; an item's
# timeout grows with its examples (generated items), so a huge --conformance-examples could reach them
WATCH_MAX_SECONDS = 1e9


def capped(seconds: float) -> float:
    """``seconds``, at most :data:`WATCH_MAX_SECONDS` (about 31 years: never reached, never an OverflowError)."""
    return min(seconds, WATCH_MAX_SECONDS)


def native_timeout_grace(seconds: float) -> float:
    """How long past an item's timeout the watchdog waits for the Python-level timeout to act (and for
    the failure report it raises to be written, which takes seconds on a loaded machine)."""
    return min(60.0, max(10.0, 0.25 * seconds))


def stderr_fd(config: pytest.Config) -> int:
    """The terminal's stderr, past pytest's capture: the copy pytest's faulthandler plugin keeps (made
    in its pytest_configure, after the suite's)."""
    try:
        # pytest's private name, imported where it is used: a pytest without it falls back below
        from _pytest.faulthandler import fault_handler_stderr_fd_key

        return config.stash[fault_handler_stderr_fd_key]
    except (ImportError, KeyError):
        return sys.__stderr__.fileno() if sys.__stderr__ is not None else 2


@dataclass
class WorkerEnding:
    """How a worker process ended while running an item."""

    timed_out: bool = False
    timeout: float = 0.0
    after: float = 0.0
    how: str = ""  # "was killed by SIGSEGV (Segmentation fault)", "exited with status 0"
    signal: str | None = None
    where: str = ""  # faulthandler's traceback, trimmed


def input_of(identity: ItemRecord) -> str:
    """Which input a crashed or hung item was running, in words."""
    return (f"input: the spec case {identity.get('spec')}::{identity.get('case')}" if identity.get("kind") == "case"
            else "input: the example it was running (re-run the item to see it)")


def timed_out_record(identity: ItemRecord, ending: WorkerEnding, *, replaced: bool) -> ItemRecord:
    """The ``error`` record of an item the watchdog ended (``replaced``: pytest-xdist started another
    worker; False: a run in one process, which the hang ended,
    :class:`~conformance.run.plain_watchdog.PlainWatchdog`)."""
    what = ("the watchdog killed the worker and pytest-xdist replaced it" if replaced else
            "in a run in one process nothing can take its place, so the watchdog ended the run here: the "
            "items after it were not run (run with -n 1 or more to lose only this item)")
    message = (f"timed out in native code: still running {ending.after:g} s after it started (its timeout: "
               f"{ending.timeout:g} s), in code that no Python-level timeout can interrupt (C code holding the "
               f"GIL, or a native wait); {what}. {input_of(identity)}\n{ending.where}").rstrip()
    return {**identity, "outcome": Outcome.ERROR.value, "crashed": True, "message": message, "timed_out": True}
