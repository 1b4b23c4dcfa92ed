"""The property rounds-correctly: float16/bfloat16 outputs are the exact result rounded to nearest
even (:mod:`conformance.core.rounding`), give or take the float32 arithmetic before it. A miss that
stock torch's recorded half-precision arithmetic explains is its divergence (xfail), for a
candidate as the same as torch by the model (:func:`~conformance.cases.trial.by_model`); a miss no
rounding explains (a NaN, a step that does nothing) is named as such."""

from __future__ import annotations

from typing import Any

import numpy as np

from conformance.cases import lowprec
from conformance.cases.trial import DivergenceObserved, Trial, by_model
from conformance.core.divergences import Divergence, lookup
from conformance.core.dtypes import DTYPES
from conformance.core.rounding import check_rounding
from conformance.core.tensors import quantize, to_numpy
from conformance.core.types import Mismatch


def check_rounds_correctly(trial: Trial, inputs: Any) -> None:
    """float16/bfloat16 outputs are the exact result rounded to nearest even, give or take the
    float32 arithmetic before it (:mod:`conformance.core.rounding`); stock torch's own known
    half-precision arithmetic is reported as its divergence, not as a failure."""
    dtype = trial.dtype
    outputs = trial.run(inputs)
    for name, (exact, low, high) in trial.op.rounding_bounds(inputs, dtype).items():
        if name not in outputs:
            raise Mismatch(f"the backend did not produce {name}")
        try:
            check_rounding(name, outputs[name], exact, low, high, dtype)
        except Mismatch as mismatch:
            divergence = _rounding_divergence(trial, inputs, name, outputs[name], dtype)
            if divergence is None:
                account = _not_a_rounding_error(name, outputs[name], exact, inputs, dtype)
                if account is None:
                    raise
                bounds = str(mismatch).split(" Truncation instead of")[0]  # (that guess is the rounding's, not this)
                raise Mismatch(f"{account}\n  ({bounds})", mismatch.max_abs_error, mismatch.max_rel_error) from None
            raise DivergenceObserved(divergence, str(mismatch).splitlines()[0]) from None


def _not_a_rounding_error(name: str, got, exact, inputs: Any, dtype: str) -> str | None:
    """What an output that misses its rounding bounds shows when no rounding explains it: NaN where
    the exact result is a number (a 0/0), or a parameter that did not move at all where the exact
    result moves it by an ulp or more (a step that does nothing). None for a rounding-sized miss,
    which check_rounding's own message describes."""
    got = np.asarray(to_numpy(got), dtype=np.float64)
    exact = np.broadcast_to(np.asarray(exact, dtype=np.float64), got.shape)
    nan = np.isnan(got) & ~np.isnan(exact)
    if nan.any():
        index = tuple(int(i) for i in np.argwhere(nan)[0])
        return (f"{name} is NaN at {int(nan.sum())} of {got.size} entries where the exact result is a number "
                f"(first at index {index}, exact {float(exact[index])!r}): not a rounding error but a 0/0 or inf - inf")
    start = getattr(inputs, "param", None)
    if name == "param" and start is not None and np.shape(start) == got.shape and got.size:
        before = quantize(np.asarray(start, dtype=np.float64), dtype)
        moves = quantize(exact, dtype) != before  # where the correctly rounded step moves it
        if moves.any() and np.array_equal(got, before):
            return (f"{name} did not move at all: every entry keeps its value before the step, where the exact "
                    f"result moves {int(moves.sum())} of {got.size} entries by an ulp or more -- not a rounding "
                    f"error but a step that does nothing (an lr or update rounded to zero?)")
    return None


def _rounding_divergence(trial: Trial, inputs: Any, name: str, got, dtype) -> Divergence | None:
    """The known divergence an incorrectly rounded output is explained by: this backend's own
    rounding mode, or one of stock torch's models (:func:`_torch_rounding_model`). A candidate is
    excused by stock torch's models only, as the same as torch: by the model, whatever order torch
    happened to add in on this example (torch's unstable sort), not by torch's one run of it."""
    if trial.backend.is_oracle:
        return None
    if trial.backend.judged_against_torch:
        return _same_as_torch_by_model(trial, inputs, name, got, dtype)
    found = lookup(backend=trial.backend.name, device=trial.device, dtype=trial.dtype)
    rounding = next((entry for entry in found if entry.rounding is not None), None)
    if rounding is not None and rounding.rounding is not None:  # (the first entry with a rounding mode)
        exact, low, high = trial.op.rounding_bounds(inputs, dtype)[name]
        try:
            check_rounding(name, got, exact, low, high, dtype, mode=rounding.rounding)
            return rounding
        except Mismatch:
            pass
    return _torch_rounding_model(trial, inputs, name, got, dtype, trial.backend.name)


def _same_as_torch_by_model(trial: Trial, inputs: Any, name: str, got, dtype: str) -> Divergence | None:
    """A candidate's output that stock torch's recorded arithmetic gives (where it applies to torch's
    own backend here): within one of the op's rounding models, or bit for bit a half-precision sum of
    the duplicates in one of the orders an implementation commonly adds them in
    (``Op.half_accumulation_models``) -- the same as torch by the model, whichever order torch's
    unstable sort took on this example."""
    stock = trial.op.stock_backend
    if stock is None:
        return None
    modelled = _op_rounding_model(trial, inputs, name, got, dtype, stock)
    if modelled is not None:
        return by_model(modelled)
    half = lowprec.HALF_ACCUMULATION
    if trial.op.torch_sums_duplicates_in_half and half.applies_to(backend=stock, device=trial.device, dtype=dtype):
        got = np.asarray(to_numpy(got), dtype=np.float64)
        for order, outputs in trial.op.half_accumulation_models(inputs, dtype).items():
            if name in outputs and np.array_equal(got, np.asarray(outputs[name], dtype=np.float64), equal_nan=True):
                return by_model(half, f"the duplicates summed in {dtype} one after another, in {order}")
    return None


def _op_rounding_model(trial: Trial, inputs: Any, name: str, got, dtype: str, backend: str) -> Divergence | None:
    """The op's rounding model of stock torch (``Op.torch_rounding_models``) applying to ``backend`` here
    whose bounds ``got`` lies within, or None."""
    for divergence, model in trial.op.torch_rounding_models:
        if divergence.applies_to(backend=backend, device=trial.device, dtype=dtype):
            exact, low, high = trial.op.rounding_bounds(inputs, dtype, **model)[name]
            try:
                check_rounding(name, got, exact, low, high, dtype)
            except Mismatch:
                continue
            return divergence
    return None


def _torch_rounding_model(trial: Trial, inputs: Any, name: str, got, dtype: str, backend: str) -> Divergence | None:
    """The divergence of stock torch's whose model ``got`` lies within, where it applies to ``backend``:
    one of the op's rounding models (``Op.torch_rounding_models``), or the half-precision accumulation
    of duplicates in any order (``Op.torch_sums_duplicates_in_half``: each partial sum rounded to the
    dtype, (k - 1) roundings of the dtype's unit for k duplicates)."""
    modelled = _op_rounding_model(trial, inputs, name, got, dtype, backend)
    if modelled is not None:
        return modelled
    half = lowprec.HALF_ACCUMULATION
    if trial.op.torch_sums_duplicates_in_half and half.applies_to(backend=backend, device=trial.device, dtype=dtype):
        exact, low, high = trial.op.rounding_bounds(inputs, dtype, accumulation_unit=DTYPES[dtype].unit_roundoff)[name]
        try:
            check_rounding(name, got, exact, low, high, dtype)
            return half
        except Mismatch:
            pass
    return None
