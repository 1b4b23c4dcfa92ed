"""Hypothesis strategies for the suite's decoded input types.

Every strategy here draws the objects an op's ``decode_inputs`` returns -- :class:`CooArray`,
:class:`OptimizerInputs`, :class:`MaskedMeanInputs` -- with every float already representable in
the requested dtype (so ``quantize`` is the identity on them and the NumPy reference sees exactly
what a backend sees). They are public: use them in your own properties::

    from hypothesis import given
    from conformance.cases import strategies as cst

    @given(cst.coo_arrays("float32"))
    def test_my_coalesce(coo):
        ...

What they cover on purpose: 1-4 dims, sparse and dense (hybrid) dims, size-0 dims and nnz = 0,
duplicate indices, duplicates that cancel to an explicit zero, explicit zeros, unsorted
indices; float16/bfloat16/float32/float64 values across magnitudes; boolean masks including
all-true, all-false and masks over NaN/inf; optimizer hyperparameters across their valid
ranges (eps from 0 to >= 0.1 so its placement shows) and invalid ones (for the documented
errors); multi-step trajectories whose steps hit different rows, hit a row again later, or are
empty. Simple values come first in every ``one_of`` so that shrinking ends on readable examples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Sequence

import numpy as np
from hypothesis import strategies as st

from conformance.ops.masked_mean import MaskedMeanInputs
from conformance.ops.optimizer_steps import OptimizerInputs, ParamGroupsInputs
from conformance.tensors import CooArray, quantize, torch_dtype

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")

# explicit mantissa bits and the smallest/largest normal exponent of each dtype
MANTISSA_BITS = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}
NORMAL_EXPONENTS = {"float16": (-14, 15), "bfloat16": (-126, 127), "float32": (-126, 127),
                    "float64": (-1022, 1023)}


@dataclass(frozen=True)
class Magnitudes:
    """The binary exponents values are drawn from: |x| in [2**low, 2**(high + 1))."""

    low: int
    high: int


# "physically sensible" ranges. float16 stays far from overflow even after duplicates are
# summed (8 * 2**5 = 256) and squared (65536 would overflow; 2**4 * 4 duplicates = 64 -> 4096).
VALUE_MAGNITUDES = {
    "float16": Magnitudes(-8, 5),
    "bfloat16": Magnitudes(-12, 12),
    "float32": Magnitudes(-20, 20),
    "float64": Magnitudes(-30, 30),
}
GRADIENT_MAGNITUDES = {
    "float16": Magnitudes(-6, 3),
    "bfloat16": Magnitudes(-10, 8),
    "float32": Magnitudes(-12, 10),
    "float64": Magnitudes(-12, 10),
}
PARAM_MAGNITUDES = {
    "float16": Magnitudes(-6, 5),
    "bfloat16": Magnitudes(-10, 8),
    "float32": Magnitudes(-12, 10),
    "float64": Magnitudes(-12, 10),
}

SIMPLE_VALUES = (1.0, 2.0, -1.0, 0.5, 3.0, -2.0, 0.0)


def _check_dtype(dtype: str) -> None:
    if dtype not in MANTISSA_BITS:
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
    _check_dtype(dtype)
    magnitudes = magnitudes or VALUE_MAGNITUDES[dtype]
    low, high = magnitudes.low, magnitudes.high
    emin, emax = NORMAL_EXPONENTS[dtype]
    low, high = max(low, emin), min(high, emax - 1)
    bits = MANTISSA_BITS[dtype]
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
def _fixed_lists(elements: st.SearchStrategy, count: int) -> st.SearchStrategy[list]:
    return st.lists(elements, min_size=count, max_size=count)


def _dense_values(draw, shape: tuple[int, ...], values: st.SearchStrategy[float]) -> np.ndarray:
    count = math.prod(shape)
    return np.array(draw(_fixed_lists(values, count)), dtype=np.float64).reshape(shape)


@st.composite
def coo_arrays(draw, dtype: str = "float64", *, size: Sequence[int] | None = None, sparse_dim: int | None = None,
               min_dims: int = 1, max_dims: int = 4, max_side: int = 4, zero_sized: bool = True,
               max_entries: int = 8, values: st.SearchStrategy[float] | None = None) -> CooArray:
    """An uncoalesced sparse COO tensor as written in a spec, values representable in ``dtype``.

    Entries are drawn as a list of *kinds*: a plain value, an explicit zero, a repeat of an index
    already used (a duplicate), or a pair ``v, -v`` at one index (duplicates that cancel to an
    explicit zero); the entries are then put in a drawn order (unsorted indices). Small sides
    make colliding indices -- more duplicates -- common. ``size``/``sparse_dim`` fix the layout
    (as for an optimizer's gradient); otherwise 1-4 dims, hybrid or not, size-0 dims allowed.
    """
    _check_dtype(dtype)
    values = values if values is not None else representable_floats(dtype)
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
            value = _dense_values(draw, dense_shape, values)
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
    return np.array(draw(_fixed_lists(st.booleans(), count)), dtype=bool).reshape(shape)


@st.composite
def masked_mean_inputs(draw, dtype: str = "float64", *, min_dims: int = 0, max_dims: int = 3,
                       max_side: int = 4) -> MaskedMeanInputs:
    """Values and a mask; NaN/±inf are put under the mask (masked-out) often and at valid
    entries sometimes, so both "ignored" and "propagated" non-finite values occur."""
    _check_dtype(dtype)
    shape = draw(shapes(min_dims, max_dims, 0, max_side))
    mask = draw(masks(shape))
    values = _dense_values(draw, shape, representable_floats(dtype))
    flat_values, flat_mask = values.reshape(-1), mask.reshape(-1)
    if flat_values.size:
        invalid = [i for i in range(flat_values.size) if not flat_mask[i]]
        if invalid and draw(st.booleans()):
            for i in draw(st.lists(st.sampled_from(invalid), min_size=1, max_size=len(invalid), unique=True)):
                flat_values[i] = draw(special_values())
        if draw(st.integers(0, 4)) == 0:  # now and then a NaN or inf the mean must propagate
            flat_values[draw(st.integers(0, flat_values.size - 1))] = draw(special_values())
    return MaskedMeanInputs(flat_values.reshape(shape), mask)


# ---------------------------------------------------------------- optimizer hyperparameters

def _power_of_ten(exponent: float) -> float:
    return float(f"{10 ** exponent:.3g}")


@lru_cache(maxsize=None)
def _positive(simple: tuple[float, ...], low: float, high: float) -> st.SearchStrategy[float]:
    """Simple values first, then log-uniform-ish floats in [low, high] (3 significant digits)."""
    return st.one_of(st.sampled_from(list(simple)), st.floats(math.log10(low), math.log10(high)).map(_power_of_ten))


EPS_VALUES = (1e-10, 1e-8, 1e-6, 1e-3, 0.1, 0.5, 1.0, 10.0)


def learning_rates() -> st.SearchStrategy[float]:
    return _positive((1.0, 0.1, 0.5, 0.01, 2.0), 1e-4, 10.0)


@lru_cache(maxsize=None)
def eps_values(zero: bool = False) -> st.SearchStrategy[float]:
    """eps from tiny to >= 0.1 (where adding it inside or outside a square root differs)."""
    simple = list(EPS_VALUES) + ([0.0] if zero else [])
    return st.one_of(st.sampled_from(simple), _positive((1.0,), 1e-12, 10.0))


_LR_DECAYS = st.one_of(st.just(0.0), st.sampled_from([0.5, 1.0, 0.1]), _positive((0.01,), 1e-3, 2.0))
_INITIAL_ACCUMULATORS = st.one_of(st.just(0.0), st.sampled_from([0.1, 1.0, 0.5]), _positive((0.01,), 1e-4, 4.0))


@st.composite
def adagrad_hyperparameters(draw) -> dict:
    """Valid ``torch.optim.Adagrad`` hyperparameters for sparse gradients (weight_decay = 0)."""
    hyper = {"lr": draw(learning_rates()), "eps": draw(eps_values(zero=True))}
    lr_decay = draw(_LR_DECAYS)
    if lr_decay:
        hyper["lr_decay"] = lr_decay
    initial = draw(_INITIAL_ACCUMULATORS)
    if initial:
        hyper["initial_accumulator_value"] = initial
    if draw(st.booleans()):
        hyper["maximize"] = True
    return hyper


def _three_digits(value: float) -> float:
    return round(value, 3)


@lru_cache(maxsize=None)
def betas() -> st.SearchStrategy[tuple[float, float]]:
    beta = st.one_of(st.sampled_from([0.9, 0.999, 0.0, 0.5, 0.99]), st.floats(0.0, 0.999).map(_three_digits))
    return st.tuples(beta, beta)


@st.composite
def sparse_adam_hyperparameters(draw) -> dict:
    """Valid ``torch.optim.SparseAdam`` hyperparameters."""
    hyper = {"lr": draw(learning_rates()), "eps": draw(eps_values()), "betas": draw(betas())}
    if draw(st.booleans()):
        hyper["maximize"] = True
    return hyper


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
            grads.append(_dense_values(draw, tuple(size), values))
        else:
            grads.append(draw(coo_arrays(dtype, size=size, sparse_dim=sparse_dim, max_entries=max_entries,
                                         values=values)))
    return grads


@st.composite
def optimizer_inputs(draw, op: str, dtype: str = "float64", *, max_steps: int = 4) -> OptimizerInputs:
    """A parameter (1-3 dims), a gradient trajectory and valid hyperparameters for ``op``
    (``adagrad`` or ``sparse_adam``)."""
    _check_dtype(dtype)
    size = draw(shapes(1, 3, 1, 4, max_numel=24))
    sparse_dim = draw(st.integers(1, len(size)))
    param = _dense_values(draw, size, representable_floats(dtype, PARAM_MAGNITUDES[dtype]))
    if op == "adagrad":
        hyper = draw(adagrad_hyperparameters())
        grads = draw(trajectories(dtype, size, sparse_dim, max_steps=max_steps, dense_steps=True))
    elif op == "sparse_adam":
        hyper = draw(sparse_adam_hyperparameters())
        grads = draw(trajectories(dtype, size, sparse_dim, max_steps=max_steps))
    else:
        raise ValueError(f"optimizer_inputs: op must be adagrad or sparse_adam, got {op!r}")
    return OptimizerInputs(param, grads, hyper)


def _padded(inputs: OptimizerInputs, steps: int) -> OptimizerInputs:
    """``inputs`` with empty sparse gradients appended up to ``steps`` steps."""
    size = inputs.param.shape
    empty = CooArray(np.zeros((1, 0), dtype=np.int64), np.zeros((0, *size[1:])), size)
    return OptimizerInputs(inputs.param, [*inputs.grads, *[empty] * (steps - inputs.steps)], inputs.hyperparameters)


@st.composite
def optimizer_param_groups(draw, op: str, dtype: str = "float64", *, min_steps: int = 1) -> ParamGroupsInputs:
    """Two param groups with their own hyperparameters: the first holds one parameter, the second
    a parameter of another shape and one that never gets a gradient (as torch's OptimizerInfo
    tests). The trajectories are padded with empty gradients to the same number of steps."""
    first, second = draw(optimizer_inputs(op, dtype, max_steps=3)), draw(optimizer_inputs(op, dtype, max_steps=3))
    steps = max(min_steps, first.steps, second.steps)
    idle = _dense_values(draw, draw(shapes(1, 2, 1, 3)), representable_floats(dtype, PARAM_MAGNITUDES[dtype]))
    return ParamGroupsInputs([[_padded(first, steps)], [_padded(second, steps), idle]])


@st.composite
def optimizer_resume_points(draw, op: str, dtype: str = "float64") -> tuple[ParamGroupsInputs, int]:
    """Param groups (:func:`optimizer_param_groups`, at least two steps) and the step after which
    the optimizer's state_dict is saved and loaded into a fresh optimizer."""
    inputs = draw(optimizer_param_groups(op, dtype, min_steps=2))
    return inputs, draw(st.integers(1, inputs.steps - 1))


# ---------------------------------------------------------------- documented errors

@st.composite
def invalid_optimizer_inputs(draw, op: str, dtype: str = "float64") -> OptimizerInputs:
    """Inputs with exactly one documented error: an out-of-range hyperparameter (ValueError),
    ``weight_decay`` with a sparse gradient (adagrad) or a dense gradient (sparse_adam)."""
    inputs = draw(optimizer_inputs(op, dtype, max_steps=2))
    hyper = dict(inputs.hyperparameters)
    negative = st.sampled_from([-1.0, -0.5, -1e-3, -10.0])
    if op == "adagrad":
        problem = draw(st.sampled_from(["lr", "eps", "lr_decay", "weight_decay", "initial_accumulator_value",
                                        "sparse-weight-decay"]))
        if problem == "sparse-weight-decay":
            hyper["weight_decay"] = draw(st.sampled_from([0.1, 1.0, 1e-4]))
            grads = list(inputs.grads)
            if not any(isinstance(g, CooArray) for g in grads):
                grads[0] = CooArray(np.zeros((1, 0), dtype=np.int64), np.zeros((0, *inputs.param.shape[1:])),
                                    inputs.param.shape)
            return OptimizerInputs(inputs.param, grads, hyper)
        hyper[problem] = draw(negative)
        return OptimizerInputs(inputs.param, inputs.grads, hyper)
    problem = draw(st.sampled_from(["lr", "eps", "beta1", "beta2", "dense-gradient"]))
    if problem == "dense-gradient":
        grads = list(inputs.grads)
        step = draw(st.integers(0, len(grads) - 1))
        grads[step] = np.zeros(inputs.param.shape) if draw(st.booleans()) else inputs.param.copy()
        return OptimizerInputs(inputs.param, grads, hyper)
    if problem in ("lr", "eps"):
        hyper[problem] = draw(st.one_of(st.just(0.0), negative))
    else:
        beta1, beta2 = hyper["betas"]
        bad = draw(st.sampled_from([1.0, 1.5, -0.1, -1.0]))
        hyper["betas"] = (bad, beta2) if problem == "beta1" else (beta1, bad)
    return OptimizerInputs(inputs.param, inputs.grads, hyper)


# ---------------------------------------------------------------- inputs that expose rounding
# For the float16/bfloat16 "rounds-correctly" properties (conformance/rounding.py): sums whose
# exact value is far from what truncation, double rounding or a half-precision accumulator give.

ROUNDING_VALUES = Magnitudes(-6, 3)  # |v| in [2**-6, 16): 64 duplicates stay below 1024
ROUNDING_LARGE = Magnitudes(6, 9)    # the large half of a cancelling pair


@st.composite
def coalesce_rounding_inputs(draw, dtype: str) -> CooArray:
    """A 1-D COO tensor whose positions hold many equal duplicates, a large value cancelled
    around small ones, a mix, or a single value, in shuffled order."""
    _check_dtype(dtype)
    small = representable_floats(dtype, ROUNDING_VALUES, zero=False)
    size = draw(st.integers(1, 4))
    indices: list[int] = []
    values: list[float] = []
    for position in range(size):
        kind = draw(st.sampled_from(["equal", "cancel", "mixed", "single"]))
        if kind == "equal":
            run = [draw(small)] * draw(st.integers(3, 64))
        elif kind == "cancel":
            large = draw(representable_floats(dtype, ROUNDING_LARGE, zero=False))
            run = [large, *draw(st.lists(small, min_size=1, max_size=6)), -large]
        elif kind == "mixed":
            run = draw(st.lists(small, min_size=2, max_size=24))
        else:
            run = [draw(small)]
        indices += [position] * len(run)
        values += run
    order = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).permutation(len(values))  # cheap to shrink
    return CooArray(np.array([indices], dtype=np.int64)[:, order], np.array(values, dtype=np.float64)[order],
                    (size,))


