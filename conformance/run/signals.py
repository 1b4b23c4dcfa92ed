"""SIGINT and SIGTERM end the run as ``interrupted`` with a non-zero exit status even when the
``KeyboardInterrupt`` they raise is swallowed (e.g. raised inside a gc callback and printed as
"Exception ignored"): the handler also sets a flag that the hooks check. :func:`stop_run` stops a
run after the item now running (also under pytest-xdist).

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from conformance.core.interrupts import SignalInterrupt
from conformance.run.state import is_conformance_run, is_controller

def stop_run(config: pytest.Config, session: pytest.Session | None, reason: str) -> None:
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
        raise SignalInterrupt(name)

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
    if is_controller(session.config) and is_conformance_run(session.config):
        session.config.stash[SIGNALS] = Signals()
        session.config.stash[SIGNALS].install(session)


def pytest_runtest_logreport(report) -> None:
    for signals in _ACTIVE:
        signals.check()


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
