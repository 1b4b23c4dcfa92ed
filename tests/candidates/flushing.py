"""A coalesce that turns on flush-to-zero, as loading a library built with -ffast-math does to the
process (torch 2.5's compiled C++), and notes whether each call found it on (tests/test_float_env.py)."""

import torch

from conformance.core.float_env import denormals_flushed

SEEN: list[bool] = []


def coalesce(tensor):
    SEEN.append(denormals_flushed())
    torch.set_flush_denormal(True)
    return tensor.coalesce()
