"""Faults around a candidate rather than in its numbers (tests/test_bad_input.py)."""

from __future__ import annotations

import gc
import os
import signal
import time
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
