"""The item-execution core of a spec case: run one case on one backend, device and dtype, check
it against the golden values, the op's invariants and the NumPy reference, and judge it
(:mod:`conformance.judging.verdict`). The plugin's items and counterexample replay both use it."""

from __future__ import annotations

import re
import time
from typing import Any, Callable

from conformance.core import diagnosis
from conformance.backends.base import Backend
from conformance.backends.reference import GOLDEN_SOURCE
from conformance.core.types import Mismatch, RunContext, Unsupported, exception_text, safe_text
from conformance.judging.verdict import (SameAsTorch, TorchRun, Verdict, agrees, differs, distance,
                                 judge, run_stock_torch, side_by_side)
from conformance.core import tolerances
from conformance.core.compare import compare_outputs
from conformance.core.devices import measure
from conformance.core.divergences import STOCK_TORCH, Divergence
from conformance.core.layouts import outside_changed
from conformance.specs.load import TORCH_LIMITATION, Case
from conformance.core.tensors import torch_dtype


class ReferenceFailure(RuntimeError):
    """The NumPy reference itself could not evaluate a case: a harness or spec problem."""


def _exception_matches(exc: BaseException, type_name: str) -> bool:
    return any(cls.__name__ == type_name or f"{cls.__module__}.{cls.__qualname__}" == type_name
               for cls in type(exc).__mro__)


def _source_label(case: Case) -> str:
    source = case.source or {}
    label = source.get("key") or source.get("document")
    return f"the golden values ({label})" if label else "the golden values"


class ErrorMissed(Mismatch):
    """How an implementation missed an expected error; ``how`` is one of ``nothing-raised``,
    ``other-type`` and ``other-message`` (two runs miss it the same way when their ``how`` agree).
    ``raised``: the exception it raised instead, its cause (a divergence of kind error pins it)."""

    def __init__(self, message: str, how: str, raised: BaseException | None = None):
        super().__init__(message)
        self.how = how
        self.__cause__ = raised


def _type_phrase(exc: BaseException, wanted: str) -> str:
    """``RuntimeError``, or ``NotImplementedError (a RuntimeError)`` for a subclass of the wanted type."""
    name = type(exc).__name__
    return name if name == wanted or wanted.endswith("." + name) else f"{name} (a {wanted.rsplit('.', 1)[-1]})"


def refusal_note(exc: BaseException, wanted: str) -> str:
    """What a candidate's record says of a refusal judged by kind: ``raised RuntimeError as torch
    does: <the candidate's own text>``."""
    text = safe_text(exc).strip()
    return f"raised {_type_phrase(exc, wanted)} as torch does" + (f": {text}" if text else " (with no message)")


def expected_error_problem(case: Case, call: Callable[[], Any], by_kind: bool = False,
                           raised: list[BaseException] | None = None) -> ErrorMissed | None:
    """How ``call()`` misses the case's expected error (an :class:`ErrorMissed`), or None when it raises it.

    ``by_kind`` (a candidate, and stock torch's second opinion on a candidate's item): the
    exception must be of the case's type -- or a subclass, which ``except <type>`` catches too --
    and its message is the implementation's own; otherwise (stock torch's and the built-in
    backends' own items) the message must match ``expected_error.match`` too. ``raised``, when
    given, gets the exception ``call`` raised."""
    wanted = case.expected_error
    assert wanted is not None  # (a case that expects an error)
    describe = wanted.describe()
    if by_kind:  # what torch's text is, for the reader; not asked of this implementation
        describe = (f"{wanted.type}, the type torch raises here (the text may be the implementation's own"
                    + (f"; torch's matches {wanted.match!r}" if wanted.match else "") + ")")
    try:
        call()
    except Unsupported:
        raise
    except Exception as exc:
        if raised is not None:
            raised.append(exc)
        if not _exception_matches(exc, wanted.type):
            return ErrorMissed(f"expected {describe}, but it raised {exception_text(exc)}", "other-type", exc)
        if not by_kind and wanted.match and not re.search(wanted.match, safe_text(exc)):
            return ErrorMissed(f"expected {describe}, but the message was {safe_text(exc).strip()!r}", "other-message",
                               exc)
        return None
    return ErrorMissed(f"expected {describe}, but nothing was raised", "nothing-raised")


def _missed_alike(failure: Mismatch | None, torch_failure: Mismatch | None) -> bool:
    if (failure is None) != (torch_failure is None):
        return False
    return failure is None or getattr(failure, "how", None) == getattr(torch_failure, "how", None)


def check_against_spec(case: Case, backend: Backend, inputs: Any, dtype, outputs: dict[str, Any]) -> None:
    """The op's invariants, the golden values and the NumPy reference (raises Mismatch)."""
    op = case.op
    assert case.expected is not None  # (a case that expects outputs)
    op.check_invariants(outputs, inputs)
    compare_outputs(outputs, op.decode_expected(case.expected), tolerances.golden(case, dtype),
                    against=_source_label(case))
    if backend.is_oracle:
        return
    reference = _reference(case, inputs)
    golden_is_reference = (case.source or {}).get("key") == GOLDEN_SOURCE  # a written counterexample
    compare_outputs(outputs, reference, tolerances.against_reference(case, inputs, dtype, golden_is_reference),
                    against="the NumPy reference")


