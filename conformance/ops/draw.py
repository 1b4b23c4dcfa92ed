"""Hypothesis building blocks the op records draw their inputs from (``Op.strategies``):
floats representable in a dtype, shapes, uncoalesced COO tensors, masks,
hyperparameter ranges and gradient trajectories. Every float drawn is already representable in
the requested dtype, so ``quantize`` is the identity on it and the NumPy reference sees exactly
what a backend sees. Simple values come first in every ``one_of`` so that shrinking ends on
readable examples. The public entry point is :mod:`conformance.cases.strategies`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache, partial
from types import MappingProxyType
from typing import Sequence

import numpy as np
from hypothesis import strategies as st

from conformance.core.dtypes import DTYPES, FLOAT_DTYPES
from conformance.core.tensors import CooArray


@dataclass(frozen=True)
class Magnitudes:
    """The binary exponents values are drawn from: |x| in [2**low, 2**(high + 1))."""

    low: int
    high: int


# "physically sensible" ranges. float16 stays far from overflow even after duplicates are
# summed (8 * 2**5 = 256) and squared (65536 would overflow; 2**4 * 4 duplicates = 64 -> 4096).
VALUE_MAGNITUDES = MappingProxyType({
    "float16": Magnitudes(-8, 5),
    "bfloat16": Magnitudes(-12, 12),
    "float32": Magnitudes(-20, 20),
    "float64": Magnitudes(-30, 30),
})
GRADIENT_MAGNITUDES = MappingProxyType({
    "float16": Magnitudes(-6, 3),
    "bfloat16": Magnitudes(-10, 8),
    "float32": Magnitudes(-12, 10),
    "float64": Magnitudes(-12, 10),
})
PARAM_MAGNITUDES = MappingProxyType({
    "float16": Magnitudes(-6, 5),
    "bfloat16": Magnitudes(-10, 8),
    "float32": Magnitudes(-12, 10),
    "float64": Magnitudes(-12, 10),
})

SIMPLE_VALUES = (1.0, 2.0, -1.0, 0.5, 3.0, -2.0, 0.0)


def check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {FLOAT_DTYPES}")


# Strategies are built once per argument set (lru_cache) and map/filter with named functions:
# Hypothesis labels a lambda by parsing its source, which costs more than drawing the example.

def _float_from_parts(bits: int, parts: tuple[float, int, int]) -> float:
    sign, exponent, mantissa = parts
    return sign * math.ldexp(1.0 + mantissa / 2**bits, exponent)


@lru_cache(maxsize=None)
def representable_floats(dtype: str, magnitudes: Magnitudes | None = None, *, zero: bool = True,
                         negative: bool = True) -> st.SearchStrategy[float]:
    """Finite floats exactly representable in ``dtype``: a few simple values, then
    ``±(1 + k / 2**mantissa_bits) * 2**e`` with e across ``magnitudes`` (shrinks to powers of 2)."""
    check_dtype(dtype)
    magnitudes = magnitudes or VALUE_MAGNITUDES[dtype]
    low, high = magnitudes.low, magnitudes.high
    emin, emax = DTYPES[dtype].normal_exponents
    low, high = max(low, emin), min(high, emax - 1)
    bits = DTYPES[dtype].mantissa_bits
    simple = [v for v in SIMPLE_VALUES if (zero or v != 0.0) and (negative or v >= 0.0)]
    general = st.tuples(st.sampled_from([1.0, -1.0] if negative else [1.0]),
                        st.integers(low, high), st.integers(0, 2**bits - 1)).map(partial(_float_from_parts, bits))
    return st.one_of(st.sampled_from(simple), general)


def _small_enough(max_numel: int, shape: tuple[int, ...]) -> bool:
    return math.prod(shape) <= max_numel


@lru_cache(maxsize=None)
def shapes(min_dims: int = 1, max_dims: int = 4, min_side: int = 1, max_side: int = 4,
           max_numel: int = 64) -> st.SearchStrategy[tuple[int, ...]]:
    """Tensor shapes with ``min_dims..max_dims`` dims of ``min_side..max_side`` entries."""
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple).filter(
        partial(_small_enough, max_numel))


@lru_cache(maxsize=None)
def fixed_lists(elements: st.SearchStrategy, count: int) -> st.SearchStrategy[list]:
    return st.lists(elements, min_size=count, max_size=count)


def dense_values(draw, shape: tuple[int, ...], values: st.SearchStrategy[float]) -> np.ndarray:
    count = math.prod(shape)
    return np.array(draw(fixed_lists(values, count)), dtype=np.float64).reshape(shape)


@st.composite
def coo_arrays(draw, dtype: str = "float64", *, size: Sequence[int] | None = None, sparse_dim: int | None = None,
               min_dims: int = 1, max_dims: int = 4, max_side: int = 4, zero_sized: bool = True,
               max_entries: int = 8, values: st.SearchStrategy[float] | None = None) -> CooArray:
    """An uncoalesced sparse COO tensor as written in a spec, values representable in ``dtype``.

    Entries are drawn as a list of *kinds*: a plain value, an explicit zero, a repeat of an index
    already used (a duplicate), or a pair ``v, -v`` at one index (duplicates that cancel to an
    explicit zero); the entries are then put in a drawn order (unsorted indices). Small sides
    make colliding indices -- more duplicates -- common. ``size``/``sparse_dim`` fix the layout
    (as for an optimizer's gradient); otherwise 1-4 dims, hybrid or not, size-0 dims allowed, and in
    about one draw in four no sparse dim (a 0-d sparse scalar, or sparse_dim 0 with 1-2 dense dims).
    """
    check_dtype(dtype)
    values = values if values is not None else representable_floats(dtype)
    if size is None and sparse_dim is None and draw(_NO_SPARSE_DIM) == 3:
        # about one draw in four: no sparse dim at all -- a 0-d sparse scalar or an all-dense hybrid
        # (sparse_dim 0, dense_dim 1-2), every entry at the one empty index. Drawn last in the
        # integer's range, so that shrinking leaves it unless the failure needs it
        size, sparse_dim = draw(shapes(0, 2, 0 if zero_sized else 1, max_side)), 0
    if size is None:
        size = draw(shapes(min_dims, max_dims, 0 if zero_sized else 1, max_side))
    size = tuple(int(s) for s in size)
    if sparse_dim is None:
        sparse_dim = draw(st.integers(1, len(size)))
    sparse_shape, dense_shape = size[:sparse_dim], size[sparse_dim:]
    can_index = math.prod(sparse_shape) > 0
    indices: list[tuple[int, ...]] = []
    rows: list[np.ndarray] = []
    count = draw(st.integers(0, max_entries)) if can_index else 0
    for _ in range(count):
        kind = draw(_ENTRY_KINDS if indices else _FIRST_ENTRY_KINDS)
        if kind == "repeat":
            index = draw(st.sampled_from(indices))
        else:
            index = tuple(draw(st.integers(0, side - 1)) for side in sparse_shape)
        if kind == "zero":
            value = np.zeros(dense_shape)
        else:
            value = dense_values(draw, dense_shape, values)
        indices.append(index)
        rows.append(value)
        if kind == "cancel":
            indices.append(index)
            rows.append(-value)
        if len(indices) >= max_entries:
            break
    order = draw(st.permutations(range(len(indices)))) if len(indices) > 1 else list(range(len(indices)))
    index_array = np.array([indices[i] for i in order], dtype=np.int64).reshape(len(indices), sparse_dim).T
    value_array = (np.stack([rows[i] for i in order]) if rows
                   else np.zeros((0, *dense_shape), dtype=np.float64))
    return CooArray(np.ascontiguousarray(index_array), value_array.astype(np.float64), size)


_ENTRY_KINDS = st.sampled_from(["value", "repeat", "cancel", "zero"])
_NO_SPARSE_DIM = st.integers(0, 3)
_FIRST_ENTRY_KINDS = st.sampled_from(["value", "cancel", "zero"])
_SPECIAL_VALUES = st.sampled_from([math.nan, math.inf, -math.inf])
_MASK_KINDS = st.sampled_from(["any", "all-true", "all-false"])
_STEP_KINDS = st.sampled_from(["sparse", "empty"])
_STEP_KINDS_WITH_DENSE = st.sampled_from(["sparse", "empty", "dense"])


def special_values() -> st.SearchStrategy[float]:
    return _SPECIAL_VALUES


@st.composite
def masks(draw, shape: Sequence[int]) -> np.ndarray:
    """Boolean masks of ``shape``: all true, all false, or any pattern."""
    shape = tuple(shape)
    kind = draw(_MASK_KINDS)
    if kind == "all-true":
        return np.ones(shape, dtype=bool)
    if kind == "all-false":
        return np.zeros(shape, dtype=bool)
    count = math.prod(shape)
    return np.array(draw(fixed_lists(st.booleans(), count)), dtype=bool).reshape(shape)


# ---------------------------------------------------------------- optimizer hyperparameters

def _power_of_ten(exponent: float) -> float:
    return float(f"{10 ** exponent:.3g}")


@lru_cache(maxsize=None)
def positive(simple: tuple[float, ...], low: float, high: float) -> st.SearchStrategy[float]:
    """Simple values first, then log-uniform-ish floats in [low, high] (3 significant digits)."""
    return st.one_of(st.sampled_from(list(simple)), st.floats(math.log10(low), math.log10(high)).map(_power_of_ten))


EPS_VALUES = (1e-10, 1e-8, 1e-6, 1e-3, 0.1, 0.5, 1.0, 10.0)


def learning_rates() -> st.SearchStrategy[float]:
    """lr over ten orders of magnitude: torch documents no bound but lr >= 0."""
    return positive((1.0, 0.1, 0.5, 0.01, 2.0, 1e-6, 100.0), 1e-6, 1e4)


@lru_cache(maxsize=None)
def eps_values(zero: bool = False) -> st.SearchStrategy[float]:
    """eps from tiny to >= 0.1 (where adding it inside or outside a square root differs)."""
    simple = list(EPS_VALUES) + ([0.0] if zero else [])
    return st.one_of(st.sampled_from(simple), positive((1.0,), 1e-12, 10.0))


def _three_digits(value: float) -> float:
    return round(value, 3)


@lru_cache(maxsize=None)
def betas() -> st.SearchStrategy[tuple[float, float]]:
    """Each beta in [0, 1) (torch's documented range), up to 1 - 1e-6: at beta2 = 0.9999 a ``1 - beta2``
    computed in float32 is off by 8e-5 of itself (0.9999 is not a float32)."""
    beta = st.one_of(st.sampled_from([0.9, 0.999, 0.0, 0.5, 0.99, 0.9999, 0.99999, 0.999999]),
                     st.floats(0.0, 0.999).map(_three_digits))
    return st.tuples(beta, beta)


# ---------------------------------------------------------------- trajectories

@st.composite
def trajectories(draw, dtype: str, size: Sequence[int], sparse_dim: int, *, min_steps: int = 1,
                 max_steps: int = 4, max_entries: int = 6, dense_steps: bool = False) -> list:
    """One gradient per step for a parameter of ``size``: sparse COO gradients with the same
    sparse_dim (hybrid when it is below the number of dims) that hit different rows, hit a row
    again in a later step, are empty (nnz = 0), or -- with ``dense_steps`` -- are dense."""
    steps = draw(st.integers(min_steps, max_steps))
    grads: list = []
    values = representable_floats(dtype, GRADIENT_MAGNITUDES[dtype])
    for _ in range(steps):
        kind = draw(_STEP_KINDS_WITH_DENSE if dense_steps else _STEP_KINDS)
        if kind == "empty":
            dense_shape = tuple(size[sparse_dim:])
            grads.append(CooArray(np.zeros((sparse_dim, 0), dtype=np.int64),
                                  np.zeros((0, *dense_shape)), tuple(size)))
        elif kind == "dense":
            grads.append(dense_values(draw, tuple(size), values))
        else:
            grads.append(draw(coo_arrays(dtype, size=size, sparse_dim=sparse_dim, max_entries=max_entries,
                                         values=values)))
    return grads


# ---------------------------------------------------------------- inputs that expose rounding
# For the float16/bfloat16 "rounds-correctly" properties (conformance/core/rounding.py): sums whose
# exact value is far from what truncation, double rounding or a half-precision accumulator give.

ROUNDING_VALUES = Magnitudes(-6, 3)  # |v| in [2**-6, 16): 64 duplicates stay below 1024
ROUNDING_LARGE = Magnitudes(6, 9)    # the large half of a cancelling pair

