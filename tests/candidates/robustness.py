"""Candidates that misbehave in ways other than wrong numbers: slow, hanging, crashing, interrupting.

Each is torch's own Adagrad except on a 3 x 3 parameter (the ``misbehave-here`` case of
``tests/data/robustness_adagrad.yaml``), so a run shows the misbehaving item next to normal ones.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import time
from pathlib import Path

import torch


def _here(optimizer: torch.optim.Optimizer) -> bool:
    return any(tuple(p.shape) == (3, 3) for group in optimizer.param_groups for p in group["params"])


class SlowAdagrad(torch.optim.Adagrad):
    """Correct, and 25 ms slower per step everywhere."""

    def step(self, closure=None):
        time.sleep(0.025)
        return super().step(closure)


class HangingAdagrad(torch.optim.Adagrad):
    def step(self, closure=None):
        if _here(self):
            time.sleep(600)
        return super().step(closure)


class SegfaultingAdagrad(torch.optim.Adagrad):
    """Reads address 0 in C: the interpreter dies with SIGSEGV."""

    def step(self, closure=None):
        if _here(self):
            ctypes.string_at(0)
        return super().step(closure)


class InterruptedAdagrad(torch.optim.Adagrad):
    """Ctrl-C pressed during this item: SIGINT sent to its own process (a KeyboardInterrupt it raised
    itself would be its own error: tests/test_check_robustness.py)."""

    def step(self, closure=None):
        if _here(self):
            signal.raise_signal(signal.SIGINT)
        return super().step(closure)


class PeekingAdagrad(torch.optim.Adagrad):
    """Correct; copies the results file as it is on disk mid-run to $CONFORMANCE_TEST_PEEK."""

    def step(self, closure=None):
        if _here(self):
            results = json.loads(Path(os.environ["CONFORMANCE_TEST_RESULTS"]).read_text())
            Path(os.environ["CONFORMANCE_TEST_PEEK"]).write_text(json.dumps(results))
        return super().step(closure)
