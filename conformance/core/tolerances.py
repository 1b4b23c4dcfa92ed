"""Every tolerance an item is judged within, built here and nowhere else.

An op record declares its error bounds as data: :meth:`Op.error_bounds` returns, per output, an
:class:`ErrorBound` (or None: exact) -- a pure function of the inputs, the dtype and, for a record
that declares ``rounding_sensitive``, the sensitivity values this module computes first
(:func:`rounding_sensitivity`: how far torch's algorithm replayed in the dtype, and the duplicates
summed in another order, land from the float64 reference). No record calls back into the harness.
The :class:`~conformance.core.dtypes.Tolerance` values are made here from those bounds and from the
dtype facts (:mod:`conformance.core.dtypes`):

- spec cases: the golden values' (:func:`golden`), the NumPy reference's (:func:`against_reference`,
  assert_close's default scaled by the ``Op.reference_error_bound``), the documented algorithm's
  beyond torch's limitation (:func:`beyond_torch`), stock torch's (:func:`agreement_with`);
- generated examples: :func:`generated` (the record's bounds, never below assert_close's default),
  :func:`widest` (one tolerance for a written counterexample), :func:`agreement_with` (the same as torch);
- the diagnosis: :func:`for_diagnosis` (a model's match), :func:`tight` (a tight model: the same
  value), :func:`same_runs` (two runs on a device);
- :func:`agreement` and :func:`default`: the dtype's "same as torch" and assert_close's default.

The judging code, the generated cases, the diagnosis and the benchmark call these functions; none
builds a tolerance itself (tests/test_tolerances.py keeps it so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import torch

from conformance.core.dtypes import Tolerance, info

Tolerances = dict[str, "Tolerance | None"]  # per output name; None: exact


@dataclass(frozen=True)
class ErrorBound:
    """An op record's declared bound on one output's error against the float64 reference, the one form
    every bound a record declares takes (``Op.error_bounds`` per output, ``Op.reference_error_bound`` for a
    spec case's cross-check): the tolerance is ``rtol`` and ``atol``, each never below the floor --
    assert_close's default for the dtype times ``default_scale`` -- plus ``atol_beyond_floor`` (an error that
    adds to whatever the floor allows: sums that cancel)."""

    rtol: float
    atol: float
    atol_beyond_floor: float = 0.0
    default_scale: float = 1.0

    @classmethod
    def times_default(cls, scale: float) -> "ErrorBound":
        """assert_close's default for the dtype, ``scale`` times looser (a sum of k duplicates: k roundings)."""
        return cls(0.0, 0.0, default_scale=float(scale))


def default(dtype: str | torch.dtype) -> Tolerance:
    """torch.testing.assert_close's default for ``dtype``."""
    return info(dtype).default_tolerance


def agreement(dtype: str | torch.dtype) -> Tolerance:
    """How close to stock torch's result counts as "the same as torch": anything further is a
    different behaviour (:attr:`conformance.core.dtypes.DType.agreement_tolerance`)."""
    return info(dtype).agreement_tolerance


def per_output(names: Iterable[str], exact: Iterable[str], tolerance: Tolerance | None) -> Tolerances:
    """``tolerance`` for each of ``names``, None (exact) for the ``exact`` ones."""
    exact = set(exact)
    return {name: (None if name in exact else tolerance) for name in names}


def agreement_with(op: Any, names: Iterable[str], dtype: str | torch.dtype) -> Tolerances:
    """The agreement tolerance on ``names``, exact on the op's exact outputs: "the same as torch"."""
    return per_output(names, op.exact_outputs, agreement(dtype))


# ---------------------------------------------------------------- spec cases

def spec_outputs(op: Any) -> list[str]:
    """The output names a spec case's tolerances cover: the expected schema's, and a COO result's."""
    return list(op.expected_schema.get("properties", {})) + ["indices", "values"]


def _reference_scaled(op: Any, inputs: Any, dtype: str | torch.dtype) -> Tolerance:
    """The op's bound on a spec case's cross-check against the NumPy reference (``reference_error_bound``)."""
    return _tolerance(dtype, op.reference_error_bound(inputs))


def golden(case: Any, dtype: str | torch.dtype) -> Tolerances:
    """Against a spec case's golden values: the case's declared tolerance, else assert_close's default."""
    return per_output(spec_outputs(case.op), case.op.exact_outputs, case.tolerance or default(dtype))


def against_reference(case: Any, inputs: Any, dtype: str | torch.dtype, golden_is_reference: bool) -> Tolerances:
    """Against the NumPy reference: assert_close's default scaled by the op; a written counterexample's
    (``golden_is_reference``) declared tolerance is the property's, so it widens this one too."""
    tolerance = _reference_scaled(case.op, inputs, dtype)
    if case.tolerance is not None and golden_is_reference:
        tolerance = Tolerance(max(tolerance.rtol, case.tolerance.rtol), max(tolerance.atol, case.tolerance.atol))
    return per_output(spec_outputs(case.op), case.op.exact_outputs, tolerance)


def beyond_torch(case: Any, inputs: Any, dtype: str | torch.dtype) -> Tolerances:
    """Against the documented algorithm's reference where torch raises (a torch-limitation case)."""
    return per_output(spec_outputs(case.op), case.op.exact_outputs, _reference_scaled(case.op, inputs, dtype))


