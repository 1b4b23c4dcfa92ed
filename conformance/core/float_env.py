"""The process's floating-point environment. A shared library built with ``-ffast-math`` turns on
flush-to-zero and denormals-are-zero for the whole process when it is loaded: torch 2.4's and 2.5's Inductor C++
on cpu does (its first compiled kernel, and every later item in that process then computes, compares
and draws with subnormals as zero: Hypothesis cannot draw a float at all). The suite turns it off again
after each compiled call and after each item, so one backend's or candidate's setting never reaches
another's items."""

from __future__ import annotations

from conformance.core.divergences import STOCK_TORCH, Divergence, register

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


# stock torch's, dated by its reproducer (findings/reproducers/torch-compile-sets-flush-to-zero.py); it applies to
# no item (``properties=()``): the suite keeps denormals itself (above)
FLUSH_TO_ZERO = register(Divergence(
    "torch-compile-sets-flush-to-zero",
    "the first Inductor-compiled call on cpu turns on flush-to-zero and denormals-are-zero for the calling thread "
    "(the library Inductor builds with -ffast-math sets them as it loads): float.fromhex('0x1p-1074') > 0 is then "
    "False, and every later computation of the process treats subnormals as zero; nothing in torch.compile's "
    "documentation says it changes the floating-point environment",
    "https://docs.pytorch.org/docs/stable/generated/torch.compile.html",
    properties=(), behaviour=STOCK_TORCH, torch=">=2.4,<2.6",
))
