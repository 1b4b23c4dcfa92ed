"""Half-precision rounding, measured in ulps of the output dtype.

Closeness tolerances cannot tell a correct float16/bfloat16 result from one stored by truncation
or summed in half precision: both are within ``assert_close``'s rtol. What can is the *set of
values a correct implementation may return*: the exact (float64) result, widened by the error of
the float32 arithmetic that legitimately precedes the last rounding, then rounded to nearest
even. Because rounding is monotonic, that set is every dtype value between ``q(low)`` and
``q(high)``. Each op's record gives ``(low, high)`` per output (``Op.rounding_bounds``); an output
outside ``[q(low), q(high)]`` is a rounding bug, reported with its distance in ulps.
"""

from __future__ import annotations

import numpy as np
import torch

from conformance.core.types import Mismatch
from conformance.core.dtypes import info, is_half
from conformance.core.tensors import quantize, to_numpy

def ulp(x, dtype: str | torch.dtype) -> np.ndarray:
    """The spacing of ``dtype`` values at ``x`` (at its binade's lower end; subnormal spacing near 0)."""
    entry = info(dtype)
    tiny, eps = entry.smallest_normal, 2 * entry.unit_roundoff
    x = np.abs(np.asarray(x, dtype=np.float64))
    with np.errstate(divide="ignore"):
        binade = np.exp2(np.floor(np.log2(np.where(x > 0, x, tiny))))
    return np.maximum(binade, tiny) * eps


NEAREST_EVEN = "nearest-even"
TOWARD_ZERO = "toward-zero"


def rounded(x, dtype: str | torch.dtype, mode: str = NEAREST_EVEN) -> np.ndarray:
    """``x`` rounded to ``dtype`` (as float64): to nearest even, or toward zero (truncation)."""
    x = np.asarray(x, dtype=np.float64)
    nearest = quantize(x, dtype)
    if mode == NEAREST_EVEN or not is_half(dtype):
        return nearest
    dtype = info(dtype).torch
    wide = torch.from_numpy(np.ascontiguousarray(x).copy())
    narrow = wide.to(dtype)
    away = narrow.double().abs() > wide.abs()
    bits = narrow.view(torch.int16)
    return torch.where(away, bits - 1, bits).view(dtype).double().numpy().reshape(x.shape)


def check_rounding(name: str, got, exact, low, high, dtype: str | torch.dtype, mode: str = NEAREST_EVEN) -> None:
    """Raise Mismatch (in ulps) where ``got`` lies outside ``[q(low), q(high)]`` (``q``: rounding
    to ``dtype`` in ``mode``; both modes are monotonic, so the interval holds every value they give).

    ``exact`` is the float64 result, for the message; NaN where the result is undefined, and
    then ``got`` must be NaN too.
    """
    got = np.asarray(to_numpy(got), dtype=np.float64)
    exact = np.broadcast_to(np.asarray(exact, dtype=np.float64), got.shape)
    lo = rounded(np.broadcast_to(np.asarray(low, dtype=np.float64), got.shape), dtype, mode)
    hi = rounded(np.broadcast_to(np.asarray(high, dtype=np.float64), got.shape), dtype, mode)
    undefined = np.isnan(exact)
    with np.errstate(invalid="ignore"):
        bad = np.where(undefined, ~np.isnan(got), ~((got >= lo) & (got <= hi)))
    if not bad.any():
        return
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if got.ndim else ()
    g, e, a, b = (float(np.asarray(v)[index]) for v in (got, exact, lo, hi))
    spacing = float(ulp(e, dtype))
    with np.errstate(invalid="ignore"):
        errors = np.abs(got - exact) / ulp(exact, dtype)
    worst = float(np.nanmax(np.where(bad, errors, np.nan))) if np.isfinite(errors[bad]).any() else float("inf")
    raise Mismatch(
        f"{name} is not correctly rounded to {info(dtype).name}: {int(bad.sum())} of {got.size} "
        f"entries outside what round-to-nearest-even of the exact result (plus float32 arithmetic) allows, "
        f"up to {worst:.3g} ulp from the exact value; first at index {index}: got {g!r}, exact {e!r} "
        f"({abs(g - e) / spacing:.3g} ulp away), allowed [{a!r}, {b!r}] (at most "
        f"{max(abs(a - e), abs(b - e)) / spacing:.3g} ulp). Truncation instead of round-to-nearest-even, double "
        f"rounding, or accumulating in a lower precision than float32 look like this.",
        max_abs_error=abs(g - e), max_rel_error=abs(g - e) / abs(e) if e else float("inf"))
