"""The native-hang watchdog of a run in one process (no ``-n``, ``-n 0``): an item stuck in native code
past its timeout ends the run, after the results file gets the hung item's ``error`` record
(:class:`PlainWatchdog`), so that no wait is unbounded; the run's sidecar process
(:mod:`conformance.run.sidecar`, started by :class:`Sidecar`) writes that record when nothing of the
run could: a hang holding the GIL, or a crash.
"""

from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import pytest

from conformance.core import forks
from conformance.core.record import ItemRecord
from conformance.results.store import now, to_jsonable
from conformance.run import outcomes, sidecar
from conformance.run.native_hangs import (WorkerEnding, capped, input_of, native_timeout_grace, stderr_fd,
                                          timed_out_record)
from conformance.run.results_writer import RESULTS
from conformance.run.state import item_timeout, relative_spec
from conformance.run.transfer import collected, record_key

HUNG_EXIT_STATUS = int(pytest.ExitCode.INTERRUPTED)  # a run in one process that a hung item ended


class Sidecar:
    """The run's side of its sidecar process (:mod:`conformance.run.sidecar`): starts it, tells it each
    command, and closes its stdin at the run's end."""

    def __init__(self, results: Path):
        # in the run's process group: conformance check waits for the group to end before it reads the file
        self.process = subprocess.Popen([sys.executable, "-I", sidecar.__file__, str(results)],
                                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        assert self.process.stdin is not None  # (stdin=PIPE)
        self.fd = self.process.stdin.fileno()
        forks.not_held_by_copies(self.fd)  # a forked copy left running would keep it from seeing the run end

    def tell(self, line: str) -> None:
        if self.process.stdin is None:
            return
        try:
            self.process.stdin.write(line.encode("utf-8", "replace") + b"\n")
            self.process.stdin.flush()
        except OSError:  # it is gone: the thread and faulthandler still end a hang
            self.process.stdin = None

    def close(self) -> None:
        forks.not_held_by_copies(self.fd, closed=True)
        if self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
            self.process.stdin = None
        try:
            self.process.wait(timeout=10)
        except Exception:  # noqa: BLE001 - never keep the run waiting on it
            self.process.kill()


def _record_of(item: pytest.Item) -> ItemRecord:
    """The record of an item the watchdog arms for (only one that has a record: a conformance item)."""
    return getattr(item, "record")


class PlainWatchdog:
    """In a run in one process (no pytest-xdist workers): an item stuck in native code cannot cost
    that item only -- nothing can take the process's place -- so the run ends, in two stages, each
    armed per item with its timeout:

    1. at the timeout plus :func:`~conformance.run.native_hangs.native_timeout_grace`, a Python
       thread: if the item still runs (the Python-level timeout could not act), it adds the item's
       ``error`` record ("timed out in native code", with the item's stack), writes the results file
       (status ``interrupted``, the items after it ``not_run``), says so on stderr and ends the
       process with exit status 2. It can run
       whenever the hung code released the GIL (a native wait or deadlock, a blocking call);
    2. at twice the grace, faulthandler's watchdog (a C thread that needs no GIL): C code holding the
       GIL kept even the thread out, so it prints every thread's traceback on stderr and ends the
       process; the run's :class:`Sidecar` process then adds the item's record (``timed_out``) to the
       results file. It does the same for an item that crashes the process (a segfault, ``os._exit``).
    """

    def __init__(self, config: pytest.Config):
        self.config = config
        self.changed = threading.Condition()
        self.current: tuple[pytest.Item, float, float, float] | None = None  # item, started, timeout, after
        self.closed = False
        self.main = threading.main_thread().ident
        self.sidecar: Sidecar | None = None
        self.thread = threading.Thread(target=self._watch, name="conformance-hang-watchdog", daemon=True)
        self.thread.start()

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        state = self.config.stash.get(RESULTS, None)
        if state is not None:
            try:
                self.sidecar = Sidecar(state.path)
            except OSError:
                self.sidecar = None

    @pytest.hookimpl(trylast=True)  # after transfer's, which keeps the collection
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.sidecar is not None:
            self.sidecar.tell("expect " + json.dumps(sorted(collected(self.config).keys())))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report) -> None:
        """Each record the results file has (or will have at its next write), for the sidecar."""
        record = outcomes.record_of(report)
        state = self.config.stash.get(RESULTS, None)
        if self.sidecar is None or record is None or state is None or state.writer is None:
            return
        kept = state.writer.records.get(record_key(report.nodeid, record))
        if kept is not None:
            self.sidecar.tell("done " + json.dumps(kept))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        record = getattr(item, "record", None)
        seconds = item_timeout(item) if isinstance(record, dict) else 0.0
        if self.sidecar is not None and isinstance(record, dict):
            self.sidecar.tell("arm " + self._if_the_run_dies(item, seconds))
        if not seconds:
            try:
                return (yield)
            finally:
                if self.sidecar is not None and isinstance(record, dict):
                    self.sidecar.tell("disarm")
        grace = native_timeout_grace(seconds)
        with self.changed:
            self.current = (item, time.monotonic(), seconds, seconds + grace)
            self.changed.notify_all()
        faulthandler.dump_traceback_later(capped(seconds + 2 * grace), exit=True, file=stderr_fd(self.config))
        try:
            return (yield)
        finally:
            faulthandler.cancel_dump_traceback_later()
            with self.changed:
                self.current = None
                self.changed.notify_all()
            if self.sidecar is not None:
                self.sidecar.tell("disarm")

    def _if_the_run_dies(self, item: pytest.Item, seconds: float) -> str:
        """What the sidecar writes should the process end in ``item``: a crash's record, or, past
        faulthandler's deadline, a native hang's."""
        identity: ItemRecord = _record_of(item).copy()
        where = ("in a run in one process nothing can take its place, so the run ended here: the items after it "
                 "were not run (run with -n 1 or more to lose only this item)")
        crashed: ItemRecord = {**identity, "outcome": outcomes.ERROR.value, "crashed": True,
                               "message": f"the process ended while running this item: it crashed (a signal, "
                                          f"os._exit: see stderr) or was killed; {where}. {input_of(identity)}"}
        record = to_jsonable({"nodeid": record_key(item.nodeid, identity), **relative_spec(crashed, self.config)})
        after = seconds + 2 * native_timeout_grace(seconds) if seconds else float("inf")
        hung = (f"timed out in native code: still running {after:g} s after it started (its timeout: {seconds:g} "
                "s), in C code holding the GIL, which no Python-level timeout or thread can interrupt; "
                f"faulthandler's watchdog ended the process (its traceback is on stderr); {where}. "
                f"{input_of(identity)}")
        return json.dumps({"record": record, "hung": hung, "hung_after": after - 1 if seconds else 1e18})

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        faulthandler.cancel_dump_traceback_later()
        with self.changed:
            self.closed = True
            self.changed.notify_all()
        if self.sidecar is not None:
            self.sidecar.close()
            self.sidecar = None

    def _watch(self) -> None:
        with self.changed:
            while True:
                if self.closed:
                    return
                if self.current is None:
                    self.changed.wait()
                    continue
                item, started, seconds, after = self.current
                left = started + after - time.monotonic()
                if left > 0:
                    self.changed.wait(capped(left))
                    continue
                break
        self._end_the_run(item, seconds, after)

    def _end_the_run(self, item: pytest.Item, seconds: float, after: float) -> None:
        """The item hung: its record into the results file, a line on stderr, the process ended."""
        frame = sys._current_frames().get(self.main) if self.main is not None else None
        where = "".join(traceback.format_stack(frame)[-12:]).rstrip() if frame is not None else ""
        ending = WorkerEnding(timed_out=True, timeout=seconds, after=after, where=where)
        record = timed_out_record(_record_of(item).copy(), ending, replaced=False)
        line = f"\nconformance: {item.nodeid} {str(record['message']).splitlines()[0]}\n"
        state = self.config.stash.get(RESULTS, None)
        try:
            if state is not None and state.writer is not None:
                state.writer.add(record_key(item.nodeid, record), relative_spec(record, self.config))
                state.writer.run["finished"] = now()
                state.writer.run["exit_status"] = HUNG_EXIT_STATUS
                state.write("interrupted")
                line += f"conformance: results written to {state.path} (status interrupted)\n"
            if self.sidecar is not None:
                self.sidecar.tell("disarm")  # the record is written
        except Exception as exc:  # noqa: BLE001 - the process ends regardless
            line += f"conformance: could not write the results file: {exc}\n"
        try:
            os.write(stderr_fd(self.config), line.encode("utf-8", "replace"))
        except OSError:
            pass
        os._exit(HUNG_EXIT_STATUS)
