"""Diagnosis: which known mistake a failing output looks like.

Each op record carries a catalogue of known mistakes (``Op.mistakes``): a :class:`Mistake` is a
short name, a one-line explanation, and a model -- a small NumPy function of the op's inputs that
gives the outputs an implementation with that mistake would return (or, for a mistake that shows as
an error, a predicate on the inputs and the exception raised). When an item fails, the judging code
calls :func:`looks_like` (spec items) or :func:`looks_like_example` (generated items) with the
failing example: each model runs on it, and a model is named when

- the candidate's outputs match the model's within the item's tolerance,
- the model itself differs from the NumPy reference on this example (it tells the two apart), and
- the candidate is closer to the model than to the reference.

The failure's message then ends with ``looks like: <name> -- <explanation>``, the record gets
``looks_like: {name, explanation}``, and the report shows it in the item's panel. Correct
implementations never fail, so they never get a diagnosis; a failure no model explains gets none.

This module is a lower layer: it imports only ``compare``, ``tensors``, ``tolerances`` and ``types``,
and takes the op record as an argument. The item's tolerances come from :mod:`conformance.core.tolerances`
(:func:`~conformance.core.tolerances.for_diagnosis`), once per diagnosed run. Op records declare their mistakes with :class:`conformance.core.types.Mistake`.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import torch

from conformance.core import tolerances as item_tolerances
from conformance.core.compare import compare_outputs, same_bits
from conformance.core.dtypes import Tolerance
from conformance.core.tensors import quantize, to_numpy
from conformance.core.types import MISTAKE_DASH as DASH, Mismatch, Mistake, Unsupported  # noqa: F401 - re-exported

RECORD_FIELD = "looks_like"

# not a mistake of any one op: an implementation whose runs of the same inputs differ. A property
# that compares separate runs (unspecified-unchanged, param-groups, state-dict-resume,
# sparse-equals-dense) then fails on the run-to-run difference, whatever the semantics
NONDETERMINISTIC = Mistake(
    "nondeterministic", "the same inputs run twice gave different results (see the property 'deterministic'): "
    "a check that compares separate runs fails on the run-to-run difference, not on the semantics; look for a "
    "race, an uninitialised buffer or state shared between optimizers")


def parameter_unmoved(inputs: Any, dtype: str) -> dict[str, Any] | None:
    """The model of :data:`STEP_DOES_NOTHING`: the parameter keeps its value before the steps
    (inputs with a ``param`` and at least one step; None otherwise)."""
    param, grads = getattr(inputs, "param", None), getattr(inputs, "grads", None)
    if param is None or not grads:
        return None
    return {"param": np.asarray(param, dtype=np.float64)}


# a mistake any optimizer can make: listed in each optimizer record's catalogue (after the rounding
# mistakes, which name the cases it cannot be told apart from: truncating a move of less than an ulp)
STEP_DOES_NOTHING = Mistake(
    "step that does nothing", "the parameter never moved: a factor of the update rounded to zero in the dtype "
    "(lr, 1 - beta or the step size held in float16/bfloat16 -- bfloat16(0.999) is 1.0, float16(1e-8) is 0), or "
    "the update computed but never written back to the parameter", parameter_unmoved, tight=True)


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else str(dtype)


def _as_float(value: Any) -> np.ndarray:
    array = to_numpy(value)
    return np.asarray(array, dtype=np.float64)


def distance(outputs: Mapping[str, Any], other: Mapping[str, Any], names: Iterable[str]) -> float:
    """Largest absolute difference over ``names`` (NaN equals NaN, inf equals the same inf; a NaN
    against a number, or a shape mismatch, is infinitely far)."""
    worst = 0.0
    for name in names:
        a, b = _as_float(outputs[name]), _as_float(other[name])
        if a.shape != b.shape:
            return float("inf")
        if not a.size:
            continue
        same = (np.isnan(a) & np.isnan(b)) | (a == b)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(same, 0.0, np.abs(a - b))
        diff = np.where(np.isnan(diff), np.inf, diff)
        worst = max(worst, float(diff.max()))
    return worst


def _close(outputs: Mapping[str, Any], expected: Mapping[str, Any], names: list[str],
           tolerances: Mapping[str, Tolerance | None]) -> bool:
    try:
        compare_outputs(outputs, {name: expected[name] for name in names}, tolerances, against="a model")
    except Mismatch:
        return False
    except Exception:  # noqa: BLE001 - outputs that cannot even be compared do not match
        return False
    return True


def _quantized(values: Mapping[str, Any], names: list[str], dtype: str, exact: set[str]) -> dict[str, Any]:
    return {name: (values[name] if name in exact else quantize(_as_float(values[name]), dtype)) for name in names}


def diagnose(op: Any, inputs: Any, outputs_or_error: Any, dtype: Any,
             run: Callable[[Any], Any] | None = None) -> Mistake | None:
    """The known mistake of ``op`` (``op.mistakes``) that explains this failing run, or None.

    ``outputs_or_error``: the implementation's outputs (a dict), the exception it raised, or a
    zero-argument callable that runs it (called here, once). ``dtype``: the item's dtype (name or
    ``torch.dtype``). ``run(inputs)`` runs the implementation on other inputs (an error mistake's
    control); without it the controls are not run. Never raises for a model's sake: a model that fails on these inputs is skipped."""
    mistakes = tuple(op.mistakes)
    if not mistakes:
        return None
    dtype = _dtype_name(dtype)
    outputs = outputs_or_error
    if callable(outputs) and not isinstance(outputs, Mapping):
        try:
            outputs = outputs()
        except Unsupported:
            return None
        except Exception as exc:  # noqa: BLE001 - an error is what some mistakes look like
            outputs = exc
    try:
        reference: Any = op.reference(inputs)
    except Exception as exc:  # noqa: BLE001 - the documented behaviour is an error here
        reference = exc
    if isinstance(outputs, BaseException):
        return _error_mistake(mistakes, inputs, outputs, reference, run)
    if not isinstance(outputs, Mapping):
        return None
    exact = set(op.exact_outputs)
    tolerances: dict[str, Tolerance | None] = {}  # the item's, made the first time a model needs them

    def item(names: list[str]) -> dict[str, Tolerance | None]:
        if not tolerances:
            tolerances.update(item_tolerances.for_diagnosis(op, inputs, dtype, outputs))
        return {name: tolerances[name] for name in names}

    matched = [match for index, mistake in enumerate(mistakes)
               if (match := _model_match(index, mistake, inputs, outputs, reference, dtype, exact, item)) is not None]
    return _named_among(matched)


