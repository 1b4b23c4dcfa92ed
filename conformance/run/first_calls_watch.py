"""The first calls' watch (conformance.run.items.first_calls_made: each backend's first call of each
op, made before any item's timer starts): faulthandler's watchdog over them
(:class:`FirstCallsWatchdog`), and what tells the workers that replace a crashed or hung xdist worker
which first calls did not finish in an earlier one (:func:`first_calls_hung_earlier`), so that they
do not make them again.
"""

from __future__ import annotations

import faulthandler
from pathlib import Path

import pytest

from conformance.run.native_hangs import WATCH_DIR, capped, native_timeout_grace, stderr_fd
from conformance.run.options import is_conformance_run


def first_calls_hung_marker(config: pytest.Config) -> Path | None:
    """In an xdist worker of a run of the suite's: the file in the controller's watch folder that says
    the first calls (conformance.run.items.first_calls_made) did not finish in some worker of this
    run. A worker that replaces a crashed or hung one skips them then: a candidate that hangs on
    every input would otherwise cost each new worker the first calls' whole limit again."""
    directory = getattr(config, "workerinput", {}).get(WATCH_DIR)
    return Path(directory) / "first-calls-did-not-finish" if directory else None


FIRST_CALLS = "first-calls"  # a worker's watch file's header while it makes its first calls


def first_calls_hung_earlier(config: pytest.Config) -> dict[str, str]:
    """In an xdist worker: the first calls (``backend/op``) that hung in an earlier worker of this run,
    each with how: those the marker file names (stopped at their limit; the worker went on) and those
    whose worker the watchdog ended (stuck in C: the worker's watch file still has the first-calls
    header and faulthandler's "Timeout (...)!" dump under it; a worker that went on rewrites its file
    for each item)."""
    marker = first_calls_hung_marker(config)
    if marker is None:
        return {}
    found: dict[str, str] = {}
    try:
        for line in marker.read_text(encoding="utf-8").splitlines():
            label, _, how = line.partition("\t")
            if label:
                found[label] = how
    except OSError:
        pass
    for path in sorted(marker.parent.glob("*.txt")):
        try:
            header, _, dump = path.read_text(encoding="utf-8", errors="replace").partition("\n")
        except OSError:
            continue
        fields = header.split(" ", 3)
        if fields[0] == FIRST_CALLS and len(fields) == 4 and dump.startswith("Timeout ("):
            found.setdefault(fields[3], f"still running {fields[2]} s after it started in worker {path.stem} "
                                        f"(its limit: {fields[1]} s), stuck in C code that could not be "
                                        "stopped (holding the GIL, or a native wait): the watchdog ended that worker")
    return found


def first_calls_did_not_finish(config: pytest.Config, hung: dict[str, str]) -> None:
    """Tell the replacement workers of this run (:func:`first_calls_hung_earlier`) which first calls
    did not return within their limit in this worker, and how."""
    marker = first_calls_hung_marker(config)
    if marker is None or not hung:
        return
    try:
        with marker.open("a", encoding="utf-8") as handle:
            handle.write("".join(f"{label}\t{how}\n" for label, how in hung.items()))
    except OSError:
        pass


class FirstCallsWatchdog:
    """faulthandler's watchdog over the first calls (conformance.run.items.first_calls_made), as
    :class:`~conformance.run.timeouts.WorkerWatchdog` is over an item: a first call stuck in C (holding
    the GIL, or a native wait) cannot be stopped at its limit (conformance.run.items.Deadline), so at
    the limit plus :func:`~conformance.run.native_hangs.native_timeout_grace` the watchdog ends the
    process. In an
    xdist worker it writes to the worker's watch file, under a ``first-calls <limit> <after>
    <backend>/<op>`` header, which tells the replacement worker (:func:`first_calls_hung_earlier`) not
    to make that call again nor run its items; in a run in one process, to the terminal's stderr (the
    run ends: exit status 1, every wait bounded)."""

    def __init__(self, handle=None, fd: int | None = None):
        self.handle, self.fd = handle, fd

    def making(self, label: str, seconds: float) -> None:
        if self.handle is None:
            return
        after = seconds + native_timeout_grace(seconds) if seconds else 0.0
        try:
            self.handle.seek(0)
            self.handle.truncate()
            self.handle.write(f"{FIRST_CALLS} {seconds:g} {after:g} {label}\n")
            self.handle.flush()
        except (OSError, ValueError):
            pass

    def arm(self, seconds: float) -> None:
        target = self.handle if self.handle is not None else self.fd
        if target is not None:
            faulthandler.dump_traceback_later(capped(seconds + native_timeout_grace(seconds)), exit=True, file=target)

    def cancel(self) -> None:
        faulthandler.cancel_dump_traceback_later()
        if self.handle is not None:
            try:
                self.handle.seek(0)
                self.handle.truncate()
                self.handle.flush()
            except (OSError, ValueError):
                pass


def first_calls_watchdog(config: pytest.Config) -> FirstCallsWatchdog | None:
    """The watchdog over this process's first calls: the worker's watch file, or the terminal's stderr
    in a run in one process; None outside a run of the suite's."""
    if not is_conformance_run(config):
        return None
    worker = config.pluginmanager.get_plugin("conformance-watchdog")
    if worker is not None:
        return FirstCallsWatchdog(handle=worker.handle)
    return FirstCallsWatchdog(fd=stderr_fd(config))
