"""Generated differential cases: properties checked on Hypothesis-drawn inputs.

A :class:`Property` names an op, a strategy of that op's decoded inputs (see
:mod:`conformance.cases.strategies`) and a check that runs a backend through the same
``backend.run`` / ``check_invariants`` / ``compare_outputs`` code as the spec cases.
:func:`run_property` searches one property on one backend, device and dtype and returns a
:class:`PropertyResult`: passed, failed or error (with the shrunk counterexample), unsupported,
or passed-with-known-divergences (the caller reports those as xfail).

Tolerances (:func:`tolerances`) scale with the work done: with the dtype's unit roundoff, the
number of steps and duplicates, the magnitudes involved, and how far the same formulas evaluated
in the dtype land from the float64 reference. An output outside them is checked against models of
known divergences (:mod:`conformance.divergences`) -- stock torch's half-precision arithmetic
(:mod:`conformance.cases.lowprec`) and particular backends' documented idioms and rounding modes;
when it matches
one, the example is recorded as that divergence with its reason -- never a silent pass and never
a failure -- and the search goes on.
"""

from __future__ import annotations

import copy
import hashlib
import os
import pickle
import re
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from conformance import diagnosis
from conformance.cases import lowprec
from conformance.types import RunContext, Unsupported
from conformance.backends.base import Backend
from conformance.compare import Mismatch, Tolerance, assert_bits_equal, compare_outputs
from conformance.divergences import STOCK_TORCH, Divergence, lookup
from conformance.dtypes import DTYPES, HALF_DTYPES
from conformance.ops import OPS, GeneratedProperty, Op
from conformance.ops.optimizers import (
    OptimizerInputs,
    ParamGroupsInputs,
    dense_grad_and_mask,
    densified,
    run_optimizer,
    run_param_groups,
)
from conformance.tensors import CooArray, quantize, to_numpy, torch_dtype
from conformance.rounding import check_rounding
from conformance.verdict import (Judgement, SameAsTorch, StockTorch, Verdict, agreement_tolerance, agrees, differs,
                                 distance, judge, torch_opinion)

# ---------------------------------------------------------------- tolerances (Op.generated_tolerances)


def _rounding_sensitivity(op: Op, inputs: OptimizerInputs, dtype: str, reference: dict) -> dict[str, float]:
    """How far a correct implementation of the same formulas, evaluated in ``dtype``, lands from
    the float64 reference: torch's algorithm replayed with every stored tensor rounded to
    ``dtype`` and duplicates summed in float32 (float64 for float64). This catches the
    ill-conditioned cases a formula cannot: SparseAdam's ``v + (g*g - v) * (1 - beta2)`` cancels
    when beta2 = 0 and the old v is large, and the parameter inherits the relative error.
    Non-finite differences (float16 eps/g**2 underflow) are left to the known-divergence models."""
    try:
        emulated = lowprec.emulate(op, inputs, dtype, accumulate="float64" if dtype == "float64" else "float32")
    except Exception:  # noqa: BLE001 - no model for this input: no widening
        return {}
    result = {}
    for name, value in reference.items():
        a, b = np.asarray(value, dtype=np.float64), np.asarray(emulated.get(name), dtype=np.float64)
        if a.shape != b.shape or not a.size:
            continue
        with np.errstate(invalid="ignore"):
            diff = np.abs(a - b)
        diff = diff[np.isfinite(diff)]
        result[name] = float(diff.max()) if diff.size else 0.0
    return result


def tolerances(op: Op, inputs: Any, dtype: str, reference: dict | None = None) -> dict[str, Tolerance | None]:
    """Per-output tolerance for comparing a ``dtype`` backend with the float64 reference: the op
    record's (``Op.generated_tolerances``), widened for the optimizers by
    :func:`_rounding_sensitivity` (ill-conditioned trajectories). None means exact."""
    def sensitivity() -> dict[str, float]:
        return _rounding_sensitivity(op, inputs, dtype, reference if reference is not None else op.reference(inputs))

    return op.generated_tolerances(inputs, dtype, sensitivity)


def widest(tols: dict[str, Tolerance | None]) -> Tolerance:
    """One tolerance covering every output (what a spec case's single ``tolerance`` can say)."""
    values = [t for t in tols.values() if t is not None]
    return Tolerance(max((t.rtol for t in values), default=0.0), max((t.atol for t in values), default=0.0))


# ---------------------------------------------------------------- outcomes of one example

class DivergenceObserved(Exception):
    """An example on which the backend matched stock torch's documented low-precision behaviour
    (see :mod:`conformance.cases.lowprec`) but not the float64 reference."""

    def __init__(self, divergence: Divergence, detail: str):
        super().__init__(f"{divergence.reason} ({detail})")
        self.divergence = divergence
        self.detail = detail


