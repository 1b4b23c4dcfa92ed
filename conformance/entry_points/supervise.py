"""check's supervision of the processes it starts: the pytest run in its own process group, SIGINT and
SIGTERM forwarded to it, --run-timeout, what is left of the group killed when the run ends, and the
environment that carries the probe's measure of the candidate's import to the run."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time

KILL_AFTER = 60.0  # seconds a signalled pytest gets to write its results before it is killed


RUN_TIMEOUT = "--run-timeout"  # what ended a run that took longer than --run-timeout


class Interrupted(Exception):
    """SIGINT or SIGTERM reached check before pytest started (its children are already ended)."""


def _kill_group(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        try:
            child.kill()
        except OSError:
            pass


# the environment variable that carries the probe's wall time to the run: conformance.run.plugin's
# CANDIDATE_IMPORT_SECONDS (named, not imported: run/ is the plugin, loaded by pytest only;
# tests/test_hangs.py checks that the two names agree)
CANDIDATE_IMPORT_SECONDS = "CONFORMANCE_CANDIDATE_IMPORT_SECONDS"


def _import_measure(seconds: float | None) -> dict[str, str]:
    """The run's environment that carries the probe's measure of the candidate's import to the
    pytest run and its workers (conformance.run.plugin.first_call_limit)."""
    if not isinstance(seconds, (int, float)) or not seconds > 0:
        return {}
    return {CANDIDATE_IMPORT_SECONDS: f"{seconds:.3f}"}


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    """``values`` in os.environ while the run starts and runs (its processes inherit them), then as before."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _preexec() -> None:  # pragma: no cover - runs in the child
    """The pytest child ends with this process (Linux: SIGTERM when its parent dies)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: nothing to do
        pass


def run_pytest(command: list[str]) -> tuple[int, str | None]:
    """Run pytest in its own process group; SIGINT and SIGTERM sent to this process reach it (it
    writes its results as interrupted), and a child that does not end within KILL_AFTER seconds of
    a signal is killed with its workers; whatever is left of its process group when it ends (a
    stray worker, a process the candidate started) is killed too. Returns (exit status, the signal
    received or None). :func:`_run_within` bounds it in time."""
    child = subprocess.Popen(command, start_new_session=True, preexec_fn=_preexec)
    received: list[str] = []
    since: list[float] = []

    def forward(signum, frame):
        received.append(signal.Signals(signum).name)
        if not since:
            since.append(time.monotonic())
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                status = child.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                pass
            if since and time.monotonic() - since[0] > KILL_AFTER:
                _kill_group(child)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _end_group(child)  # what is left of its group: nothing outlives check
    return status, (received[0] if received else None)


GROUP_GRACE = 5.0  # seconds what is left of pytest's process group gets to end by itself


def _end_group(child: subprocess.Popen, grace: float = GROUP_GRACE) -> None:
    """Wait up to ``grace`` seconds for the rest of the child's process group to end (the run's
    sidecar, which writes a crashed or hung item's record after the run's process died,
    conformance/run/sidecar.py), then kill what is left."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(child.pid, 0)
        except OSError:
            return  # nothing left
        time.sleep(0.05)
    _kill_group(child)


def _run_within(command: list[str], timeout: float) -> tuple[int, str | None]:
    """:func:`run_pytest` with --run-timeout: past ``timeout`` seconds, this process sends itself
    SIGTERM, which run_pytest forwards to the run as any SIGTERM (results written as interrupted;
    killed with its group a minute later). The signal received reads ``"--run-timeout"``."""
    expired, finished = threading.Event(), threading.Event()

    def expire() -> None:
        if not finished.is_set() and signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
            expired.set()
            os.kill(os.getpid(), signal.SIGTERM)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        status, received = run_pytest(command)
    finally:
        finished.set()
        timer.cancel()
    if expired.is_set() and received in ("SIGTERM", None):
        received = RUN_TIMEOUT
    return status, received
