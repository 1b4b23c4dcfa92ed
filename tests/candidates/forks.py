"""Coalesces that fork and whose child does not exit, a classic multiprocessing misuse (issue 52, F14):
each child notes its pid in the folder ``$CONFORMANCE_TEST_FORKS``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch


def _note_child() -> None:
    Path(os.environ["CONFORMANCE_TEST_FORKS"], str(os.getpid())).touch()


def coalesce_fork_returns(tensor: torch.Tensor) -> torch.Tensor:
    """The child goes on as the parent does: back into the harness, which would run and report the
    item a second time."""
    if os.fork() == 0:
        _note_child()
    return tensor.coalesce()


def coalesce_fork_hangs(tensor: torch.Tensor) -> torch.Tensor:
    """The child never returns (as one stuck in torch's thread pool, which does not survive a fork)."""
    if os.fork() == 0:
        _note_child()
        while True:
            time.sleep(1)
    return tensor.coalesce()
