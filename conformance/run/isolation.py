"""Isolation of an item's implementation: it may not end the run (``pytest.exit`` becomes that item's
error), non-daemon threads it leaves running cannot keep the process from exiting, and a copy of the
process it forks never runs or reports items (:mod:`conformance.core.forks`).

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import pytest

from conformance.core import forks
from conformance.core.interrupts import SignalWatch, raised_by_code
from conformance.core.types import safe_text

class CandidateExit(Exception):
    """``pytest.exit()`` called from an implementation's code: that item's error, not the run's end."""


class CandidateInterrupt(Exception):
    """A ``KeyboardInterrupt`` the implementation raised itself (no signal came): that item's error."""


_STRAY_THREADS: list[threading.Thread] = []
_SESSIONS: dict[str, Any] = {"depth": 0, "outermost": None}  # the outermost session's status is the process's



def pytest_configure(config: pytest.Config) -> None:
    forks.watch()


def pytest_unconfigure(config: pytest.Config) -> None:
    forks.unwatch()


def pytest_sessionstart(session: pytest.Session) -> None:
    if _SESSIONS["depth"] == 0:
        _SESSIONS["outermost"] = session
    _SESSIONS["depth"] += 1


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    _SESSIONS["depth"] = max(0, _SESSIONS["depth"] - 1)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """An item's implementation may not end the run (``pytest.exit``, a ``KeyboardInterrupt`` it raises
    itself: conformance.core.interrupts), and threads it leaves running (non-daemon) are noted so that
    they cannot keep the process from exiting."""
    if not isinstance(getattr(item, "record", None), dict):
        return (yield)
    before = set(threading.enumerate())
    try:
        with SignalWatch():
            try:
                return (yield)
            except KeyboardInterrupt as exc:
                if not raised_by_code(exc):
                    raise  # a SIGINT or SIGTERM: the run's end
                raise CandidateInterrupt(f"the implementation raised {type(exc).__name__}({safe_text(exc)!r}) "
                                         "during this item, and no SIGINT reached the run; an item cannot end "
                                         "the run") from exc
    except pytest.exit.Exception as exc:
        raise CandidateExit(f"the implementation called pytest.exit({safe_text(exc.msg)!r}, "
                            f"returncode={exc.returncode!r}) during this item; an item cannot end the run") from None
    finally:
        forks.leave_if_forked()
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