@dataclass
class Trial:
    """One property on one backend, device and dtype: runs the backend and compares outputs."""

    op: Op
    backend: Backend
    device: str
    dtype: str

    def run(self, inputs: Any) -> dict[str, Any]:
        return self.backend.run(self.op.name, inputs, RunContext(self.device, torch_dtype(self.dtype)))

    def reference(self, inputs: Any) -> dict[str, Any]:
        return self.op.reference(inputs)

    def tolerances(self, inputs: Any) -> dict[str, Tolerance | None]:
        return tolerances(self.op, inputs, self.dtype)

    def emulate(self, inputs: Any) -> dict[str, np.ndarray]:
        """Stock torch's result in this dtype, the way torch rounds (:func:`lowprec.emulate`)."""
        return lowprec.emulate(self.op, inputs, self.dtype)

    def excuse(self, runs: list[tuple[Any, dict]], mismatch: Mismatch) -> None:
        """Raise DivergenceObserved when every ``(inputs, outputs)`` run matches one and the same
        known divergence of this backend; return (and let ``mismatch`` stand) otherwise."""
        found = None
        for inputs, outputs in runs:
            divergence = self.known_divergence(inputs, outputs, self.tolerances(inputs))
            if divergence is None or (found is not None and divergence != found):
                return
            found = divergence
        if found is not None:
            raise DivergenceObserved(found, str(mismatch).splitlines()[0]) from None

    def compare(self, outputs: dict, expected: dict, tols: dict, inputs: Any, against: str,
                model: Callable[[], dict] | None = None) -> None:
        """compare_outputs; on a Mismatch, ask whether a known divergence explains it -- this
        backend's documented idiom (a registered divergence with a model) or stock torch's
        low-precision arithmetic (``model`` gives torch's result in this dtype) -- before failing."""
        try:
            compare_outputs(outputs, expected, tols, against=against)
        except Mismatch as mismatch:
            if self.backend.judged_against_torch:
                raise  # a candidate is excused only by being the same as stock torch (same_as_torch)
            divergence = self.known_divergence(inputs, outputs, tols, names=list(expected), lowprec_model=model)
            if divergence is None:
                raise
            raise DivergenceObserved(divergence, str(mismatch).splitlines()[0]) from None

    def known_divergence(self, inputs: Any, outputs: dict, tols: dict, names: list[str] | None = None,
                         lowprec_model: Callable[[], dict] | None = None) -> Divergence | None:
        """The known divergence whose model these outputs match (on ``names``), or None."""
        if self.backend.name == "reference":
            return None
        models: list[tuple[Divergence, Callable[[], dict]]] = [
            (entry, lambda entry=entry: entry.model(inputs)) for entry in self.idioms()]
        half = lowprec.explain(self.op, inputs, self.dtype)
        if half is not None:
            models.append((half, lowprec_model or (lambda: lowprec.emulate(self.op, inputs, self.dtype))))
        for divergence, make_model in models:
            modelled = make_model()
            wanted = {k: v for k, v in modelled.items() if names is None or k in names}
            try:
                compare_outputs(outputs, wanted, tols, against=f"the model of {divergence.key}")
            except Mismatch:
                continue
            return divergence
        return None

    def idioms(self) -> list[Divergence]:
        """The registered divergences of this backend's own idioms here, with their models."""
        found = lookup(op=self.op.name, backend=self.backend.name, device=self.device, dtype=self.dtype)
        return [entry for entry in found if entry.model is not None and not entry.is_torch_behaviour]