# a mistake whose model explains the outputs: (distance to the model, its index in the catalogue,
# the mistake, the model's outputs compared, the item's tolerances on them)
_Match = tuple[float, int, Mistake, Mapping[str, Any], dict]


def _error_mistake(mistakes: tuple[Mistake, ...], inputs: Any, error: BaseException, reference: Any,
                   run: Callable[[Any], Any] | None) -> Mistake | None:
    """The first mistake that shows as ``error`` on these inputs (and whose control returns), or
    None; none when the reference raises too."""
    if isinstance(reference, BaseException):
        return None
    for mistake in mistakes:
        if mistake.raises is not None and _safe(mistake.raises, inputs, error) and \
                _control_returns(mistake, inputs, run):
            return mistake
    return None


def _model_match(index: int, mistake: Mistake, inputs: Any, outputs: Mapping[str, Any], reference: Any,
                 dtype: str, exact: set[str], item: Callable[[list[str]], dict]) -> _Match | None:
    """``mistake``'s model as a match of ``outputs``: close to them within the item's tolerance (or
    bit for bit, a tight model), not close to the reference, and nearer the outputs than it; or None."""
    if mistake.model is None:
        return None
    takes_dtype = mistake.tight or mistake.takes_dtype
    modelled = _safe(mistake.model, inputs, dtype) if takes_dtype else _safe(mistake.model, inputs)
    if not isinstance(modelled, Mapping):
        return None
    names = [name for name in modelled if name in outputs
             and (isinstance(reference, BaseException) or name in reference)]
    if not names:
        return None
    if mistake.tight:
        tolerances = item_tolerances.tight(names, exact)
        modelled = _quantized(modelled, names, dtype, exact)
    else:
        tolerances = item(names)
    if not _close(outputs, modelled, names, tolerances):
        return None
    to_model = distance(outputs, modelled, names)
    if not isinstance(reference, BaseException):
        correct = _quantized(reference, names, dtype, exact) if mistake.tight else reference
        if _close(modelled, correct, names, tolerances):
            return None  # on this example the mistake gives the right answer: it cannot be told apart
        if not to_model < distance(outputs, reference, names):
            return None
    return (to_model, index, mistake, {name: modelled[name] for name in names}, item(names))


def _named_among(matched: list[_Match]) -> Mistake | None:
    """The mistake to name among those whose models match: the nearest, unless one listed before it
    gives the same outputs on this example."""
    if not matched:
        return None
    best = min(matched, key=lambda entry: (entry[0], entry[1]))
    # two mistakes that give the same outputs on this example (within the item's tolerance) cannot be
    # told apart by it: the one the catalogue lists first (the commoner) is named, not whichever of
    # the two rounding noise happens to put closer (square-then-sum in bfloat16 is not "one update
    # per duplicate entry" because the per-entry model's parameter lies nearer by a fraction of an ulp)
    for _, index, mistake, modelled, tolerances in sorted(matched, key=lambda entry: entry[1]):
        if index >= best[1]:
            break
        shared = [name for name in modelled if name in best[3]]
        if shared and _close(best[3], modelled, shared, tolerances):
            return mistake
    return best[2]


