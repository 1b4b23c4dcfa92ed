"""The process's floating-point environment. A shared library built with ``-ffast-math`` turns on
flush-to-zero and denormals-are-zero for the whole process when it is loaded: torch 2.5's Inductor C++
on cpu does (its first compiled kernel, and every later item in that process then computes, compares
and draws with subnormals as zero: Hypothesis cannot draw a float at all). The suite turns it off again
after each compiled call and after each item, so one backend's or candidate's setting never reaches
another's items."""

from __future__ import annotations

SMALLEST_SUBNORMAL = float.fromhex("0x1p-1074")


def denormals_flushed() -> bool:
    """Whether this thread's arithmetic treats subnormals as zero (DAZ/FTZ on)."""
    return not SMALLEST_SUBNORMAL > 0


def keep_denormals() -> bool:
    """Turn flushing off again if something turned it on; whether it had been on."""
    if not denormals_flushed():
        return False
    import torch  # lazy: the plugin calls this after every item, torch is imported by then

    torch.set_flush_denormal(False)
    return True