def specified_mask(grad: CooArray | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return dense_grad_and_mask(grad, shape)[1]


# ---------------------------------------------------------------- properties

@dataclass(frozen=True)
class Property:
    """A generated check: ``check(trial, example)`` raises Mismatch when the backend is wrong."""

    op: str
    name: str
    summary: str
    strategy: Callable[[str], st.SearchStrategy]
    check: Callable[[Trial, Any], None]
    skip_backends: tuple[str, ...] = ()
    dtypes: tuple[str, ...] | None = None  # None: every float dtype
    # dtype -> examples run before Hypothesis draws any (its explicit examples)
    examples: Callable[[str], list] = field(default=lambda dtype: [])
    # the op inputs an example stands for, (label, inputs) per case (two for the pairwise properties)
    to_cases: Callable[[Any, str], list[tuple[str, Any]]] = field(default=lambda example, dtype: [("", example)])
    needs_optimizer_object: bool = False  # only backends with Backend.optimizer_class get items
    candidates_only: bool = False  # only backends judged against torch (candidates) get items
    # what the three-way verdict compares between a candidate and stock torch when both miss the
    # property (None: the outputs of each of the example's cases, run alone)
    observe: Callable[[Trial, Any], dict[str, Any]] | None = None

    @property
    def id(self) -> str:
        return f"{self.op}-{self.name}"


def check_agrees_with_reference(trial: Trial, inputs: Any) -> None:
    outputs = trial.run(inputs)
    trial.op.check_invariants(outputs, inputs)
    reference = trial.reference(inputs)
    trial.compare(outputs, reference, tolerances(trial.op, inputs, trial.dtype, reference), inputs,
                  against="the NumPy reference")


# optimizers



def check_unspecified_unchanged(trial: Trial, inputs: OptimizerInputs) -> None:
    """Step by step (running each prefix of the trajectory): entries a step's gradient does not
    specify keep the parameter's and the state's exact bits through that step."""
    names = ("param", *trial.op.state_tensors)
    previous = {name: to_numpy(value) for name, value in trial.op.state_before_steps(trial.run, inputs).items()}
    for step in range(1, inputs.steps + 1):
        outputs = trial.run(OptimizerInputs(inputs.param, inputs.grads[:step], inputs.hyperparameters))
        untouched = ~specified_mask(inputs.grads[step - 1], inputs.param.shape)
        for name in names:
            if name not in outputs:
                raise Mismatch(f"the backend did not produce {name}")
            assert_bits_equal(f"{name} after step {step}", outputs[name], previous[name], untouched,
                              against=f"its value before step {step} at entries step {step}'s gradient does not specify")
        previous = {name: to_numpy(outputs[name]) for name in names}


def check_sparse_equals_dense(trial: Trial, inputs: OptimizerInputs) -> None:
    """The optimizer on sparse gradients equals itself on dense ones (the same backend, each sparse
    gradient densified) at every entry some step specifies."""
    sparse_out = trial.run(inputs)
    dense_inputs = densified(inputs, trial.dtype)
    dense_out = trial.run(dense_inputs)
    touched = np.zeros(inputs.param.shape, dtype=bool)
    for grad in inputs.grads:
        touched |= specified_mask(grad, inputs.param.shape)
    names = ("param", *trial.op.state_tensors)
    title = trial.op.title
    pick = {name: to_numpy(sparse_out[name])[touched] for name in names}
    want = {name: to_numpy(dense_out[name])[touched] for name in names}
    tols = tolerances(trial.op, inputs, trial.dtype)

    def model():
        emulated, dense_emulated = trial.emulate(inputs), trial.emulate(dense_inputs)
        # both runs must match stock torch's float16/bfloat16 arithmetic for the divergence to apply
        compare_outputs({n: want[n] for n in names}, {n: dense_emulated[n][touched] for n in names}, tols,
                        against=f"dense {title} in stock torch's arithmetic")
        return {n: emulated[n][touched] for n in names}

    trial.compare(pick, want, tols, inputs, against=f"dense {title} on the densified gradients (same backend)",
                  model=model)


def check_rounds_correctly(trial: Trial, inputs: Any) -> None:
    """float16/bfloat16 outputs are the exact result rounded to nearest even, give or take the
    float32 arithmetic before it (:mod:`conformance.rounding`); stock torch's own known
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
                raise
            raise DivergenceObserved(divergence, str(mismatch).splitlines()[0]) from None


def _rounding_divergence(trial: Trial, inputs: Any, name: str, got, dtype) -> Divergence | None:
    """The known divergence an incorrectly rounded output is explained by: this backend's own
    rounding mode, or stock torch's half-precision accumulation of duplicates (any order)."""
    if trial.backend.name == "reference" or trial.backend.judged_against_torch:
        return None  # a candidate is excused only by being the same as stock torch (same_as_torch)
    found = lookup(backend=trial.backend.name, device=trial.device, dtype=trial.dtype)
    rounding = next((entry for entry in found if entry.rounding is not None), None)
    if rounding is not None:
        exact, low, high = trial.op.rounding_bounds(inputs, dtype)[name]
        try:
            check_rounding(name, got, exact, low, high, dtype, mode=rounding.rounding)
            return rounding
        except Mismatch:
            pass
    if trial.op.torch_sums_duplicates_in_half:
        half = lowprec.HALF_ACCUMULATION
        exact, low, high = trial.op.rounding_bounds(inputs, dtype, accumulation_unit=DTYPES[dtype].unit_roundoff)[name]
        try:
            check_rounding(name, got, exact, low, high, dtype)
            return half
        except Mismatch:
            pass
    return None


def check_rejects_invalid(trial: Trial, inputs: Any) -> None:
    """The backend raises the documented error (the reference's exception type and message)."""
    try:
        trial.reference(inputs)
    except Exception as expected:
        wanted_type, wanted_message = type(expected).__name__, str(expected)
    else:
        raise RuntimeError(f"harness: the strategy drew inputs the reference accepts: {inputs!r}")
    try:
        trial.run(inputs)
    except Unsupported:
        raise
    except Exception as exc:
        if not any(cls.__name__ == wanted_type for cls in type(exc).__mro__):
            raise Mismatch(f"expected {wanted_type}({wanted_message!r}), but {type(exc).__name__} was raised: "
                           f"{exc}") from exc
        if str(exc) != wanted_message:
            raise Mismatch(f"expected {wanted_type}({wanted_message!r}), but the message was {str(exc)!r}") from exc
        return
    raise Mismatch(f"expected {wanted_type}({wanted_message!r}), but nothing was raised")


def _assert_same_runs(trial: Trial, name: str, got, want, against: str) -> None:
    """Bit for bit on cpu; within :func:`conformance.verdict.agreement_tolerance` on other devices,
    whose kernels may sum in a different order from run to run (atomics)."""
    if trial.device == "cpu":
        assert_bits_equal(name, got, want, None, against=against)
        return
    compare_outputs({name: got}, {name: want}, {name: agreement_tolerance(trial.dtype)}, against=against)


def _state_names(op: Op) -> list[str]:
    return ["param", *op.state_outputs]


def _grouped_runs(trial: Trial, inputs: ParamGroupsInputs, resume_after: int | None = None):
    """(the grouped run's member outputs, its idle parameters, each member run alone)."""
    ctx = RunContext(trial.device, torch_dtype(trial.dtype))
    op = trial.op

    def runs(optimizer_class):
        together, idle = run_param_groups(optimizer_class, inputs, ctx, op.state_outputs, resume_after=resume_after)
        alone = [run_optimizer(optimizer_class, member, ctx, op.state_outputs) for member in inputs.members]
        return together, idle, alone

    return trial.backend.drive_optimizer(op.name, ctx, runs)


def _flat_outputs(op: Op, members: list[dict]) -> dict[str, Any]:
    return {f"{name}[{index}]": outputs[name] for index, outputs in enumerate(members) for name in _state_names(op)}


def observe_param_groups(trial: Trial, inputs: ParamGroupsInputs) -> dict[str, Any]:
    return _flat_outputs(trial.op, _grouped_runs(trial, inputs)[0])


PARAM_GROUPS = "param-groups"  # the property (registered divergences name it)


def check_param_groups(trial: Trial, inputs: ParamGroupsInputs) -> None:
    """One optimizer over two param groups (different shapes, hyperparameters, one parameter without
    a gradient) moves each parameter exactly as an optimizer of its own would, and leaves the
    parameter without a gradient untouched."""
    together, idle, alone = _grouped_runs(trial, inputs)
    try:
        _assert_members_equal(trial, together, alone, against="an optimizer of its own for parameter {index}")
    except Mismatch as mismatch:
        divergence = _param_groups_divergence(trial, inputs, together)
        if divergence is None:
            raise
        raise DivergenceObserved(divergence, str(mismatch).splitlines()[0]) from None
    for index, (got, start) in enumerate(zip(idle, inputs.idle)):
        assert_bits_equal(f"the parameter without a gradient ({index})", got,
                          quantize(start, trial.dtype), None, against="its value before the steps")


def _assert_members_equal(trial: Trial, got: list[dict], want: list[dict], against: str) -> None:
    for index, (ours, theirs) in enumerate(zip(got, want)):
        for name in _state_names(trial.op):
            _assert_same_runs(trial, f"{name} of parameter {index}", ours[name], theirs[name],
                              against=against.format(index=index))


def _param_groups_divergence(trial: Trial, inputs: ParamGroupsInputs, together: list[dict]):
    """The known divergence of stock torch the backend's grouped run matches, or None. A candidate
    (judged against torch) is excused only where stock torch matches the same model."""
    found = lookup(op=trial.op.name, device=trial.device, dtype=trial.dtype, property=PARAM_GROUPS)
    for entry in (entry for entry in found if entry.model is not None):
        modelled = entry.model(inputs)
        if not _matches_group_model(trial, inputs, modelled, together, entry):
            continue
        if not trial.backend.judged_against_torch:
            return entry
        # a candidate is excused by behaving as stock torch does: torch must match the model too
        torch_trial = Trial(trial.op, StockTorch(), trial.device, trial.dtype)
        if _matches_group_model(torch_trial, inputs, modelled, _grouped_runs(torch_trial, inputs)[0], entry):
            return same_as_torch(entry)
    return None


def _matches_group_model(trial: Trial, inputs: ParamGroupsInputs, modelled: ParamGroupsInputs,
                         together: list[dict], entry) -> bool:
    alone = _grouped_runs(trial, modelled)[2]
    try:
        _assert_members_equal(trial, together, alone, against="the model of " + entry.key)
    except Mismatch:
        return False
    return True


def check_state_dict_resume(trial: Trial, example: tuple[ParamGroupsInputs, int]) -> None:
    """Saving ``state_dict()`` after step k (through torch.save/torch.load) and loading it into a
    fresh optimizer on fresh parameters continues the trajectory exactly as if never interrupted."""
    inputs, resume_after = example
    whole = _grouped_runs(trial, inputs)[0]
    resumed = _grouped_runs(trial, inputs, resume_after)[0]
    _assert_members_equal(trial, resumed, whole,
                          against=f"the uninterrupted run, parameter {{index}} (state_dict saved and loaded after "
                                  f"step {resume_after} of {inputs.steps})")


def _runs_side_by_side(first: dict, second: dict) -> str:
    """The two runs' outputs, one line each, for a nondeterminism report."""
    lines = []
    for name in sorted(set(first) | set(second)):
        a, b = first.get(name, "(missing)"), second.get(name, "(missing)")
        shown = [str(to_numpy(v).tolist() if hasattr(v, "shape") else v)[:200] for v in (a, b)]
        lines.append(f"  {name}:\n    run 1  {shown[0]}\n    run 2  {shown[1]}")
    return "\n".join(lines)


def check_deterministic(trial: Trial, inputs: Any) -> None:
    """The same inputs run twice give bit-for-bit the same outputs and state (cpu; within the
    agreement tolerance on devices whose kernels may sum in another order: atomics). A candidate
    that is not is reported as nondeterministic, with both runs side by side."""
    first = trial.run(copy.deepcopy(inputs))
    second = trial.run(copy.deepcopy(inputs))
    try:
        if set(first) != set(second):
            raise Mismatch(f"the two runs give different outputs: {sorted(first)} vs {sorted(second)}")
        for name in first:
            a, b = first[name], second[name]
            if hasattr(a, "shape") or hasattr(b, "shape"):
                _assert_same_runs(trial, name, a, b, against="the first run of the same inputs")
            elif a != b:
                raise Mismatch(f"{name} differs between two runs of the same inputs: {a!r} vs {b!r}")
    except Mismatch as mismatch:
        raise Mismatch(f"nondeterministic: the same inputs run twice give different results -- {mismatch}\n"
                       + _runs_side_by_side(first, second), mismatch.max_abs_error, mismatch.max_rel_error) from None


def _member_cases(inputs: ParamGroupsInputs, dtype: str):
    return [(f"param-{index}", member) for index, member in enumerate(inputs.members)]


def _dense_cases(inputs: OptimizerInputs, dtype: str):
    return [("sparse", inputs), ("densified", densified(inputs, dtype))]


# kernel-triton drives the very optimizer classes of kernel (conformance.kernels), which own the
# param groups and the state_dict; only the step kernel differs, and Triton's interpreter is slow
OPTIMIZER_OBJECT_TWINS = ("kernel-triton",)



@dataclass(frozen=True)
class Check:
    """A generic check an op record's :class:`GeneratedProperty` names (its ``check`` left None)."""

    check: Callable[[Trial, Any], None]
    to_cases: Callable[[Any, str], list[tuple[str, Any]]] | None = None
    skip_backends: tuple[str, ...] = ()
    dtypes: tuple[str, ...] | None = None
    needs_optimizer_object: bool = False
    observe: Callable[[Trial, Any], dict[str, Any]] | None = None
    candidates_only: bool = False


CHECKS: dict[str, Check] = {
    "agrees-with-reference": Check(check_agrees_with_reference, skip_backends=("reference",)),
    "rounds-correctly": Check(check_rounds_correctly, skip_backends=("reference",), dtypes=HALF_DTYPES),
    "rejects-invalid": Check(check_rejects_invalid),
    # the suite's own backends are stock torch and its documented idioms: their determinism is torch's
    # (and the main job's minute); a candidate is what may hold a race or an uninitialised buffer
    "deterministic": Check(check_deterministic, skip_backends=("reference",), candidates_only=True),
    "unspecified-unchanged": Check(check_unspecified_unchanged),
    "sparse-equals-dense": Check(check_sparse_equals_dense, to_cases=_dense_cases),
    PARAM_GROUPS: Check(check_param_groups, to_cases=_member_cases, skip_backends=OPTIMIZER_OBJECT_TWINS,
                          needs_optimizer_object=True, observe=observe_param_groups),
    "state-dict-resume": Check(check_state_dict_resume, to_cases=lambda example, dtype: _member_cases(example[0], dtype),
                               skip_backends=OPTIMIZER_OBJECT_TWINS, needs_optimizer_object=True,
                               observe=lambda trial, example: _flat_outputs(trial.op, _grouped_runs(trial, *example)[0])),
}


def _single_case(example: Any, dtype: str) -> list[tuple[str, Any]]:
    return [("", example)]


def property_of(op: Op, declared: GeneratedProperty) -> Property:
    """The runnable property an op record declares: its own check, or the generic one of that name."""
    examples = declared.examples
    if examples is None:
        examples = op.explicit_examples if declared.strategy == op.inputs_strategy else (lambda dtype: [])
    if declared.check is not None:
        return Property(op.name, declared.name, declared.summary, declared.strategy, declared.check,
                        skip_backends=declared.skip_backends, dtypes=declared.dtypes, examples=examples,
                        to_cases=declared.to_cases or _single_case)
    generic = CHECKS.get(declared.name)
    if generic is None:
        raise ValueError(f"op {op.name!r} declares property {declared.name!r} without a check, and no generic "
                         f"check has that name (known: {', '.join(CHECKS)})")
    return Property(op.name, declared.name, declared.summary, declared.strategy, generic.check,
                    skip_backends=(*generic.skip_backends, *declared.skip_backends), examples=examples,
                    dtypes=declared.dtypes or generic.dtypes,
                    to_cases=declared.to_cases or generic.to_cases or _single_case,
                    needs_optimizer_object=generic.needs_optimizer_object, observe=generic.observe,
                    candidates_only=generic.candidates_only)


PROPERTIES: list[Property] = [property_of(op, declared) for op in OPS.values() for declared in op.all_properties()]


# ---------------------------------------------------------------- searching

UNSUPPORTED_BUDGET = 25  # examples drawn before an item on which none can run is reported unsupported


class _NothingRuns(BaseException):
    """Ends a Hypothesis run whose first UNSUPPORTED_BUDGET examples were all unsupported
    (Hypothesis does not catch BaseException subclasses)."""


class _BudgetReached(BaseException):
    """Ends a search whose time budget ran out, between two examples (never inside one): the
    verdict stands on the examples that ran."""


class _TimedOut(BaseException):
    """pytest-timeout's timeout fired inside an example: carried past Hypothesis (which would
    replay the example, see it pass, and call the timeout a FlakyFailure) to the item, as itself."""

    def __init__(self, timeout: BaseException):
        super().__init__(str(timeout))
        self.timeout = timeout


class Nondeterministic(Mismatch):
    """The backend failed an example once and passed it when Hypothesis ran it again (Hypothesis'
    ``Flaky``): a nondeterministic implementation, reported as such -- never an internal error."""


def _is_pytest_timeout(exc: BaseException) -> bool:
    outcomes = __import__("sys").modules.get("_pytest.outcomes")
    return outcomes is not None and isinstance(exc, outcomes.Failed) and str(exc).startswith("Timeout")


SAME_AS_TORCH = Divergence(
    "same-as-torch",
    "the result is the same as stock torch's on the same inputs, and torch itself misses the property here",
    None, behaviour=STOCK_TORCH,
)


def same_as_torch(divergence: Divergence) -> Divergence:
    """``divergence`` as a candidate shows it: the same as stock torch."""
    return replace(divergence, reason=f"same as torch: {divergence.reason}")


@dataclass
class PropertyResult:
    examples: int = 0
    unsupported_examples: int = 0
    improvements: int = 0  # examples a candidate gets right where stock torch does not
    divergences: Counter = field(default_factory=Counter)
    divergence_details: dict = field(default_factory=dict)
    unsupported: Unsupported | None = None
    first_unsupported: Unsupported | None = None
    failure: BaseException | None = None
    failing_example: Any = None
    seed: int | None = None
    looks_like: Any = None  # the known mistake (conformance.diagnosis.Mistake) the failing example shows
    budget: float | None = None  # seconds the search may take (None: no limit)
    budget_reached: bool = False  # the search stopped between two examples when the budget ran out
    last_failure: BaseException | None = None  # what the latest failing example raised (shrinking: the smallest)
    narrowed: str | None = None  # how the input space was narrowed to what the backend supports (Narrowing)

    @property
    def budget_note(self) -> str | None:
        """"budget reached after N examples (S s)" when the search was cut short, else None."""
        if not self.budget_reached:
            return None
        return (f"budget reached after {self.examples} examples ({self.budget:g} s; --conformance-budget): the "
                f"verdict stands on those")


def _agreement(prop: Property, trial: Trial, torch_trial: Trial, example: Any, seen: dict) -> bool:
    """Whether the backend's outputs on ``example`` are stock torch's (within
    :func:`conformance.verdict.agreement_tolerance`): the property's own observation (``observe``),
    else each of the example's cases run alone. Leaves in ``seen`` what the verdict's messages
    need: the outputs compared and their tolerances, or how far apart they are."""
    tolerance = agreement_tolerance(trial.dtype)
    if prop.observe is not None:  # the property's own outputs, not its cases' single runs
        runs = [lambda: (prop.observe(trial, example), prop.observe(torch_trial, example))]
    else:
        runs = [lambda inputs=inputs: (trial.run(inputs), torch_trial.run(inputs))
                for _, inputs in prop.to_cases(example, trial.dtype)]
    seen["runs"] = len(runs)
    for run in runs:
        try:
            ours, theirs = run()
        except Exception:  # noqa: BLE001 - one of them raises on these inputs: not the same behaviour
            return False
        tols = {name: (None if name in trial.op.exact_outputs else tolerance) for name in theirs}
        if not agrees(ours, theirs, tols, list(theirs)):
            seen["note"] = f"misses the property too, but differently (max abs difference {distance(ours, theirs):.6g})"
            return False
        seen.update(ours=ours, tols=tols)
    return True


def three_way(prop: Property, trial: Trial, torch_trial: Trial, example: Any, failure: Mismatch | None) -> Judgement:
    """The three-way verdict (:func:`conformance.verdict.judge`, the one judging core) on one
    generated example: stock torch runs the same property on the same example
    (:func:`conformance.verdict.torch_opinion`). Returns the judgement (``improvement`` where the
    backend has the property and torch does not); raises DivergenceObserved when the backend misses
    the property exactly as torch does, and the failure (:func:`conformance.verdict.differs`, torch's
    account beside it) when it differs."""
    torch_run = torch_opinion(lambda: prop.check(torch_trial, example))
    seen: dict = {}
    try:
        judgement = judge(failure, torch_run, lambda: _agreement(prop, trial, torch_trial, example, seen), None)
    except SameAsTorch:
        single = prop.observe is None and seen.get("runs") == 1
        explained = trial.known_divergence(prop.to_cases(example, trial.dtype)[0][1], seen["ours"],
                                           seen["tols"]) if single else None
        divergence = explained or SAME_AS_TORCH
        raise DivergenceObserved(same_as_torch(divergence), str(failure).splitlines()[0]) from None
    if judgement.verdict is Verdict.DIFFERS:
        note = "has the property" if torch_run is not None and torch_run.conforms else seen.get("note")
        raise differs(failure, torch_run, on="example", torch_note=note) from None
    return judgement


UNSUPPORTED_OPTIONS_ATTRIBUTE = "unsupported_options"


def declared_unsupported_options(op: Op, backend: Backend) -> frozenset[str]:
    """The options a candidate declares it cannot do (``unsupported_options`` on its class or
    function, e.g. ``{"lr_decay", "maximize"}``); empty for other backends. A name that is not an
    option of the op is an error naming it."""
    candidate = (getattr(backend, "candidates", None) or {}).get(op.name)
    declared = getattr(candidate, UNSUPPORTED_OPTIONS_ATTRIBUTE, None) or ()
    if isinstance(declared, str):
        declared = (declared,)
    unknown = sorted(set(declared) - set(op.option_names()))
    if unknown:
        raise ValueError(f"{getattr(candidate, '__qualname__', candidate)}.{UNSUPPORTED_OPTIONS_ATTRIBUTE} names "
                         f"{', '.join(map(repr, unknown))}, not an option of {op.name} (its options: "
                         f"{', '.join(op.option_names()) or 'none'})")
    return frozenset(declared)


@dataclass
class Narrowing:
    """The options a backend cannot do, drawn at torch's default from then on: declared
    (``unsupported_options``) or learned from an Unsupported whose message names an option the
    example set. Every example is mapped through :meth:`apply`, so the search keeps its full
    example count within the supported subset instead of rejecting nearly every draw."""

    op: Op
    declared: frozenset = frozenset()
    learned: list = field(default_factory=list)
    keep_invalid: bool = False  # rejects-invalid: an example whose only error is an unsupported option stays

    @property
    def options(self) -> frozenset:
        return self.declared | frozenset(self.learned)

    def apply(self, example: Any) -> Any:
        options = self.options
        if not options:
            return example
        pinned = self.op.at_torch_defaults(example, options)
        if self.keep_invalid and pinned is not example:
            try:
                self.op.reference(pinned)
            except Exception:  # noqa: BLE001 - still the documented error: the narrowed example
                return pinned
            return example  # its error is the unsupported option itself: the backend says so (unsupported)
        return pinned

    def learn(self, unsupported: BaseException, example: Any) -> bool:
        """Learn the options ``unsupported``'s message names that ``example`` sets; whether any was new."""
        text = str(unsupported)
        named = [name for name in self.op.option_names() if name not in self.options
                 and re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text)
                 and self.op.at_torch_defaults(example, frozenset([name])) is not example]
        self.learned += named
        return bool(named)

    def describe(self) -> str | None:
        """"narrowed: lr_decay, maximize at torch's default (...)", or None when nothing was narrowed."""
        if not self.options:
            return None
        how = []
        if self.declared:
            how.append(f"declared {UNSUPPORTED_OPTIONS_ATTRIBUTE}")
        if self.learned:
            how.append(f"learned from Unsupported: {', '.join(self.learned)}")
        return f"narrowed: {', '.join(sorted(self.options))} at torch's default ({'; '.join(how)})"


