"""Per-item timeouts: each conformance item gets ``--conformance-timeout`` through pytest-timeout
(benchmark items x10), and a watchdog ends what is stuck in native code past its timeout, where no
Python-level timeout can act: under pytest-xdist the worker (conformance/run/crashes.py names the
item "timed out in native code" and xdist replaces the worker); in a run in one process (no ``-n``,
``-n 0``) the run itself, after writing the results file with the hung item's ``error`` record
(:class:`PlainWatchdog`), so that no wait is unbounded.

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

from conformance.core.record import ItemRecord
from conformance.results.store import now
from conformance.run import outcomes
from conformance.run.options import BENCHMARK_TIMEOUT_FACTOR
from conformance.run.state import is_conformance_run, is_controller, item_timeout, timeout_user_set

def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = float(config.getoption("conformance_timeout") or 0)
    if seconds > 0 and not timeout_user_set(config):
        for item in items:
            if not hasattr(item, "record") or item.get_closest_marker("timeout") is not None:
                continue
            factor = BENCHMARK_TIMEOUT_FACTOR if item.get_closest_marker("conformance_benchmark") else 1
            factor *= getattr(getattr(item, "backend", None), "timeout_factor", 1.0)
            item.add_marker(pytest.mark.timeout(seconds * factor, func_only=True))  # not in its report



WATCH = pytest.StashKey["WorkerWatch"]()
WATCH_DIR = "conformance_watch_dir"  # workerinput key: the controller's folder for the workers' watchdog files


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
    each with how: those the marker file names (still running at their limit, the GIL released; the
    worker went on) and those whose worker the watchdog ended (held the GIL: the worker's watch file
    still has the first-calls header and faulthandler's "Timeout (...)!" dump under it; a worker that
    went on rewrites its file for each item)."""
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
                                        f"(its limit: {fields[1]} s), in code holding the GIL: the watchdog ended "
                                        "that worker")
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
    :class:`WorkerWatchdog` is over an item: a first call that holds the GIL keeps the thread that
    waits for it from ever seeing its limit pass, so at the limit plus :func:`native_timeout_grace`
    the watchdog ends the process. In an xdist worker it writes to the worker's watch file, under a
    ``first-calls <limit> <after> <backend>/<op>`` header, which tells the replacement worker
    (:func:`first_calls_hung_earlier`) not to make that call again nor run its items; in a run in one
    process, to the terminal's stderr (the run ends: exit status 1, every wait bounded)."""

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
            faulthandler.dump_traceback_later(_later(seconds + native_timeout_grace(seconds)), exit=True, file=target)

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
    return FirstCallsWatchdog(fd=_stderr_fd(config))


# the longest wait a watchdog is armed for: faulthandler refuses a deadline past the platform's time_t
# (between 1e9 and 1e10 seconds from now) and a thread's wait one past threading.TIMEOUT_MAX; an item's
# timeout grows with its examples (generated items), so a huge --conformance-examples could reach them
WATCH_MAX_SECONDS = 1e9


def _later(seconds: float) -> float:
    """``seconds``, at most :data:`WATCH_MAX_SECONDS` (about 31 years: never reached, never an OverflowError)."""
    return min(seconds, WATCH_MAX_SECONDS)


def native_timeout_grace(seconds: float) -> float:
    """How long past an item's timeout the watchdog waits for the Python-level timeout to act (and for
    the failure report it raises to be written, which takes seconds on a loaded machine)."""
    return min(60.0, max(10.0, 0.25 * seconds))


@dataclass
class WorkerEnding:
    """How a worker process ended while running an item."""

    timed_out: bool = False
    timeout: float = 0.0
    after: float = 0.0
    how: str = ""  # "was killed by SIGSEGV (Segmentation fault)", "exited with status 0"
    signal: str | None = None
    where: str = ""  # faulthandler's traceback, trimmed