def _reference(case: Case, inputs: Any) -> dict[str, Any]:
    try:
        return case.op.reference(inputs)
    except Exception as exc:
        raise ReferenceFailure(f"the NumPy reference raised {exception_text(exc)}") from exc


def run_item(case: Case, backend: Backend, device: str, dtype_name: str,
             record: dict[str, Any] | None = None) -> RunContext:
    """Run and check one item; returns its context (with timings and backend records).

    ``record``, when given, becomes the context's record, so what the run measured (timings, XLA
    compile counts) is kept also when the item fails. A backend judged against torch (a
    candidate), and any backend that misses the spec or meets a recorded divergence of torch, is
    compared with stock torch on the same inputs (:mod:`conformance.judging.verdict`).
    Raises Unsupported, SameAsTorch (outcome ``xfail``), Mismatch (``failed``), or whatever the
    backend raised (``error``).
    """
    dtype = torch_dtype(dtype_name)
    ctx = RunContext(device, dtype, record if record is not None else {}, layouts=case.layouts)
    inputs = case.op.decode_inputs(case.inputs, dtype_name)
    divergence = case.torch_divergence_for(device, dtype_name)
    if case.expected_error is not None and case.expected_error.kind == TORCH_LIMITATION:
        return _run_torch_limitation(case, backend, inputs, ctx)
    if case.expected_error is not None:
        return _run_expecting_error(case, backend, inputs, ctx, device, dtype, divergence)
    return _run_expecting_outputs(case, backend, inputs, ctx, device, dtype, divergence)


def _runner_on(case: Case, backend: Backend, device: str, dtype) -> Callable[[Any], Any]:
    """``backend`` run on other inputs in a fresh context of the item's (a mistake's control, a diagnosis)."""
    return lambda other: backend.run(case.op.name, other, RunContext(device, dtype, {}, layouts=case.layouts))


def _run_expecting_error(case: Case, backend: Backend, inputs: Any, ctx: RunContext, device: str, dtype,
                         divergence: Divergence | None) -> RunContext:
    """An item whose case expects an error: does the backend raise it, and does stock torch."""
    op, wanted = case.op, case.expected_error
    assert wanted is not None  # (run_item: a case that expects an error)
    # a candidate's refusal is judged by its kind (the exception type), stock torch's and the
    # built-in backends' by the text too; torch's second opinion on a candidate's item by kind
    by_kind = backend.judged_against_torch
    raised: list[BaseException] = []
    with measure(device, ctx.record):
        failure = expected_error_problem(case, lambda: backend.run(op.name, inputs, ctx), by_kind, raised)
    torch = None
    if op.torch_implementation is not None and (backend.judged_against_torch or failure or divergence):
        torch = TorchRun(failure=expected_error_problem(
            case, lambda: op.run_candidate(op.torch_implementation, inputs, RunContext(device, dtype, {}, layouts=case.layouts)),
            by_kind))
    same = torch is not None and _missed_alike(failure, torch.failure)
    try:
        _conclude(case, backend, ctx, failure, torch, same, divergence, expected={}, outputs={})
    except Mismatch as differs:  # what the candidate computed instead of raising, and what it looks like
        run = _runner_on(case, backend, device, dtype)
        raise diagnosis.looks_like(op, inputs, lambda: run(inputs), dtype, ctx.record, differs, run) from failure
    if by_kind and failure is None and raised:  # the candidate's own words, in its record
        ctx.record["message"] = refusal_note(raised[0], wanted.type)
    return ctx


def _run_expecting_outputs(case: Case, backend: Backend, inputs: Any, ctx: RunContext, device: str, dtype,
                           divergence: Divergence | None) -> RunContext:
    """An item whose case expects outputs: run and time the backend, check its outputs against the
    spec, and compare them with stock torch's where the verdict needs torch's opinion."""
    op = case.op
    assert case.expected is not None  # (run_item: a case that expects outputs)
    started = time.perf_counter()
    with measure(device, ctx.record):  # XLA: compile counts, the lazy graph executed
        try:
            outputs = backend.run(op.name, inputs, ctx)
        except Unsupported:
            raise
        except Exception as error:  # an error where a result is expected: what it looks like, if known
            raise diagnosis.looks_like(op, inputs, error, dtype, ctx.record, error,
                                       _runner_on(case, backend, device, dtype))
    ctx.record["seconds"] = time.perf_counter() - started
    failure = None
    try:
        check_against_spec(case, backend, inputs, dtype, outputs)
        _check_inside_views(ctx)
    except Mismatch as mismatch:
        failure = mismatch
    torch = None
    if backend.judged_against_torch or failure is not None or divergence is not None:
        torch = run_stock_torch(op, inputs, ctx, lambda o: check_against_spec(case, backend, inputs, dtype, o))
    expected = op.decode_expected(case.expected)
    same = False
    if torch is not None and torch.outputs is not None:
        names = set(expected) | set(_reference(case, inputs))
        same = agrees(outputs, torch.outputs, tolerances.spec_agreement(case, dtype), names)
        ctx.record["torch_max_abs_error"] = distance(outputs, torch.outputs)
    try:
        _conclude(case, backend, ctx, failure, torch, same, divergence, expected, outputs)
    except Mismatch as differs:
        raise diagnosis.looks_like(op, inputs, outputs, dtype, ctx.record, differs,
                                   _runner_on(case, backend, device, dtype)) from failure
    return ctx


