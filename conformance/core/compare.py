"""Compare a backend's outputs with golden values and with the reference, via assert_close."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import torch

from conformance.core.dtypes import Tolerance
from conformance.core.tensors import to_numpy
from conformance.core.types import Mismatch  # noqa: F401 - re-exported: a check's failure


def finite_abs_max(array) -> float:
    """Largest finite |x| (0 when there is none)."""
    array = np.abs(np.asarray(array, dtype=np.float64))
    array = array[np.isfinite(array)]
    return float(array.max()) if array.size else 0.0


def _errors(actual: np.ndarray, expected: np.ndarray) -> tuple[float, float, tuple[int, ...] | None]:
    """Max abs error, max rel error and the first differing index. NaN on one side only makes
    the max errors NaN (not inf); NaN on both sides, or the same infinity, is no error."""
    if actual.shape != expected.shape or actual.size == 0:
        return float("nan"), float("nan"), None
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(e)
    same_inf = np.isinf(a) & (a == e)
    with np.errstate(invalid="ignore", divide="ignore"):
        abs_err = np.where(both_nan | same_inf, 0.0, np.abs(a - e))
        rel_err = np.where(abs_err == 0, 0.0, abs_err / np.abs(e))
    differing = np.argwhere(abs_err != 0)  # NaN != 0: a one-sided NaN differs
    first = tuple(int(i) for i in differing[0]) if len(differing) else None
    return float(abs_err.max()), float(rel_err.max()), first  # max() propagates NaN


def format_error(value: float) -> str:
    """A max error for people: NaN, inf or 6 significant digits."""
    if math.isnan(value):
        return "NaN"
    return ("inf" if value > 0 else "-inf") if math.isinf(value) else f"{value:.6g}"


def format_values(value: Any) -> str:
    """Values for people: NaN, inf and -inf (also as the results file's strings), nested lists as
    [a, b, ...], None as -."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return "[" + ", ".join(format_values(v) for v in value) + "]"
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity", "inf", "-inf"):
        value = float(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else format_error(value)
    return str(value)


def warm_up_comparison() -> None:
    """Make one comparison, so that what torch imports on its first use (``torch.testing.assert_close``
    imports ``torch.distributed.tensor``: 1-3 s) is paid before any item's timer starts."""
    torch.testing.assert_close(torch.zeros(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64))


def assert_output_close(name: str, actual: Any, expected: Any, tolerance: Tolerance | None, against: str) -> None:
    """Raise Mismatch naming the output, the comparison, the max errors and the first bad index.

    ``tolerance`` None means exact equality (indices, sizes, counts, booleans).
    """
    actual_np = to_numpy(actual)
    expected_np = to_numpy(expected)
    if tolerance is None:
        if actual_np.shape == expected_np.shape and np.array_equal(actual_np, expected_np):
            return
        raise Mismatch(
            f"{name} differs from {against}:\n  expected {expected_np.tolist()}\n  got      {actual_np.tolist()}",
        )
    try:
        torch.testing.assert_close(
            torch.from_numpy(np.asarray(actual_np, dtype=np.float64)),
            torch.from_numpy(np.asarray(expected_np, dtype=np.float64)),
            rtol=tolerance.rtol,
            atol=tolerance.atol,
            equal_nan=True,
        )
    except AssertionError as exc:
        max_abs, max_rel, first = _errors(actual_np, expected_np)
        where = f", first at index {first}" if first is not None else ""
        detail = str(exc).strip().splitlines()
        summary = (
            f"{name} differs from {against} ({tolerance}): "
            f"max abs error {format_error(max_abs)}, max rel error {format_error(max_rel)}{where}"
        )
        body = "\n  ".join(detail[:6])
        if actual_np.size <= 64:
            body += (f"\n  expected {format_values(np.round(expected_np, 6).tolist())}"
                     f"\n  got      {format_values(np.round(actual_np.astype(np.float64), 6).tolist())}")
        raise Mismatch(f"{summary}\n  {body}", max_abs, max_rel) from None


def compare_outputs(
    outputs: Mapping[str, Any],
    expected: Mapping[str, Any],
    tolerances: Mapping[str, Tolerance | None],
    against: str,
) -> None:
    """Compare each expected output; an expected output the backend did not produce is a Mismatch."""
    for name, want in expected.items():
        if name not in outputs:
            raise Mismatch(f"{name} was expected ({against}) but the backend did not produce it")
        assert_output_close(name, outputs[name], want, tolerances.get(name), against)


def same_bits(a, b) -> np.ndarray:
    """Elementwise: identical float64 bits, or both NaN."""
    shape = np.shape(a)
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float64)).reshape(-1)  # (ascontiguousarray makes 0-d 1-d)
    b = np.ascontiguousarray(np.asarray(b, dtype=np.float64)).reshape(-1)
    return ((a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))).reshape(shape)


def first_index(flags: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(flags)[0])


def assert_bits_equal(name: str, actual, expected, where: np.ndarray | None, against: str) -> None:
    actual, expected = to_numpy(actual), to_numpy(expected)
    if actual.shape != expected.shape:
        raise Mismatch(f"{name}: shape {list(actual.shape)} differs from {against}'s {list(expected.shape)}")
    differs = ~same_bits(actual, expected)
    if where is not None:
        differs &= where
    if differs.any():
        index = first_index(differs)
        raise Mismatch(f"{name} is not bit-for-bit equal to {against}: {int(differs.sum())} entries differ, "
                       f"first at index {index}: {float(actual[index])!r} vs {float(expected[index])!r}")
