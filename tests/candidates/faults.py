"""Faults around a candidate rather than in its numbers (tests/test_bad_input.py)."""

from __future__ import annotations

import gc
import os
import signal
import time
import warnings
from pathlib import Path

import torch


class SwallowedSigtermAdagrad(torch.optim.Adagrad):
    """torch's Adagrad; on the 3 x 3 parameter (``misbehave-here``) it says so in
    ``$CONFORMANCE_TEST_GATE.waiting``, waits for the file ``$CONFORMANCE_TEST_GATE``, then
    receives SIGTERM inside a gc callback, where the KeyboardInterrupt the run's signal handler
    raises is swallowed ("Exception ignored in ...") -- as it was once inside torch's own gc
    callback."""

    def step(self, closure=None):
        if any(tuple(p.shape) == (3, 3) for group in self.param_groups for p in group["params"]):
            gate = Path(os.environ["CONFORMANCE_TEST_GATE"])
            gate.with_suffix(".waiting").write_text("waiting")
            deadline = time.monotonic() + 240
            while not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.05)

            def callback(phase, info, fired=[]):
                if not fired:
                    fired.append(True)
                    signal.raise_signal(signal.SIGTERM)

            gc.callbacks.append(callback)
            try:
                gc.collect()
            finally:
                gc.callbacks.remove(callback)
        return super().step(closure)


# ---------------------------------------------------------------- faults `conformance check` must survive
# (tests/test_check_robustness.py): each is torch's Adagrad except on the 3 x 3 parameter of the
# ``misbehave-here`` case of tests/data/robustness_adagrad.yaml, unless its docstring says otherwise.

if os.environ.get("CONFORMANCE_TEST_EXIT_AT_IMPORT"):
    os._exit(0)  # the candidate's module ends the process while it is imported


def _here(optimizer: torch.optim.Optimizer) -> bool:
    return any(tuple(p.shape) == (3, 3) for group in optimizer.param_groups for p in group["params"])


def _lock_a_mutex_twice(gil_held: bool) -> None:
    """A deadlock in C: a plain pthread mutex locked twice (the futex wait ignores signals), through
    ``ctypes.PyDLL`` (the GIL kept around the call) or ``ctypes.CDLL`` (the GIL released)."""
    import ctypes

    libc = (ctypes.PyDLL if gil_held else ctypes.CDLL)(None)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER on glibc
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


class NativeDeadlockAdagrad(torch.optim.Adagrad):
    """Deadlocks in C with the GIL released, as a hung fused kernel does: locks a plain pthread
    mutex twice (ctypes releases the GIL around foreign calls; the futex wait ignores signals)."""

    def step(self, closure=None):
        if _here(self):
            _lock_a_mutex_twice(gil_held=False)
        return super().step(closure)


class GilHoldingAdagrad(torch.optim.Adagrad):
    """Hangs in C code that holds the GIL and never checks for signals: locks a plain pthread mutex
    twice through ``ctypes.PyDLL``, which (unlike ``CDLL``) keeps the GIL around the call; the
    futex wait ignores signals. It blocks instead of spinning, so the minutes a test waits for the
    watchdog cost no CPU (tests/test_hangs.py's ``GIL_HELD`` spins, at check's defaults)."""

    def step(self, closure=None):
        if _here(self):
            _lock_a_mutex_twice(gil_held=True)
        return super().step(closure)


class ExitingAdagrad(torch.optim.Adagrad):
    """Ends the process with status 0 (``os._exit(0)``), as a library's fatal path may."""

    def step(self, closure=None):
        if _here(self):
            os._exit(0)
        return super().step(closure)


class AbortingAdagrad(torch.optim.Adagrad):
    """Aborts the process (SIGABRT), as a failed C assertion does."""

    def step(self, closure=None):
        if _here(self):
            os.abort()
        return super().step(closure)


class PytestExitAdagrad(torch.optim.Adagrad):
    """Calls ``pytest.exit(returncode=0)``: the candidate must not end the run with status 0."""

    def step(self, closure=None):
        if _here(self):
            import pytest

            pytest.exit("the candidate asked pytest to stop", returncode=0)
        return super().step(closure)


class KeyboardInterruptAdagrad(torch.optim.Adagrad):
    """Raises ``KeyboardInterrupt`` itself (no signal): that item's error, not the run's end."""

    def step(self, closure=None):
        if _here(self):
            raise KeyboardInterrupt("the candidate's own")
        return super().step(closure)


class StrayThreadAdagrad(torch.optim.Adagrad):
    """Correct, but leaves a non-daemon thread that never ends (a worker pool it never shuts down)."""

    def step(self, closure=None):
        if _here(self):
            import threading

            threading.Thread(target=threading.Event().wait, name="candidate-pool-worker", daemon=False).start()
        return super().step(closure)


class UnsupportedEverywhereAdagrad(torch.optim.Adagrad):
    """Supports nothing: raises ``Unsupported`` on every input (every item)."""

    def __init__(self, params, **kwargs):
        from conformance import Unsupported

        raise Unsupported("this candidate supports no input")


class _HostileStr(Exception):
    def __str__(self):
        raise RuntimeError("__str__ of the candidate's exception raised")


class _NonStringStr(Exception):
    def __str__(self):
        return 42


class HostileStrAdagrad(torch.optim.Adagrad):
    """Raises an exception whose ``__str__`` raises; on ``after`` one whose ``__str__`` returns an int."""

    def step(self, closure=None):
        if _here(self):
            raise _HostileStr()
        if any(tuple(p.shape) == (2, 2) for group in self.param_groups for p in group["params"]):
            raise _NonStringStr()
        return super().step(closure)


class WaitingAdagrad(torch.optim.Adagrad):
    """Says so in ``$CONFORMANCE_TEST_GATE.waiting``, then sleeps (a signal to the run ends it)."""

    def step(self, closure=None):
        if _here(self):
            Path(os.environ["CONFORMANCE_TEST_GATE"]).with_suffix(".waiting").write_text("waiting")
            time.sleep(600)
        return super().step(closure)


class AlwaysHostileStrAdagrad(torch.optim.Adagrad):
    """Every step raises an exception whose ``__str__`` raises (a generated item's failure text)."""

    def step(self, closure=None):
        raise _HostileStr()


class SurrogateMessageAdagrad(torch.optim.Adagrad):
    """Raises a message holding a lone surrogate (a file name read from a Latin-1 folder) and ANSI
    escape sequences, as ``f"cannot open {name}"`` would."""

    def step(self, closure=None):
        if _here(self):
            warnings.warn("cannot open /data/caf\udcff.bin; trying again")
            raise ValueError("cannot open /data/caf\udcff.bin \x1b[2J\x1b]0;owned\x07")
        return super().step(closure)