class WorkerWatch:
    """The controller's side of the watchdog: a folder where each worker's faulthandler writes (the
    item it runs, its traceback on a fatal signal or a native timeout), read when a worker dies."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="conformance-workers-"))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        node.workerinput[WATCH_DIR] = str(self.directory)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def ending(self, node) -> WorkerEnding | None:
        worker = getattr(getattr(node, "gateway", None), "id", None)
        if worker is None:
            return None
        ending = WorkerEnding()
        try:
            text = (self.directory / f"{worker}.txt").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        header, _, dump = text.partition("\n")
        if header.startswith("timeout "):
            ending.timeout, ending.after = (float(x) for x in header.split()[1:3])
        if dump.startswith("Timeout ("):
            ending.timed_out = True
        status = _exit_status(node)
        if status is not None and status < 0:
            try:
                name = signal.Signals(-status).name
                ending.signal, ending.how = name, f"was killed by {name} ({signal.strsignal(-status)})"
            except ValueError:
                ending.how = f"was killed by signal {-status}"
        elif status is not None:
            ending.how = f"exited with status {status} ({'os._exit(0) or exit(0) in C' if status == 0 else 'os._exit, exit() in C, or a --timeout-method=thread timeout'})"
        ending.where = _main_thread_frames(dump)
        return ending


def input_of(identity: ItemRecord) -> str:
    """Which input a crashed or hung item was running, in words."""
    return (f"input: the spec case {identity.get('spec')}::{identity.get('case')}" if identity.get("kind") == "case"
            else "input: the example it was running (re-run the item to see it)")


def timed_out_record(identity: ItemRecord, ending: WorkerEnding, *, replaced: bool) -> ItemRecord:
    """The ``error`` record of an item the watchdog ended (``replaced``: pytest-xdist started another
    worker; False: a run in one process, which the hang ended, :class:`PlainWatchdog`)."""
    what = ("the watchdog killed the worker and pytest-xdist replaced it" if replaced else
            "in a run in one process nothing can take its place, so the watchdog ended the run here: the "
            "items after it were not run (run with -n 1 or more to lose only this item)")
    message = (f"timed out in native code: still running {ending.after:g} s after it started (its timeout: "
               f"{ending.timeout:g} s), in code that no Python-level timeout can interrupt (C code holding the "
               f"GIL, or a native wait); {what}. {input_of(identity)}\n{ending.where}").rstrip()
    return {**identity, "outcome": outcomes.ERROR.value, "crashed": True, "message": message, "timed_out": True}


def _main_thread_frames(dump: str, limit: int = 30) -> str:
    """Of faulthandler's dump (one block per thread), the block of the thread that ran the item."""
    blocks, current = [], []
    for line in dump.splitlines():
        if line.startswith(("Thread 0x", "Current thread 0x")) and current:
            blocks.append(current)
            current = []
        if line.strip():
            current.append(line)
    if current:
        blocks.append(current)
    if not blocks:
        return ""
    head = [blocks[0][0]] if blocks[0] and not blocks[0][0].startswith(("Thread", "Current")) else []
    chosen = next((b for b in blocks if any("runtest" in line for line in b)), blocks[-1])
    return "\n".join(head + [line for line in chosen if line not in head][:limit])


def _exit_status(node) -> int | None:
    """The dead worker's exit status (negative: the signal), when execnet's Popen is reachable."""
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    if popen is None:
        return None
    try:
        return popen.wait(timeout=5)
    except Exception:  # noqa: BLE001 - a detail for the message, never worth failing the run
        return None


