"""A forked copy of a run's process never runs or reports items, and ends with the run.

A candidate that calls ``os.fork()`` and whose child does not exit (a classic multiprocessing misuse)
would leave a copy of the xdist worker behind: one that goes back to the harness runs and reports items
a second time, one that hangs (torch's thread pool does not survive a fork) outlives the run. While a
run watches (:func:`watch`), a child forked in its process is marked a copy and dies with the thread
that forked it (Linux's ``PR_SET_PDEATHSIG``); where the harness takes control back from an
implementation, :func:`leave_if_forked` ends a copy at once. A child that never comes back (a
multiprocessing worker, an ``exec``) is left to do its work.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

# this process's, copied into a child; "unheld": the file descriptors a copy closes at once
_STATE: dict = {"runs": 0, "hooked": False, "forked": False, "parent": 0, "unheld": set(), "prctl": None}

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def watch() -> None:
    """A run of this process begins: a child it forks from now on is a copy (until :func:`unwatch`;
    nested runs count)."""
    if not _STATE["hooked"] and hasattr(os, "register_at_fork"):
        if sys.platform.startswith("linux"):  # looked up here: no dlopen in a child of a threaded process
            try:
                _STATE["prctl"] = ctypes.CDLL(None).prctl
            except (OSError, AttributeError):
                pass
        os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
        _STATE["hooked"] = True
    _STATE["runs"] += 1


def unwatch() -> None:
    _STATE["runs"] = max(0, _STATE["runs"] - 1)


def not_held_by_copies(fd: int, closed: bool = False) -> None:
    """A copy closes ``fd`` at once (a pipe whose reader waits for its end: the run's sidecar);
    ``closed``: that fd was closed here, forget it."""
    (_STATE["unheld"].discard if closed else _STATE["unheld"].add)(fd)


def _before_fork() -> None:
    _STATE["parent"] = os.getpid()


def _after_fork_in_child() -> None:
    if not _STATE["runs"]:
        return
    _STATE["forked"] = True
    for fd in _STATE["unheld"]:
        try:
            os.close(fd)
        except OSError:
            pass
    if _STATE["prctl"] is not None:
        _STATE["prctl"](PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != _STATE["parent"]:  # the parent ended before prctl: no signal will come
        os._exit(0)


def leave_if_forked() -> None:
    """In a forked copy of a run's process, back in the harness: end it at once (``os._exit``: no
    atexit handler, no output buffered by the parent written a second time)."""
    if _STATE["forked"]:
        os._exit(0)
