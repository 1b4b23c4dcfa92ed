"""A Ctrl-C from a signal, told apart from a ``KeyboardInterrupt`` the code under test raises itself.

While an item runs (``conformance.run.isolation``), :class:`SignalWatch` is SIGINT's handler: a real
SIGINT raises :class:`SignalInterrupt` (a ``KeyboardInterrupt``, so it still ends the run), and a plain
``KeyboardInterrupt`` raised meanwhile can only be the implementation's own: that item's (or that
example's) failure, not the run's end (:func:`raised_by_code`). So too while SIGINT is ignored (a run
started in the background of a script) or has no Python handler: no signal raises one then.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class SignalInterrupt(KeyboardInterrupt):
    """The ``KeyboardInterrupt`` of a SIGINT or SIGTERM that reached the run (the run's to end)."""


class SignalWatch:
    """SIGINT's handler while an item runs (a context manager): raises :class:`SignalInterrupt`, through
    the handler it replaced when that one is Python's own (``conformance.run.signals``'), or itself."""

    def __init__(self) -> None:
        self.previous: Any = None
        self.installed = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.previous is signal.default_int_handler:  # installed only over a callable handler
            raise SignalInterrupt(signal.Signals(signum).name)
        try:
            self.previous(signum, frame)  # the run's handler (it may return: a repeated signal)
        except KeyboardInterrupt as exc:
            if isinstance(exc, SignalInterrupt):
                raise
            raise SignalInterrupt(*exc.args) from None

    def __enter__(self) -> "SignalWatch":
        if threading.current_thread() is threading.main_thread():
            current = signal.getsignal(signal.SIGINT)
            if callable(current):  # not SIG_IGN/SIG_DFL, nor a handler installed outside Python
                self.previous = current
                signal.signal(signal.SIGINT, self)
                self.installed = True
        return self

    def __exit__(self, *exc_info: Any) -> None:
        previous = self.previous  # (read first: mypy narrows self to getsignal's type on `is self`)
        if self.installed and signal.getsignal(signal.SIGINT) is self:
            signal.signal(signal.SIGINT, previous)
        self.installed = False


def raised_by_code(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``KeyboardInterrupt`` the running code raised itself, not a signal's: while a
    :class:`SignalWatch` is SIGINT's handler, or while SIGINT raises nothing (ignored, as a run started in
    the background of a script inherits it, or left to kill the process); under Python's own handler
    the two cannot be told apart, and it is the run's."""
    if not isinstance(exc, KeyboardInterrupt) or isinstance(exc, SignalInterrupt):
        return False
    handler = signal.getsignal(signal.SIGINT)
    return isinstance(handler, SignalWatch) or handler in (signal.SIG_IGN, signal.SIG_DFL)
