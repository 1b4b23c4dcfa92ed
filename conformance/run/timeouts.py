"""Per-item timeouts: each conformance item gets ``--conformance-timeout`` through pytest-timeout
(benchmark items x10), and a watchdog ends what is stuck in native code past its timeout, where no
Python-level timeout can act: under pytest-xdist the worker (:class:`WorkerWatchdog`, in each
worker; the controller's :class:`WorkerWatch` reads how it ended, conformance/run/crashes.py names
the item "timed out in native code" and xdist replaces the worker); in a run in one process (no
``-n``, ``-n 0``) the run itself, after writing the results file with the hung item's ``error``
record (:mod:`conformance.run.plain_watchdog`, and its sidecar process :mod:`conformance.run.sidecar`),
so that no wait is unbounded. The first calls, made before any item's timer starts, have a watchdog
of their own (:mod:`conformance.run.first_calls_watch`). :func:`configure` registers the watchdogs
a process needs.

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import faulthandler
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

# the first calls' watch, which the plugin uses from here
from conformance.run.first_calls_watch import (first_calls_did_not_finish, first_calls_hung_earlier,  # noqa: F401
                                               first_calls_hung_marker, first_calls_watchdog)
from conformance.run.native_hangs import WATCH_DIR, WorkerEnding, capped, native_timeout_grace
from conformance.run.options import BENCHMARK_TIMEOUT_FACTOR
from conformance.run.state import is_conformance_run, is_controller, item_timeout, timeout_user_set


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = float(config.getoption("conformance_timeout") or 0)
    if seconds > 0 and not timeout_user_set(config):
        for item in items:
            if not hasattr(item, "record") or item.get_closest_marker("timeout") is not None:
                continue
            factor: float = BENCHMARK_TIMEOUT_FACTOR if item.get_closest_marker("conformance_benchmark") else 1
            factor *= getattr(getattr(item, "backend", None), "timeout_factor", 1.0)
            item.add_marker(pytest.mark.timeout(seconds * factor, func_only=True))  # not in its report


WATCH = pytest.StashKey["WorkerWatch"]()


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


def _main_thread_frames(dump: str, limit: int = 30) -> str:
    """Of faulthandler's dump (one block per thread), the block of the thread that ran the item."""
    blocks: list[list[str]] = []
    current: list[str] = []
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
    when an item runs past its timeout plus :func:`~conformance.run.native_hangs.native_timeout_grace`
    -- that is, when the Python-level timeout (pytest-timeout's signal method) could not act because
    the item is stuck in native code, with the GIL held or not. It writes the traceback to this
    worker's file first; the controller names the item "timed out in native code" and xdist starts a
    new worker."""

    def __init__(self, config: pytest.Config, directory: str):
        worker = getattr(config, "workerinput")["workerid"]  # (xdist's attribute of a worker's config)
        self.handle = open(Path(directory) / f"{worker}.txt", "w+",  # noqa: SIM115
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
            faulthandler.dump_traceback_later(capped(after), exit=True, file=self.handle)
        try:
            return (yield)
        finally:
            faulthandler.cancel_dump_traceback_later()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        faulthandler.cancel_dump_traceback_later()
        self.handle.close()


def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    if not is_conformance_run(config):
        return  # someone's own tests under xdist: pytest-timeout's and xdist's rules, not a watchdog of ours
    if is_controller(config) and not getattr(config.option, "numprocesses", None) \
            and not config.getoption("collectonly") and not config.pluginmanager.has_plugin("conformance-plain-watchdog"):
        # here, not at the top: the plain watchdog reads the results writer's state, a level above this
        # module, which the plugin imports (tests/test_layout.py: at most 6 levels)
        from conformance.run.plain_watchdog import PlainWatchdog

        config.pluginmanager.register(PlainWatchdog(config), "conformance-plain-watchdog")
    if is_controller(config) and getattr(config.option, "numprocesses", None) and WATCH not in config.stash:
        config.stash[WATCH] = WorkerWatch()
        config.pluginmanager.register(config.stash[WATCH], "conformance-worker-watch")
    directory = getattr(config, "workerinput", {}).get(WATCH_DIR)
    if directory and not config.pluginmanager.has_plugin("conformance-watchdog"):
        config.pluginmanager.register(WorkerWatchdog(config, directory), "conformance-watchdog")
