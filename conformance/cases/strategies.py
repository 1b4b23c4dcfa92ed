"""Hypothesis strategies for the suite's decoded input types, by op.

Every strategy here draws the objects an op's ``decode_inputs`` returns -- :class:`CooArray`,
:class:`OptimizerInputs`, :class:`MaskedMeanInputs` -- with every float already representable in
the requested dtype (so ``quantize`` is the identity on them and the NumPy reference sees exactly
what a backend sees). The op records own them (``Op.strategies``, one record each); the building
blocks are in :mod:`conformance.ops.draw`. They are public: use them in your own properties::

    from hypothesis import given
    from conformance.cases import strategies as cst

    @given(cst.coo_arrays("float32"))  # or cst.inputs(op, dtype): any op's inputs
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

from typing import Any

from hypothesis import strategies as st

from conformance.ops import OPS
from conformance.ops.draw import (
    FLOAT_DTYPES,
    Magnitudes,
    coo_arrays,
    masks,
    representable_floats,
    shapes,
    special_values,
    trajectories,
)

__all__ = ["FLOAT_DTYPES", "Magnitudes", "coo_arrays", "hyperparameters", "inputs", "invalid_inputs", "masks",
           "representable_floats", "rounding_inputs", "shapes", "special_values", "trajectories"]


def _op(name: str):
    try:
        return OPS[name]
    except KeyError:
        raise ValueError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}") from None


def _drawn(op: str, strategy, what: str):
    """``strategy`` (one of the op's ``Op.strategies``) bound to it, or a clear error where it has none."""
    if strategy is None:
        raise ValueError(f"op {op!r} has no strategy of {what} (its record's Op.strategies leaves it None)")
    return _op(op).drawing(strategy)


def inputs(op: str, dtype: str = "float64", **options: Any) -> st.SearchStrategy:
    """Valid inputs of ``op`` (``Op.strategies.inputs``; options such as ``max_steps`` pass through)."""
    return _drawn(op, _op(op).strategies.inputs, "valid inputs")(dtype, **options)


def invalid_inputs(op: str, dtype: str = "float64") -> st.SearchStrategy:
    """Inputs of ``op`` with exactly one documented error (``Op.strategies.invalid``)."""
    return _drawn(op, _op(op).strategies.invalid, "invalid inputs")(dtype)


def rounding_inputs(op: str, dtype: str) -> st.SearchStrategy:
    """float16/bfloat16 inputs of ``op`` where rounding decides the result (``Op.strategies.rounding``)."""
    return _drawn(op, _op(op).strategies.rounding, "rounding inputs")(dtype)


def hyperparameters(op: str) -> st.SearchStrategy:
    """Valid hyperparameters of optimizer ``op`` (``Op.strategies.hyperparameters``)."""
    strategy = _op(op).strategies.hyperparameters
    if strategy is None:
        raise ValueError(f"op {op!r} has no strategy of hyperparameters (not an optimizer)")
    return strategy()