class WorkerWatchdog:
    """In a pytest-xdist worker: faulthandler's watchdog, a C thread that needs no GIL, ends the worker
    when an item runs past its timeout plus :func:`native_timeout_grace` -- that is, when the
    Python-level timeout (pytest-timeout's signal method) could not act because the item is stuck in
    native code, with the GIL held or not. It writes the traceback to this worker's file first; the
    controller names the item "timed out in native code" and xdist starts a new worker."""

    def __init__(self, config: pytest.Config, directory: str):
        self.handle = open(Path(directory) / f"{config.workerinput['workerid']}.txt", "w+",  # noqa: SIM115
                           encoding="utf-8")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # after pytest's faulthandler plugin, which points it at stderr: fatal signals write here too
        faulthandler.enable(file=self.handle, all_threads=True)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        seconds = item_timeout(item)
        self.handle.seek(0)
        self.handle.truncate()
        after = seconds + native_timeout_grace(seconds) if seconds else 0.0
        self.handle.write(f"timeout {seconds:g} {after:g} {item.nodeid}\n")
        self.handle.flush()
        if seconds:
            faulthandler.dump_traceback_later(_later(after), exit=True, file=self.handle)
        try:
            return (yield)
        finally:
            faulthandler.cancel_dump_traceback_later()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        faulthandler.cancel_dump_traceback_later()
        self.handle.close()


HUNG_EXIT_STATUS = int(pytest.ExitCode.INTERRUPTED)  # a run in one process that a hung item ended


def _stderr_fd(config: pytest.Config) -> int:
    """The terminal's stderr, past pytest's capture: the copy pytest's faulthandler plugin keeps (made
    in its pytest_configure, after the suite's)."""
    try:
        from _pytest.faulthandler import fault_handler_stderr_fd_key

        return config.stash[fault_handler_stderr_fd_key]
    except (ImportError, KeyError):
        return sys.__stderr__.fileno() if sys.__stderr__ is not None else 2


# The plain run's second watcher, a process of its own (stdlib only, started once per run with a
# results file): the run tells it, on its stdin, each item it starts ("arm" + the record to write
# should the run die in it) and ends ("disarm"). When its stdin closes -- the run's process ended,
# however -- while an item is armed, it adds that item's record to the results file (status
# interrupted), which is what no thread of the run itself could do: faulthandler's watchdog ended a
# hang holding the GIL, or the item crashed the process. It writes a few milliseconds after the run's
# process ended; conformance check waits for it (the run's process group).
SIDECAR = r"""
import json, os, signal, sys, tempfile, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is the run's to handle
armed, done, expected = None, {}, None
for line in sys.stdin:
    kind, _, rest = line.rstrip("\n").partition(" ")
    if kind == "arm":
        armed = (time.monotonic(), rest)
    elif kind == "disarm":
        armed = None
    elif kind == "done":
        record = json.loads(rest)
        done[record["nodeid"]] = record
    elif kind == "expect":
        expected = json.loads(rest)
if armed is None:
    sys.exit(0)
since, payload = armed
elapsed = time.monotonic() - since
payload = json.loads(payload)
record = payload["record"]
if elapsed >= payload["hung_after"]:
    record["message"], record["timed_out"] = payload["hung"], True
path = sys.argv[1]
try:
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
except (OSError, ValueError):
    sys.exit(0)
run = document.get("run") or {}
records = document.setdefault("records", [])
if run.get("status") == "complete" or any(r.get("nodeid") == record["nodeid"] for r in records):
    sys.exit(0)
written = {r.get("nodeid") for r in records}
records.extend(r for key, r in done.items() if key not in written)  # those since its last write
records.append(record)
run["status"] = "interrupted"
if expected is not None:
    run["records_expected"] = len(expected)
    keys = {r.get("nodeid") for r in records}
    run["not_run"] = sorted(key for key in expected if key not in keys)
else:
    run["not_run"] = [key for key in run.get("not_run") or [] if key != record["nodeid"]]
run["finished"] = run["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=os.path.dirname(path))
try:
    os.chmod(tmp, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(document, indent=1) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
except OSError:
    try:
        os.unlink(tmp)
    except OSError:
        pass
"""