def derive_seed(base_seed: int, prop: Property, dtype: str) -> int:
    """Per-item seed: the same for every backend and device, so all of them see the same examples."""
    digest = hashlib.sha256(f"{base_seed}:{prop.id}:{dtype}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


class DrawnExamples:
    """The examples each clean run drew, kept so that the next backend replays them.

    Every backend of a property and dtype gets the same seed (:func:`derive_seed`), so Hypothesis
    draws each of them the very same examples. In a deterministic run (a fixed seed, no example
    database, no reuse or target phase) the examples of a *clean* run -- each one ran and passed,
    none was rejected -- are exactly the ones Hypothesis would draw for the next backend as long as
    that backend passes them all too. So the next backend replays them instead of drawing them
    again (drawing is most of a generated item's time). Any other outcome on a replayed example --
    a mismatch, an error, an unsupported example -- throws the replay away and runs the item under
    Hypothesis, which draws the same examples again, keeps drawing past unsupported ones and
    shrinks a failure: the verdict is the one Hypothesis alone would give.

    They are kept in memory, and with ``directory`` set (pytest-xdist: one folder of the run's,
    :mod:`conformance.run.generated_plugin`) also as files, so that one worker replays what another
    drew. A file that cannot be written or read is no replay: Hypothesis draws instead.
    """

    def __init__(self, capacity: int = 1024, directory: Path | None = None):
        self.capacity = capacity
        self.directory = directory
        self.runs: dict[tuple, list] = {}
        self.replayed = 0  # items answered from a replay (for the harness's own tests)

    @staticmethod
    def key(prop: Property, dtype: str, settings, base_seed: int, narrowed: frozenset = frozenset()) -> tuple | None:
        """The runs a replay stands for, or None where Hypothesis's search is not deterministic."""
        from hypothesis import Phase

        phases = set(settings.phases)
        if settings.database is not None or Phase.reuse in phases or Phase.target in phases \
                or Phase.generate not in phases:
            return None
        key = prop.id, dtype, derive_seed(base_seed, prop, dtype), settings.max_examples
        return (*key, tuple(sorted(narrowed))) if narrowed else key

    def _file(self, key: tuple) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / (hashlib.sha256(repr(key).encode()).hexdigest()[:32] + ".pickle")

    def get(self, key: tuple | None) -> list | None:
        if key is None or self.capacity <= 0:
            return None
        if key not in self.runs and (path := self._file(key)) is not None and path.is_file():
            try:
                self._remember(key, pickle.loads(path.read_bytes()))  # noqa: S301 - this run's own file
            except Exception:  # noqa: BLE001 - half-written or unreadable: Hypothesis draws instead
                return None
        return self.runs.get(key)

    def keep(self, key: tuple | None, examples: list) -> None:
        if key is None or self.capacity <= 0:
            return
        self._remember(key, examples)
        path = self._file(key)
        if path is not None and not path.exists():
            partial = path.with_name(f".{path.name}.{os.getpid()}")
            try:
                partial.write_bytes(pickle.dumps(examples))
                os.replace(partial, path)  # atomic: a reader sees the whole file or none
            except Exception:  # noqa: BLE001 - no file, no replay elsewhere: nothing lost
                partial.unlink(missing_ok=True)

    def _remember(self, key: tuple, examples: list) -> None:
        if len(self.runs) >= self.capacity:
            self.runs.pop(next(iter(self.runs)))
        self.runs[key] = examples


DRAWN = DrawnExamples()


def run_property(prop: Property, backend: Backend, device: str, dtype: str, *, settings, base_seed: int,
                 database_key: str | None = None, budget: float | None = None) -> PropertyResult:
    """Search ``prop`` on one backend/device/dtype with Hypothesis under ``settings`` (replaying the
    examples of an earlier clean run of the same property and dtype where that gives the same verdict;
    see :class:`DrawnExamples`). With ``budget`` (seconds), the search stops between two examples once
    it has run that long, and the verdict stands on the examples that ran (``budget_reached``)."""
    deadline = time.monotonic() + budget if budget else None
    op = OPS[prop.op]
    trial = Trial(op, backend, device, dtype)
    torch_trial = None
    if backend.judged_against_torch and op.torch_implementation is not None:
        torch_trial = Trial(op, StockTorch(), device, dtype)
    narrowing = Narrowing(op, declared_unsupported_options(op, backend), keep_invalid=prop.name == "rejects-invalid")
    key = DRAWN.key(prop, dtype, settings, base_seed, narrowing.declared)
    drawn = DRAWN.get(key)
    if drawn is not None:
        replayed = PropertyResult(seed=base_seed, budget=budget)
        check = _example_check(prop, trial, torch_trial, replayed, replaying=True, deadline=deadline)
        try:
            for example in drawn:
                check(copy.deepcopy(example))
        except _BudgetReached:  # every example that ran passed: the verdict stands on them
            DRAWN.replayed += 1
            return replayed
        except _TimedOut as timed_out:
            raise timed_out.timeout from None
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001 - not clean: Hypothesis decides (and shrinks)
            pass
        else:
            DRAWN.replayed += 1
            return replayed
    result = PropertyResult(seed=base_seed, budget=budget)
    examples: list = []
    check = _example_check(prop, trial, torch_trial, result, record=examples if key is not None else None,
                           deadline=deadline, narrowing=narrowing)
    _search(prop, dtype, check, result, settings=settings, base_seed=base_seed, database_key=database_key,
            narrowing=narrowing)
    result.narrowed = narrowing.describe()
    if result.failure is not None and result.failing_example is not None:  # what the failure looks like
        result.looks_like = diagnosis.looks_like_example(op, prop.to_cases(result.failing_example, dtype), trial.run,
                                                         dtype)
        if result.looks_like is not None:
            result.failure = diagnosis.annotated(result.failure, result.looks_like)
    if result.failure is None and result.unsupported is None and result.unsupported_examples == 0 \
            and not result.budget_reached:  # a cut-short run is not what Hypothesis would draw in full
        DRAWN.keep(key, examples)
    return result


def _example_check(prop: Property, trial: Trial, torch_trial: Trial | None, result: PropertyResult, *,
                   record: list | None = None, replaying: bool = False,
                   deadline: float | None = None, narrowing: Narrowing | None = None) -> Callable[[Any], None]:
    """The check of one example, counted into ``result`` (and the example kept in ``record``); an
    unsupported example is rejected (Hypothesis draws another), or raised when ``replaying``. Past
    ``deadline`` (time.monotonic), the next example is not run: the search ends (_BudgetReached)."""
    from hypothesis import reject

    def observed(hit: DivergenceObserved, example) -> None:
        result.divergences[hit.divergence.key] += 1
        result.divergence_details.setdefault(hit.divergence.key, (hit.divergence, hit.detail, example))

    def generated_case(example):
        if deadline is not None and (result.examples or result.unsupported_examples) and time.monotonic() > deadline:
            result.budget_reached = True
            raise _BudgetReached()
        if record is not None and result.failing_example is None and not result.unsupported_examples:
            record.append(copy.deepcopy(example))  # before the backend sees it; only a clean run is kept
        try:
            prop.check(trial, example)
        except DivergenceObserved as hit:
            result.examples += 1
            observed(hit, example)
        except Unsupported as exc:  # this example only: Hypothesis draws another
            if replaying:
                raise
            result.unsupported_examples += 1
            result.first_unsupported = result.first_unsupported or exc
            if narrowing is not None and result.failing_example is None:
                narrowing.learn(exc, example)  # the next draws leave that option at torch's default
            if result.examples == 0 and result.unsupported_examples >= UNSUPPORTED_BUDGET:
                raise _NothingRuns() from None
            reject()
        except Mismatch as mismatch:
            result.examples += 1
            if torch_trial is not None:
                try:
                    three_way(prop, trial, torch_trial, example, mismatch)
                except DivergenceObserved as hit:  # the same as torch: the search goes on
                    observed(hit, example)
                    return
                except Mismatch as differs_from_both:
                    result.failing_example, result.last_failure = example, differs_from_both
                    raise differs_from_both from None
            result.failing_example, result.last_failure = example, mismatch
            raise
        except BaseException as exc:
            if _is_pytest_timeout(exc):
                raise _TimedOut(exc) from None
            result.examples += 1
            result.failing_example, result.last_failure = example, exc
            raise
        else:
            result.examples += 1
            if torch_trial is not None and three_way(prop, trial, torch_trial, example, None).verdict \
                    is Verdict.IMPROVEMENT:
                result.improvements += 1

    return generated_case


def _search(prop: Property, dtype: str, generated_case: Callable[[Any], None], result: PropertyResult, *,
            settings, base_seed: int, database_key: str | None, narrowing: Narrowing | None = None) -> None:
    """Hypothesis's search of ``prop`` for ``dtype`` with ``generated_case`` as the test; its end in ``result``."""
    from hypothesis import example, given
    from hypothesis.errors import Unsatisfiable

    def test_case(drawn):
        generated_case(drawn)

    test_case._hypothesis_internal_add_digest = (database_key or prop.id).encode()
    # a seed without the public @seed decorator, which would also switch the example database off
    test_case._hypothesis_internal_use_seed = derive_seed(base_seed, prop, dtype)
    strategy = prop.strategy(dtype)
    narrows = narrowing is not None and narrowing.op.option_names()
    if narrows:
        strategy = strategy.map(narrowing.apply)
    for explicit in reversed(prop.examples(dtype)):  # run in the order given, before any draw
        test_case = example(narrowing.apply(explicit) if narrows else explicit)(test_case)
    test = settings(given(strategy)(test_case))
    if getattr(test, "_hypothesis_internal_use_seed", None) is None:  # another Hypothesis version
        from hypothesis import seed

        test = seed(derive_seed(base_seed, prop, dtype))(test)
    from hypothesis.errors import Flaky

    try:
        test()
    except _NothingRuns:
        result.unsupported = result.first_unsupported
    except _BudgetReached:  # between two examples: a failure found so far stands (its smallest example yet)
        if result.failing_example is not None:
            result.failure = result.last_failure
        elif result.examples == 0 and result.first_unsupported is not None:
            result.unsupported = result.first_unsupported
    except _TimedOut as timed_out:
        raise timed_out.timeout from None
    except Flaky as flaky:
        timeout = next((e for e in getattr(flaky, "exceptions", ()) if _is_pytest_timeout(e)), None)
        if timeout is not None:  # the timeout fired inside Hypothesis' own code: the item timed out
            raise timeout from None
        result.failure = _nondeterministic(flaky, result)
    except Unsatisfiable:
        if result.examples == 0 and result.first_unsupported is not None:
            result.unsupported = result.first_unsupported  # no example could run at all
        else:
            raise
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) or _is_pytest_timeout(exc):
            raise
        result.failure = exc


def _nondeterministic(flaky: BaseException, result: PropertyResult) -> Nondeterministic:
    """Hypothesis' Flaky as what it says about the backend: the same example failed once and passed
    (or failed differently) when run again."""
    inner = next(iter(getattr(flaky, "exceptions", ()) or ()), None) or result.last_failure
    said = (str(inner).strip().splitlines() or [type(inner).__name__])[0] if inner is not None else ""
    return Nondeterministic(
        "nondeterministic: the backend failed an example and then passed it (or failed it differently) when the "
        f"same example ran again (Hypothesis: {type(flaky).__name__}); run the property 'deterministic' on it"
        + (f"\n  the first run: {type(inner).__name__}: {said}" if inner is not None else ""))


def describe_divergences(result: PropertyResult) -> str:
    parts = []
    for key, count in result.divergences.items():
        divergence, detail, _ = result.divergence_details[key]
        link = f" ({divergence.link})" if divergence.link else ""
        parts.append(f"{divergence.reason}{link} -- on {count} of {result.examples} examples; e.g. {detail}")
    return "; ".join(parts)


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")
