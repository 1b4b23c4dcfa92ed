"""check's probe: the candidate imported in a child process before the run (an import that ends or hangs
the process cannot end check), its devices and its contract checked there
(:mod:`conformance.entry_points.preflight`)."""

from __future__ import annotations

import importlib
import signal
import subprocess
import sys
import time
from typing import Callable

from conformance.core.target import CandidateTarget
from conformance.entry_points.check_args import PROBE_TIMEOUT, UsageError
from conformance.entry_points.check_verdict import USAGE
from conformance.entry_points.supervise import Interrupted, _kill_group, _preexec

PROBE_OK = "conformance-check-probe: ok"


# the child that imports the candidate: the device, then each candidate's kind, contract and constructor
# (conformance.entry_points.preflight); argv: the --device value, then the targets
PROBE = f"""
import sys
from conformance.entry_points.preflight import probe
sys.exit(probe(sys.argv[1], sys.argv[2:], ok={PROBE_OK!r}, usage={USAGE}))
"""


def _probe(targets: list[CandidateTarget], timeout: float = PROBE_TIMEOUT, *,
           meanwhile: Callable[[], object] | None = None, devices: str = "cpu") -> float:
    """Import the candidates in a child process (an import that ends the process, os._exit(0)
    included, cannot end this one) and check the devices and each candidate against its op's
    contract (conformance.entry_points.preflight: its kind, its constructor). An import that takes
    longer than ``timeout`` seconds is a usage error; SIGINT or SIGTERM to check ends the child (and
    whatever it started) before check ends (:class:`Interrupted`). Returns the seconds it took: what
    importing python, torch and the candidate costs on this machine now, from which the run sets the
    candidate's first-call limit (conformance.run.plugin.first_call_limit). ``meanwhile`` runs in
    this process while the child imports (check loads the op records there: torch's import, twice
    at once instead of one after the other)."""
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", PROBE, devices, *map(str, targets)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True, preexec_fn=_preexec)
    received: list[str] = []

    def stop(signum, frame):
        received.append(signal.Signals(signum).name)
        _kill_group(child)

    previous = {}
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, stop)
    except ValueError:  # not the main thread: no handlers, the timeout still holds
        pass
    try:
        if meanwhile is not None:
            meanwhile()
        try:
            stdout, stderr = child.communicate(timeout=max(0.0, timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            _kill_group(child)
            child.communicate()
            raise UsageError(f"importing the candidate did not finish within {timeout:g} s (an import that hangs, "
                             "or waits for input?); its process was ended (--import-timeout SECONDS to wait "
                             "longer)") from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        raise Interrupted(received[0])
    if child.returncode == 0 and PROBE_OK in stdout:
        return time.monotonic() - started
    error = [line for line in stderr.splitlines() if line.startswith("conformance check: ")]
    if error:
        raise UsageError(error[-1].removeprefix("conformance check: "))
    tail = "\n".join((stdout + stderr).strip().splitlines()[-5:])
    raise UsageError(f"importing the candidate ended the process (exit status {child.returncode}) before it was "
                     f"loaded{': ' + tail if tail else ''}")


def _load_the_op_records() -> None:
    """Import the op records (and torch), which :func:`pytest_command` reads."""
    importlib.import_module("conformance.ops")