class Sidecar:
    """The run's side of :data:`SIDECAR`."""

    def __init__(self, results: Path):
        import subprocess

        # in the run's process group: conformance check waits for the group to end before it reads the file
        self.process = subprocess.Popen([sys.executable, "-I", "-c", SIDECAR, str(results)], stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def tell(self, line: str) -> None:
        if self.process.stdin is None:
            return
        try:
            self.process.stdin.write(line.encode("utf-8", "replace") + b"\n")
            self.process.stdin.flush()
        except OSError:  # it is gone: the thread and faulthandler still end a hang
            self.process.stdin = None

    def close(self) -> None:
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


class PlainWatchdog:
    """In a run in one process (no pytest-xdist workers): an item stuck in native code cannot cost
    that item only -- nothing can take the process's place -- so the run ends, in two stages, each
    armed per item with its timeout:

    1. at the timeout plus :func:`native_timeout_grace`, a Python thread: if the item still runs (the
       Python-level timeout could not act), it adds the item's ``error`` record ("timed out in native
       code", with the item's stack), writes the results file (status ``interrupted``, the items
       after it ``not_run``), says so on stderr and ends the process with exit status 2. It can run
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
        from conformance.run.results_writer import RESULTS

        state = self.config.stash.get(RESULTS, None)
        if state is not None:
            try:
                self.sidecar = Sidecar(state.path)
            except OSError:
                self.sidecar = None

    @pytest.hookimpl(trylast=True)  # after transfer's, which keeps the collection
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from conformance.run.transfer import collected

        if self.sidecar is not None:
            import json

            self.sidecar.tell("expect " + json.dumps(sorted(collected(self.config).keys())))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report) -> None:
        """Each record the results file has (or will have at its next write), for the sidecar."""
        from conformance.run.results_writer import RESULTS
        from conformance.run.transfer import record_key

        record = outcomes.record_of(report)
        state = self.config.stash.get(RESULTS, None)
        if self.sidecar is None or record is None or state is None or state.writer is None:
            return
        kept = state.writer.records.get(record_key(report.nodeid, record))
        if kept is not None:
            import json

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
        faulthandler.dump_traceback_later(_later(seconds + 2 * grace), exit=True, file=_stderr_fd(self.config))
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
        import json

        from conformance.results.store import to_jsonable
        from conformance.run.state import relative_spec
        from conformance.run.transfer import record_key

        identity: ItemRecord = dict(item.record)
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
                    self.changed.wait(_later(left))
                    continue
                break
        self._end_the_run(item, seconds, after)

    def _end_the_run(self, item: pytest.Item, seconds: float, after: float) -> None:
        """The item hung: its record into the results file, a line on stderr, the process ended."""
        from conformance.run.results_writer import RESULTS
        from conformance.run.state import relative_spec
        from conformance.run.transfer import record_key

        frame = sys._current_frames().get(self.main)
        where = "".join(traceback.format_stack(frame)[-12:]).rstrip() if frame is not None else ""
        ending = WorkerEnding(timed_out=True, timeout=seconds, after=after, where=where)
        record = timed_out_record(dict(item.record), ending, replaced=False)
        line = f"\nconformance: {item.nodeid} {record['message'].splitlines()[0]}\n"
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
            os.write(_stderr_fd(self.config), line.encode("utf-8", "replace"))
        except OSError:
            pass
        os._exit(HUNG_EXIT_STATUS)


def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    if not is_conformance_run(config):
        return  # someone's own tests under xdist: pytest-timeout's and xdist's rules, not a watchdog of ours
    if is_controller(config) and not getattr(config.option, "numprocesses", None) \
            and not config.getoption("collectonly") and not config.pluginmanager.has_plugin("conformance-plain-watchdog"):
        config.pluginmanager.register(PlainWatchdog(config), "conformance-plain-watchdog")
    if is_controller(config) and getattr(config.option, "numprocesses", None) and WATCH not in config.stash:
        config.stash[WATCH] = WorkerWatch()
        config.pluginmanager.register(config.stash[WATCH], "conformance-worker-watch")
    directory = getattr(config, "workerinput", {}).get(WATCH_DIR)
    if directory and not config.pluginmanager.has_plugin("conformance-watchdog"):
        config.pluginmanager.register(WorkerWatchdog(config, directory), "conformance-watchdog")