@st.composite
def masked_mean_rounding_inputs(draw, dtype: str) -> MaskedMeanInputs:
    """Long masked sums (up to 2048 entries): equal values, or values of mixed sign and size,
    drawn from a seeded generator so that long inputs stay cheap to draw."""
    _check_dtype(dtype)
    length = draw(st.sampled_from([2, 3, 7, 64, 300, 1000, 2048]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        values = np.full(length, draw(representable_floats(dtype, ROUNDING_VALUES, zero=False)))
    else:
        values = rng.uniform(-8.0, 8.0, length)
    mask = rng.random(length) < draw(st.sampled_from([0.3, 0.9, 1.0]))
    mask[draw(st.integers(0, length - 1))] = True  # at least one valid entry
    return MaskedMeanInputs(quantize(values, torch_dtype(dtype)), mask)


@st.composite
def optimizer_rounding_inputs(draw, op: str, dtype: str) -> OptimizerInputs:
    """One sparse step without duplicate indices on a parameter of magnitude 1..8, with a learning
    rate that moves it by 0.05 to 20 ulps: there rounding, not arithmetic, decides the result."""
    _check_dtype(dtype)
    length = draw(st.integers(1, 16))
    magnitudes = Magnitudes(0, 2)
    param = _dense_values(draw, (length,), representable_floats(dtype, magnitudes, zero=False))
    touched = sorted(draw(st.lists(st.integers(0, length - 1), min_size=1, max_size=length, unique=True)))
    grad_values = draw(_fixed_lists(representable_floats(dtype, Magnitudes(-3, 2), zero=False), len(touched)))
    ulp_at_4 = 2.0 ** (2 - MANTISSA_BITS[dtype])
    lr = ulp_at_4 * draw(st.sampled_from([0.05, 0.3, 0.5, 0.7, 1.0, 1.5, 2.5, 7.0, 20.0]))
    hyper = {"lr": lr}
    if op == "adagrad":
        hyper["initial_accumulator_value"] = draw(st.sampled_from([0.0, 0.1, 1.0]))
    grad = CooArray(np.array([touched], dtype=np.int64), np.array(grad_values, dtype=np.float64), (length,))
    return OptimizerInputs(param, [grad], hyper)