def _control_returns(mistake: Mistake, inputs: Any, run: Callable[[Any], Any] | None) -> bool:
    if mistake.control is None or run is None:
        return True
    control = _safe(mistake.control, inputs)
    if control is None:
        return True
    try:
        run(control)
    except Exception:  # noqa: BLE001 - it raises without the trigger too
        return False
    return True


def _safe(function: Callable, *args: Any) -> Any:
    try:
        return function(*args)
    except Exception:  # noqa: BLE001 - a model that cannot run on these inputs explains nothing
        return None


def annotated(failure: BaseException, found: Mistake) -> BaseException:
    """``failure`` with the diagnosis as its last line: a Mismatch (a failure) is rebuilt with it,
    keeping its errors; any other exception (an error) keeps its type and traceback and gets the
    line as a note (Python 3.11+; the record has it either way)."""
    if isinstance(failure, Mismatch):
        rebuilt = Mismatch(f"{str(failure).rstrip()}\n  {found.line}", failure.max_abs_error, failure.max_rel_error)
        rebuilt.__cause__ = failure.__cause__
        return rebuilt
    if hasattr(failure, "add_note"):
        failure.add_note(found.line)
    return failure


def _same_runs(first: Mapping[str, Any], second: Mapping[str, Any]) -> bool:
    """Whether two runs' outputs are the same: bit for bit (NaN equal to NaN) where they are on the
    cpu; within the agreement of half an ulp's worth of the dtype's default tolerance on other
    devices, whose kernels may sum in another order from run to run (atomics)."""
    if set(first) != set(second):
        return False
    for name in first:
        a, b = first[name], second[name]
        if not (hasattr(a, "shape") or hasattr(b, "shape")):
            if not (a == b or (a != a and b != b)):
                return False
            continue
        on_device = any(getattr(getattr(v, "device", None), "type", "cpu") != "cpu" for v in (a, b))
        x, y = _as_float(a), _as_float(b)
        if x.shape != y.shape:
            return False
        if on_device:
            if not _close({name: x}, {name: y}, [name], {name: item_tolerances.same_runs(getattr(a, "dtype", "float64"))}):
                return False
        elif not same_bits(x, y).all():
            return False
    return True


def nondeterministic(inputs: Any, run: Callable[[Any], Any] | None) -> bool:
    """Whether ``run`` gives different outputs on two runs of the same ``inputs`` (each on its own
    copy): what a failing check that compares separate runs is first asked. False when it cannot
    tell (no ``run``, or a run raises)."""

    if run is None:
        return False
    try:
        first, second = run(copy.deepcopy(inputs)), run(copy.deepcopy(inputs))
    except Exception:  # noqa: BLE001 - an error is not a difference between runs
        return False
    if not isinstance(first, Mapping) or not isinstance(second, Mapping):
        return False
    try:
        return not _same_runs(first, second)
    except Exception:  # noqa: BLE001
        return False


def looks_like(op: Any, inputs: Any, outputs_or_error: Any, dtype: Any, record: dict | None,
               failure: BaseException, run: Callable[[Any], Any] | None = None) -> BaseException:
    """The judging code's hook: diagnose a failing item, put ``looks_like`` in its ``record`` and
    return ``failure`` with the "looks like: ..." line added (``failure`` itself when no known
    mistake explains it). An implementation whose two runs of the same inputs differ is
    ``nondeterministic`` before any model is tried. Never raises for the diagnosis's sake."""
    try:
        found = NONDETERMINISTIC if nondeterministic(inputs, run) else diagnose(op, inputs, outputs_or_error, dtype, run)
    except Exception:  # noqa: BLE001 - a diagnosis never replaces the failure
        found = None
    if found is None:
        return failure
    if record is not None:
        record[RECORD_FIELD] = found.record
    return annotated(failure, found)


def looks_like_example(op: Any, cases: Iterable[tuple[str, Any]], run: Callable[[Any], Any], dtype: Any) -> Mistake | None:
    """The known mistake one failing generated example shows: each of the op inputs the example
    stands for (``(label, inputs)``, from the property's ``to_cases``) is run again with ``run``
    and diagnosed; the first one a model explains names it. First of all, each is run twice: an
    implementation whose runs of the same inputs differ is :data:`NONDETERMINISTIC` -- the likely
    cause of any failure of a property that compares separate runs."""
    cases = list(cases)
    for _, inputs in cases:
        if nondeterministic(inputs, run):
            return NONDETERMINISTIC
    for _, inputs in cases:
        try:
            found = diagnose(op, inputs, lambda inputs=inputs: run(inputs), dtype, run)
        except Exception:  # noqa: BLE001
            found = None
        if found is not None:
            return found
    return None
