"""Every dtype fact in one table (:data:`DTYPES`): a dtype's spec name and torch dtype, its
mantissa bits and unit roundoff, its normal range, assert_close's default tolerance, how close
to stock torch counts as "the same as torch", and whether it is a half (low-precision) dtype.

Ops, specs, items and strategies name a dtype by its spec name (``"float16"``); every ``Op``
method takes that name. :func:`torch_dtype` gives the torch dtype where a tensor is built, and
:func:`info` the table's entry for a name or a torch dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import torch


@dataclass(frozen=True)
class Tolerance:
    """An ``assert_close`` tolerance."""

    rtol: float
    atol: float

    def scaled(self, factor: float) -> "Tolerance":
        return Tolerance(self.rtol * factor, self.atol * factor)

    def __str__(self) -> str:
        return f"rtol={self.rtol:g}, atol={self.atol:g}"


# torch's half dtypes do their arithmetic in float32 ("opmath") and round once at the end
OPMATH_ROUNDOFF = 2.0**-24


@dataclass(frozen=True)
class DType:
    """One floating dtype and what the suite knows about it."""

    name: str
    torch: torch.dtype
    mantissa_bits: int  # explicit bits
    normal_exponents: tuple[int, int]  # smallest and largest normal binary exponent
    default_tolerance: Tolerance  # torch.testing.assert_close's documented default
    half: bool  # float16/bfloat16: low precision, arithmetic in float32

    @property
    def unit_roundoff(self) -> float:
        """The storage roundoff u (half the machine epsilon)."""
        return 2.0 ** -(self.mantissa_bits + 1)

    @property
    def smallest_normal(self) -> float:
        return 2.0 ** self.normal_exponents[0]

    @property
    def accumulation_roundoff(self) -> float:
        """The roundoff of the arithmetic torch accumulates in (float32 for a half dtype)."""
        return OPMATH_ROUNDOFF if self.half else self.unit_roundoff

    @property
    def agreement_tolerance(self) -> Tolerance:
        """How close to stock torch's result counts as "the same as torch": half an ulp for a half
        dtype (in effect the same bits), a few ulps otherwise (another order of the same arithmetic)."""
        if self.half:
            return Tolerance(rtol=self.unit_roundoff, atol=0.0)
        return Tolerance(rtol=16 * self.unit_roundoff, atol=16 * self.smallest_normal)


DTYPES: Mapping[str, DType] = MappingProxyType({entry.name: entry for entry in (
    DType("float16", torch.float16, 10, (-14, 15), Tolerance(1e-3, 1e-5), half=True),
    DType("bfloat16", torch.bfloat16, 7, (-126, 127), Tolerance(1.6e-2, 1e-5), half=True),
    DType("float32", torch.float32, 23, (-126, 127), Tolerance(1.3e-6, 1e-5), half=False),
    DType("float64", torch.float64, 52, (-1022, 1023), Tolerance(1e-7, 1e-7), half=False),
)})
FLOAT_DTYPES: tuple[str, ...] = tuple(DTYPES)
HALF_DTYPES: tuple[str, ...] = tuple(name for name, entry in DTYPES.items() if entry.half)
_BY_TORCH = MappingProxyType({entry.torch: entry for entry in DTYPES.values()})


def info(dtype: str | torch.dtype) -> DType:
    """The table's entry for a spec name or a torch dtype (ValueError for any other)."""
    entry = _BY_TORCH.get(dtype) if isinstance(dtype, torch.dtype) else DTYPES.get(dtype)
    if entry is None:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}")
    return entry


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype for a spec's dtype name."""
    return info(name).torch


def is_half(dtype: str | torch.dtype) -> bool:
    """float16 or bfloat16 (by name or torch dtype); False for any dtype not in the table."""
    entry = _BY_TORCH.get(dtype) if isinstance(dtype, torch.dtype) else DTYPES.get(dtype)
    return entry is not None and entry.half