def _check_inside_views(ctx: RunContext) -> None:
    """A case that names layouts: no byte of a storage outside the view the backend was handed changed."""
    for placement in ctx.placements:
        changed = outside_changed(placement)
        if changed:
            raise Mismatch(f"layout {changed}")


def _reraise(error: BaseException):
    raise error


def _run_torch_limitation(case: Case, backend: Backend, inputs: Any, ctx: RunContext) -> RunContext:
    """A case whose expected error is a limitation of torch, not the contract (``kind:
    torch-limitation``): raising it is what stock torch does (a candidate: same-as-torch, xfail; a
    built-in backend: passed), computing the documented algorithm's value (``Op.reference_beyond_torch``)
    is an improvement, and anything else -- another error, another value -- fails."""
    op, wanted = case.op, case.expected_error
    assert wanted is not None  # (run_item: a case whose expected error is torch's limitation)
    limitation = f"a limitation of torch, not the contract: it raises {wanted.describe()}"
    computed: list[dict[str, Any]] = []
    with measure(ctx.device, ctx.record):  # a candidate's refusal: by its kind, as for a contract error
        missed = expected_error_problem(case, lambda: computed.append(backend.run(op.name, inputs, ctx)),
                                        backend.judged_against_torch)
    if not computed and missed is None and not backend.judged_against_torch:
        return ctx  # a built-in backend that raises as torch does

    def check(outputs: dict[str, Any]) -> None:  # the documented algorithm, beyond torch's limitation
        op.check_invariants(outputs, inputs)
        reference = op.reference_beyond_torch(inputs)
        compare_outputs(outputs, reference, tolerances.beyond_torch(case, inputs, ctx.dtype),
                        against=f"the NumPy reference of the documented algorithm (torch raises here: {limitation})")

    failure = None
    if computed:
        try:
            check(computed[0])
        except Mismatch as mismatch:
            failure = mismatch
    else:
        failure = missed or Mismatch(f"raised torch's limitation {wanted.describe()} where the documented "
                                     "algorithm has a value")
    torch = run_stock_torch(op, inputs, ctx, check)  # (on cpu where the device has no sparse kernel)
    torch_error = torch.error if torch is not None else None
    same = not computed and missed is None and torch_error is not None and \
        expected_error_problem(case, lambda: _reraise(torch_error), backend.judged_against_torch) is None
    link = (case.source or {}).get("url")  # where torch raises it: the case's source, when it has an address
    as_torch = Divergence(TORCH_LIMITATION, limitation, link, behaviour=STOCK_TORCH)
    _conclude(case, backend, ctx, failure, torch, same, as_torch, expected={}, outputs=computed[0] if computed else {})
    return ctx


def _conclude(case: Case, backend: Backend, ctx: RunContext, failure: Mismatch | None, torch: TorchRun | None,
              same: bool, divergence: Divergence | None, expected: dict, outputs: dict) -> None:
    """Record the three-way verdict; raise SameAsTorch or the failure when the item does not conform."""
    text = divergence.text if divergence is not None else None
    if torch is not None and torch.stand_in:
        ctx.record["torch_stand_in"] = torch.stand_in
    if divergence is not None and torch is not None and torch.conforms:
        ctx.record["stale_divergence"] = text
    if torch is not None and not backend.judged_against_torch and text is None:
        torch = None  # a built-in backend that misses the spec fails unless the divergence is recorded
    try:
        judgement = judge(failure, torch, same, text)
    except SameAsTorch:
        ctx.record["verdict"] = Verdict.SAME_AS_TORCH.value
        if divergence is not None:
            ctx.record["divergence"] = {"reason": divergence.reason, "link": divergence.link}
        table = side_by_side(expected, torch.outputs if torch else None, outputs)
        if table:
            ctx.record["values"] = table
        raise
    if torch is not None or backend.judged_against_torch:
        ctx.record["verdict"] = judgement.verdict.value
    ctx.record.update(judgement.record)
    if judgement.verdict is Verdict.DIFFERS:
        table = side_by_side(expected, torch.outputs if torch else None, outputs)
        if table:
            ctx.record["values"] = table
        computed = case.op.computed_outputs() if backend.judged_against_torch else None
        assert failure is not None  # (judge: differs only where the backend missed the spec)
        raise differs(failure, torch, table=table, computed=computed) from failure