def spec_agreement(case: Any, dtype: str | torch.dtype) -> Tolerances:
    """A spec case's outputs against stock torch's."""
    return agreement_with(case.op, spec_outputs(case.op), dtype)


def benchmark(op: Any, inputs: Any, dtype: str | torch.dtype) -> Tolerances:
    """A benchmark's outputs against the NumPy reference (as a spec case's)."""
    return per_output(spec_outputs(op), op.exact_outputs, _reference_scaled(op, inputs, dtype))


# ---------------------------------------------------------------- generated examples

def _tolerance(dtype: str | torch.dtype, bound: ErrorBound) -> Tolerance:
    floor = default(dtype).scaled(bound.default_scale)
    return Tolerance(max(floor.rtol, bound.rtol), max(floor.atol, bound.atol) + bound.atol_beyond_floor)


def _from_bounds(dtype: str, bounds: Mapping[str, ErrorBound | None]) -> Tolerances:
    return {name: None if bound is None else _tolerance(dtype, bound) for name, bound in bounds.items()}


def generated(op: Any, inputs: Any, dtype: str, reference: dict | None = None) -> Tolerances:
    """Per-output tolerance for comparing a ``dtype`` backend with the float64 reference (``reference``:
    the op's, when the caller has it) on generated inputs: the record's bounds (``Op.error_bounds``),
    with the rounding sensitivity (:func:`rounding_sensitivity`) where the record declares it uses it
    (``Op.rounding_sensitive``: the optimizers' ill-conditioned trajectories). None means exact."""
    sensitivity: dict[str, float] = {}
    if op.rounding_sensitive:
        sensitivity = rounding_sensitivity(op, inputs, dtype, reference if reference is not None else op.reference(inputs))
    return _from_bounds(dtype, op.error_bounds(inputs, dtype, sensitivity))


def rounding_sensitivity(op: Any, inputs: Any, dtype: str, reference: dict) -> dict[str, float]:
    """How far a correct implementation of the same formulas, evaluated in ``dtype``, lands from
    the float64 reference: torch's algorithm replayed with every stored tensor rounded to
    ``dtype`` and duplicates summed in float32 (float64 for float64; the record's
    ``half_precision_model``). This catches the ill-conditioned cases a formula cannot: SparseAdam's
    ``v + (g*g - v) * (1 - beta2)`` cancels when beta2 = 0 and the old v is large, and the parameter
    inherits the relative error. Non-finite differences (float16 eps/g**2 underflow) are left to the
    known-divergence models. Plus how far the reference moves when duplicates are summed in another
    order (``Op.regrouped_inputs``): a kernel's order is its own."""
    result: dict[str, float] = {}
    try:
        model = op.half_precision_model(inputs, dtype, "float64" if dtype == "float64" else "float32")
    except Exception:  # noqa: BLE001 - no model for this input: no widening from it
        model = None
    if model is not None:
        _widen(result, reference, model[0])
    for regrouped in op.regrouped_inputs(inputs, dtype):
        try:
            moved = op.reference(regrouped)
        except Exception:  # noqa: BLE001 - the reference refuses the shifted sums: no widening from them
            continue
        _widen(result, reference, moved)
    return result


def _widen(result: dict[str, float], reference: dict, other: dict) -> None:
    """``result[name]``: at least the largest finite |reference - other| of each output."""
    for name, value in reference.items():
        a, b = np.asarray(value, dtype=np.float64), np.asarray(other.get(name), dtype=np.float64)
        if a.shape != b.shape or not a.size:
            continue
        with np.errstate(invalid="ignore"):
            diff = np.abs(a - b)
        diff = diff[np.isfinite(diff)]
        result[name] = max(result.get(name, 0.0), float(diff.max()) if diff.size else 0.0)


def widest(tols: Mapping[str, Tolerance | None]) -> Tolerance:
    """One tolerance covering every output (what a spec case's single ``tolerance`` can say)."""
    values = [t for t in tols.values() if t is not None]
    return Tolerance(max((t.rtol for t in values), default=0.0), max((t.atol for t in values), default=0.0))


# ---------------------------------------------------------------- the diagnosis

def for_diagnosis(op: Any, inputs: Any, dtype: str, names: Iterable[str]) -> Tolerances:
    """The tolerance of each output name for matching a known mistake's model: the record's bounds
    for generated inputs (without the rounding sensitivity), else assert_close's default for the
    dtype scaled as the reference cross-check scales it; exact for the op's exact outputs."""
    try:
        tolerances = dict(_from_bounds(dtype, op.error_bounds(inputs, dtype, {})))
    except Exception:  # noqa: BLE001 - an op or input without declared bounds
        tolerances = {}
    try:
        fallback = _reference_scaled(op, inputs, dtype)
    except Exception:  # noqa: BLE001 - the dtype's default is still a tolerance
        fallback = default(dtype)
    exact = set(op.exact_outputs)
    return {name: (None if name in exact else tolerances.get(name) or fallback) for name in names}


def tight(names: Iterable[str], exact: Iterable[str]) -> Tolerances:
    """A tight model's match: the same value (the model is rounded to the dtype as the output is)."""
    return per_output(names, exact, Tolerance(0.0, 0.0))


def same_runs(dtype: Any) -> Tolerance:
    """Two runs of the same inputs on a device whose kernels may sum in another order (atomics):
    assert_close's default for the outputs' dtype."""
    return default(dtype)
