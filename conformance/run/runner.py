"""Run one item -- a case on one backend, device and dtype -- and check it against the golden
values, the op's invariants and the NumPy reference. Raises on any departure."""

from __future__ import annotations

import re
import time
from typing import Any

from conformance.types import RunContext
from conformance.backends.base import Backend
from conformance.compare import Mismatch, Tolerance, compare_outputs, default_tolerance
from conformance.devices import measure
from conformance.specs.load import Case
from conformance.tensors import torch_dtype


class ReferenceFailure(RuntimeError):
    """The NumPy reference itself could not evaluate a case: a harness or spec problem."""


def _exception_matches(exc: BaseException, type_name: str) -> bool:
    return any(cls.__name__ == type_name or f"{cls.__module__}.{cls.__qualname__}" == type_name
               for cls in type(exc).__mro__)


def _source_label(case: Case) -> str:
    source = case.source or {}
    label = source.get("key") or source.get("document")
    return f"the golden values ({label})" if label else "the golden values"


def _tolerances(case: Case, tolerance: Tolerance) -> dict[str, Tolerance | None]:
    return {name: (None if name in case.op.exact_outputs else tolerance)
            for name in list(case.op.expected_schema.get("properties", {})) + ["indices", "values"]}


def check_expected_error(case: Case, backend: Backend, inputs: Any, ctx: RunContext) -> None:
    wanted = case.expected_error
    describe = wanted.type + (f" matching {wanted.match!r}" if wanted.match else "")
    try:
        backend.run(case.op.name, inputs, ctx)
    except Exception as exc:
        from conformance.types import Unsupported

        if isinstance(exc, Unsupported):
            raise
        if not _exception_matches(exc, wanted.type):
            raise Mismatch(f"expected {describe}, but {type(exc).__name__} was raised: {exc}") from exc
        if wanted.match and not re.search(wanted.match, str(exc)):
            raise Mismatch(f"expected {describe}, but the message was: {exc}") from exc
        return
    raise Mismatch(f"expected {describe}, but nothing was raised")


def run_item(case: Case, backend: Backend, device: str, dtype_name: str,
             record: dict[str, Any] | None = None) -> RunContext:
    """Run and check one item; returns its context (with timings and backend records).

    ``record``, when given, becomes the context's record, so what the run measured (timings, XLA
    compile counts) is kept also when the item fails.
    Raises Unsupported, Mismatch (outcome ``failed``), or whatever the backend raised (``error``).
    """
    dtype = torch_dtype(dtype_name)
    ctx = RunContext(device, dtype, record if record is not None else {})
    op = case.op
    inputs = op.decode_inputs(case.inputs, dtype)
    if case.expected_error is not None:
        with measure(device, ctx.record):
            check_expected_error(case, backend, inputs, ctx)
        return ctx
    started = time.perf_counter()
    with measure(device, ctx.record):  # XLA: compile counts, the lazy graph executed
        outputs = backend.run(op.name, inputs, ctx)
    ctx.record["seconds"] = time.perf_counter() - started
    op.check_invariants(outputs, inputs)
    golden_tolerance = case.tolerance or default_tolerance(dtype)
    compare_outputs(outputs, op.decode_expected(case.expected), _tolerances(case, golden_tolerance),
                    against=_source_label(case))
    if backend.name != "reference":
        try:
            reference = op.reference(inputs)
        except Exception as exc:
            raise ReferenceFailure(f"the NumPy reference raised {type(exc).__name__}: {exc}") from exc
        reference_tolerance = default_tolerance(dtype).scaled(op.reference_tolerance_scale(inputs))
        golden_is_reference = (case.source or {}).get("key") == "numpy-reference"  # a written counterexample
        if case.tolerance is not None and golden_is_reference:  # its tolerance is the property's, so use it here too
            reference_tolerance = Tolerance(max(reference_tolerance.rtol, case.tolerance.rtol),
                                            max(reference_tolerance.atol, case.tolerance.atol))
        compare_outputs(outputs, reference, _tolerances(case, reference_tolerance), against="the NumPy reference")
    return ctx
