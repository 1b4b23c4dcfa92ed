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
known divergences -- stock torch's half-precision arithmetic (:mod:`conformance.cases.lowprec`) and
particular backends' documented idioms (:mod:`conformance.cases.known_divergences`); when it matches
one, the example is recorded as that divergence with its reason -- never a silent pass and never
a failure -- and the search goes on.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from hypothesis import strategies as st

from conformance.cases import known_divergences, lowprec, strategies
from conformance.types import RunContext, Unsupported
from conformance.backends.base import Backend
from conformance.compare import Mismatch, Tolerance, compare_outputs
from conformance.ops import OPS, Op
from conformance.ops.coalesce import coalesce_reference
from conformance.ops.masked_mean import MaskedMeanInputs
from conformance.ops.optimizer_steps import (
    OptimizerInputs,
    ParamGroupsInputs,
    dense_grad_and_mask,
    run_optimizer,
    run_param_groups,
)
from conformance.tensors import CooArray, quantize, to_numpy, torch_dtype
from conformance.rounding import check_rounding, unit_roundoff
from conformance.verdict import StockTorch, agreement_tolerance, agrees, distance

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

    def __init__(self, divergence: lowprec.Divergence, detail: str):
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

    def compare(self, outputs: dict, expected: dict, tols: dict, inputs: Any, against: str,
                model: Callable[[], dict] | None = None) -> None:
        """compare_outputs; on a Mismatch, ask whether a known divergence explains it -- this
        backend's documented idiom (:mod:`conformance.cases.known_divergences`) or stock torch's
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
                         lowprec_model: Callable[[], dict] | None = None) -> lowprec.Divergence | None:
        """The known divergence whose model these outputs match (on ``names``), or None."""
        if self.backend.name == "reference":
            return None
        models: list[tuple[lowprec.Divergence, Callable[[], dict]]] = [
            (entry.divergence, lambda entry=entry: entry.model(inputs))
            for entry in known_divergences.for_backend(self.op.name, self.backend.name, self.device)]
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


# ---------------------------------------------------------------- bit-level helpers

def _same_bits(a, b) -> np.ndarray:
    """Elementwise: identical float64 bits, or both NaN."""
    shape = np.shape(a)
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float64)).reshape(-1)  # (ascontiguousarray makes 0-d 1-d)
    b = np.ascontiguousarray(np.asarray(b, dtype=np.float64)).reshape(-1)
    return ((a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))).reshape(shape)


def _first_index(flags: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(flags)[0])


def assert_bits_equal(name: str, actual, expected, where: np.ndarray | None, against: str) -> None:
    actual, expected = to_numpy(actual), to_numpy(expected)
    if actual.shape != expected.shape:
        raise Mismatch(f"{name}: shape {list(actual.shape)} differs from {against}'s {list(expected.shape)}")
    differs = ~_same_bits(actual, expected)
    if where is not None:
        differs &= where
    if differs.any():
        index = _first_index(differs)
        raise Mismatch(f"{name} is not bit-for-bit equal to {against}: {int(differs.sum())} entries differ, "
                       f"first at index {index}: {float(actual[index])!r} vs {float(expected[index])!r}")


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
    to_cases: Callable[[Any], list[tuple[str, Any]]] = field(default=lambda example: [("", example)])
    needs_optimizer_object: bool = False  # only backends with Backend.optimizer_class get items
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


# coalesce

def check_coalesce_idempotent(trial: Trial, coo: CooArray) -> None:
    once = trial.run(coo)
    indices = to_numpy(once["indices"])
    if indices.ndim != 2:
        raise Mismatch(f"coalesce returned indices of shape {list(indices.shape)}")
    twice = trial.run(CooArray(indices.astype(np.int64), to_numpy(once["values"]).astype(np.float64), coo.size))
    if not np.array_equal(to_numpy(twice["indices"]), indices):
        raise Mismatch(f"coalesce(coalesce(x)) changed the indices:\n  once  {indices.tolist()}\n"
                       f"  twice {to_numpy(twice['indices']).tolist()}")
    assert_bits_equal("values", twice["values"], once["values"], None, against="coalesce(x)")
    if twice.get("is_coalesced") is False:
        raise Mismatch("coalesce(coalesce(x)).is_coalesced() is False")


def _dense_sum(coo: CooArray) -> np.ndarray:
    dense = np.zeros(coo.size, dtype=np.float64)
    np.add.at(dense, tuple(coo.indices), coo.values)
    return dense


def check_coalesce_dense_sum(trial: Trial, coo: CooArray) -> None:
    outputs = trial.run(coo)
    trial.op.check_invariants(outputs, coo)  # sorted, unique, is_coalesced
    indices = to_numpy(outputs["indices"]).astype(np.int64)
    result = CooArray(indices.reshape(coo.sparse_dim, -1), to_numpy(outputs["values"]).astype(np.float64), coo.size)
    tols = {"dense": tolerances(trial.op, coo, trial.dtype)["values"]}

    def model():
        emulated = lowprec.emulate(trial.op, coo, trial.dtype)
        return {"dense": _dense_sum(CooArray(emulated["indices"], emulated["values"], coo.size))}

    trial.compare({"dense": _dense_sum(result)}, {"dense": _dense_sum(coo)}, tols, coo,
                  against="the dense sum of the input's entries", model=model)


# optimizers



def _initial_state(op: str, inputs: OptimizerInputs, outputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Each state entry's value before the first step, as the implementation stores it: rounded to
    the dtype of the state it returned (torch keeps the accumulator in the parameter's dtype, a
    fused kernel may keep it in float32, the float64 reference does not round it)."""
    if op == "adagrad":
        init = np.full(inputs.param.shape, inputs.hyperparameters.get("initial_accumulator_value", 0.0))
        stored = outputs.get("state_sum")
        return {"param": inputs.param,
                "state_sum": quantize(init, stored.dtype).reshape(init.shape) if isinstance(stored, torch.Tensor) else init}
    return {"param": inputs.param, "exp_avg": np.zeros(inputs.param.shape), "exp_avg_sq": np.zeros(inputs.param.shape)}


def check_unspecified_unchanged(trial: Trial, inputs: OptimizerInputs) -> None:
    """Step by step (running each prefix of the trajectory): entries a step's gradient does not
    specify keep the parameter's and the state's exact bits through that step."""
    previous = None
    for step in range(1, inputs.steps + 1):
        outputs = trial.run(OptimizerInputs(inputs.param, inputs.grads[:step], inputs.hyperparameters))
        if previous is None:
            previous = _initial_state(trial.op.name, inputs, outputs)
        untouched = ~specified_mask(inputs.grads[step - 1], inputs.param.shape)
        for name in ("param", *trial.op.state_tensors):
            if name not in outputs:
                raise Mismatch(f"the backend did not produce {name}")
            assert_bits_equal(f"{name} after step {step}", outputs[name], previous[name], untouched,
                              against=f"its value before step {step} at entries step {step}'s gradient does not specify")
        previous = {name: to_numpy(outputs[name]) for name in ("param", *trial.op.state_tensors)}


def densified(inputs: OptimizerInputs, dtype: str) -> OptimizerInputs:
    """The same trajectory with every sparse gradient summed (float64, rounded once) into a dense one."""
    grads = [quantize(dense_grad_and_mask(g, inputs.param.shape)[0], torch_dtype(dtype)) if isinstance(g, CooArray)
             else g for g in inputs.grads]
    return OptimizerInputs(inputs.param, grads, inputs.hyperparameters)


def check_adagrad_sparse_equals_dense(trial: Trial, inputs: OptimizerInputs) -> None:
    """Adagrad on sparse gradients equals dense Adagrad (the same backend, each sparse gradient
    densified) at every entry some step specifies."""
    sparse_out = trial.run(inputs)
    dense_inputs = densified(inputs, trial.dtype)
    dense_out = trial.run(dense_inputs)
    touched = np.zeros(inputs.param.shape, dtype=bool)
    for grad in inputs.grads:
        touched |= specified_mask(grad, inputs.param.shape)
    names = ("param", "state_sum")
    pick = {name: to_numpy(sparse_out[name])[touched] for name in names}
    want = {name: to_numpy(dense_out[name])[touched] for name in names}
    tols = tolerances(trial.op, inputs, trial.dtype)

    def model():
        emulated = lowprec.emulate(trial.op, inputs, trial.dtype)
        dense_emulated = lowprec.emulate(trial.op, dense_inputs, trial.dtype)
        # both runs must match stock torch's float16/bfloat16 arithmetic for the divergence to apply
        compare_outputs({n: want[n] for n in names}, {n: dense_emulated[n][touched] for n in names}, tols,
                        against="dense Adagrad in stock torch's arithmetic")
        return {n: emulated[n][touched] for n in names}

    trial.compare(pick, want, tols, inputs, against="dense Adagrad on the densified gradients (same backend)",
                  model=model)


def check_rounds_correctly(trial: Trial, inputs: Any) -> None:
    """float16/bfloat16 outputs are the exact result rounded to nearest even, give or take the
    float32 arithmetic before it (:mod:`conformance.rounding`); stock torch's own known
    half-precision arithmetic is reported as its divergence, not as a failure."""
    dtype = torch_dtype(trial.dtype)
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


def _rounding_divergence(trial: Trial, inputs: Any, name: str, got, dtype) -> lowprec.Divergence | None:
    """The known divergence an incorrectly rounded output is explained by: this backend's own
    rounding mode, or stock torch's half-precision accumulation of duplicates (any order)."""
    if trial.backend.name == "reference" or trial.backend.judged_against_torch:
        return None  # a candidate is excused only by being the same as stock torch (same_as_torch)
    rounding = known_divergences.rounding_for_backend(trial.backend.name, trial.device, trial.dtype)
    if rounding is not None:
        exact, low, high = trial.op.rounding_bounds(inputs, dtype)[name]
        try:
            check_rounding(name, got, exact, low, high, dtype, mode=rounding.mode)
            return rounding.divergence
        except Mismatch:
            pass
    if trial.op.torch_sums_duplicates_in_half:
        half = lowprec.HALF_ACCUMULATION
        exact, low, high = trial.op.rounding_bounds(inputs, dtype, accumulation_unit=unit_roundoff(dtype))[name]
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
    compare_outputs({name: got}, {name: want}, {name: agreement_tolerance(torch_dtype(trial.dtype))}, against=against)


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
                          quantize(start, torch_dtype(trial.dtype)), None, against="its value before the steps")


def _assert_members_equal(trial: Trial, got: list[dict], want: list[dict], against: str) -> None:
    for index, (ours, theirs) in enumerate(zip(got, want)):
        for name in _state_names(trial.op):
            _assert_same_runs(trial, f"{name} of parameter {index}", ours[name], theirs[name],
                              against=against.format(index=index))


def _param_groups_divergence(trial: Trial, inputs: ParamGroupsInputs, together: list[dict]):
    """The known divergence of stock torch the backend's grouped run matches, or None. A candidate
    (judged against torch) is excused only where stock torch matches the same model."""
    for entry in known_divergences.GROUP_DIVERGENCES:
        if entry.op != trial.op.name:
            continue
        modelled = entry.model(inputs)
        if not _matches_group_model(trial, inputs, modelled, together, entry):
            continue
        if not trial.backend.judged_against_torch:
            return entry.divergence
        # a candidate is excused by behaving as stock torch does: torch must match the model too
        torch_trial = Trial(trial.op, StockTorch(), trial.device, trial.dtype)
        if _matches_group_model(torch_trial, inputs, modelled, _grouped_runs(torch_trial, inputs)[0], entry):
            return lowprec.Divergence(entry.divergence.key, f"same as torch: {entry.divergence.reason}",
                                      entry.divergence.link)
    return None


def _matches_group_model(trial: Trial, inputs: ParamGroupsInputs, modelled: ParamGroupsInputs,
                         together: list[dict], entry) -> bool:
    alone = _grouped_runs(trial, modelled)[2]
    try:
        _assert_members_equal(trial, together, alone, against="the model of " + entry.divergence.key)
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


# masked_mean

@st.composite
def _masked_pairs(draw, dtype: str):
    inputs = draw(strategies.masked_mean_inputs(dtype))
    fill = draw(st.sampled_from(["zero", "nan", "inf", "-inf", "huge", "other"]))
    values = inputs.values.copy()
    invalid = ~inputs.mask
    big = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
           "float64": 1.7976931348623157e308}[dtype]
    fills = {"zero": 0.0, "nan": math.nan, "inf": math.inf, "-inf": -math.inf, "huge": big}
    if fill == "other":
        count = int(invalid.sum())
        values[invalid] = draw(st.lists(strategies.representable_floats(dtype), min_size=count, max_size=count))
    else:
        values[invalid] = fills[fill]
    return inputs, MaskedMeanInputs(values, inputs.mask.copy())


def check_masked_mean_ignores_masked_out(trial: Trial, pair) -> None:
    first, second = pair
    a, b = trial.run(first), trial.run(second)
    try:
        for name in ("value", "grad"):
            assert_bits_equal(name, b[name], a[name], None,
                              against="the same inputs with other values (NaN/inf included) under the mask")
    except Mismatch as mismatch:
        _explain_masked_mean(trial, [(first, a), (second, b)], mismatch)
        raise


def _explain_masked_mean(trial: Trial, runs: list, mismatch: Mismatch) -> None:
    """Raise DivergenceObserved when every run matches one known idiom divergence of the backend."""
    found = None
    for inputs, outputs in runs:
        tols = tolerances(trial.op, inputs, trial.dtype)
        divergence = trial.known_divergence(inputs, outputs, tols)
        if divergence is None or (found is not None and divergence != found):
            return
        found = divergence
    if found is not None:
        raise DivergenceObserved(found, str(mismatch).splitlines()[0]) from None


def check_masked_mean_grad_zero_outside_mask(trial: Trial, inputs: MaskedMeanInputs) -> None:
    outputs = trial.run(inputs)
    grad = to_numpy(outputs["grad"])
    if grad.shape != inputs.mask.shape:
        raise Mismatch(f"grad has shape {list(grad.shape)}, values have shape {list(inputs.mask.shape)}")
    outside = ~inputs.mask & ~(grad == 0)
    if outside.any():
        index = _first_index(outside)
        mismatch = Mismatch(f"grad is not zero outside the mask: {int(outside.sum())} entries, first at index "
                            f"{index}: {float(grad[index])!r}")
        _explain_masked_mean(trial, [(inputs, outputs)], mismatch)
        raise mismatch


def _pair_cases(pair):
    return [("masked-out-a", pair[0]), ("masked-out-b", pair[1])]


def _idempotent_cases(coo: CooArray):
    once = coalesce_reference(coo)
    return [("", coo), ("second-pass", CooArray(once["indices"], once["values"], coo.size))]


def _member_cases(inputs: ParamGroupsInputs):
    return [(f"param-{index}", member) for index, member in enumerate(inputs.members)]


def _dense_cases(dtype: str):
    return lambda inputs: [("sparse", inputs), ("densified", densified(inputs, dtype))]


# kernel-triton drives the very optimizer classes of kernel (conformance.kernels), which own the
# param groups and the state_dict; only the step kernel differs, and Triton's interpreter is slow
OPTIMIZER_OBJECT_TWINS = ("kernel-triton",)

PROPERTIES: list[Property] = [
    Property("coalesce", "agrees-with-reference",
             "coalesce matches the NumPy reference (indices exact, values within a tolerance for the dtype)",
             lambda dtype: strategies.coo_arrays(dtype), check_agrees_with_reference, skip_backends=("reference",)),
    Property("coalesce", "idempotent", "coalesce(coalesce(x)) is bit-for-bit coalesce(x)",
             lambda dtype: strategies.coo_arrays(dtype), check_coalesce_idempotent, to_cases=_idempotent_cases),
    Property("coalesce", "sorted-dense-sum",
             "coalesce's indices are sorted and unique, and its entries sum to the dense sum of the input",
             lambda dtype: strategies.coo_arrays(dtype), check_coalesce_dense_sum),
    Property("adagrad", "agrees-with-reference", "Adagrad trajectories match the NumPy reference",
             lambda dtype: strategies.optimizer_inputs("adagrad", dtype), check_agrees_with_reference,
             skip_backends=("reference",)),
    Property("adagrad", "sparse-equals-dense",
             "Adagrad on sparse gradients equals dense Adagrad at every entry the gradients specify",
             lambda dtype: strategies.optimizer_inputs("adagrad", dtype), check_adagrad_sparse_equals_dense),
    Property("adagrad", "unspecified-unchanged",
             "entries a step's gradient does not specify keep param and state_sum bit-for-bit",
             lambda dtype: strategies.optimizer_inputs("adagrad", dtype), check_unspecified_unchanged),
    Property("adagrad", "rejects-invalid",
             "invalid hyperparameters and weight_decay with sparse gradients raise torch's documented errors",
             lambda dtype: strategies.invalid_optimizer_inputs("adagrad", dtype), check_rejects_invalid),
    Property("sparse_adam", "agrees-with-reference", "SparseAdam trajectories match the NumPy reference",
             lambda dtype: strategies.optimizer_inputs("sparse_adam", dtype), check_agrees_with_reference,
             skip_backends=("reference",)),
    Property("sparse_adam", "unspecified-unchanged",
             "entries a step's gradient does not specify keep param, exp_avg and exp_avg_sq bit-for-bit",
             lambda dtype: strategies.optimizer_inputs("sparse_adam", dtype), check_unspecified_unchanged),
    Property("sparse_adam", "rejects-invalid",
             "invalid hyperparameters and dense gradients raise torch's documented errors",
             lambda dtype: strategies.invalid_optimizer_inputs("sparse_adam", dtype), check_rejects_invalid),
    *[Property(op, "param-groups",
               "one optimizer over two param groups (different shapes and hyperparameters, a parameter without "
               "a gradient) moves each parameter as an optimizer of its own would",
               lambda dtype, op=op: strategies.optimizer_param_groups(op, dtype), check_param_groups,
               needs_optimizer_object=True, to_cases=_member_cases, observe=observe_param_groups,
               skip_backends=OPTIMIZER_OBJECT_TWINS)
      for op in ("adagrad", "sparse_adam")],
    *[Property(op, "state-dict-resume",
               "state_dict() saved mid-trajectory (torch.save/torch.load) and loaded into a fresh optimizer "
               "continues exactly as the uninterrupted run",
               lambda dtype, op=op: strategies.optimizer_resume_points(op, dtype), check_state_dict_resume,
               needs_optimizer_object=True, to_cases=lambda example: _member_cases(example[0]),
               observe=lambda trial, example: _flat_outputs(trial.op, _grouped_runs(trial, *example)[0]),
               skip_backends=OPTIMIZER_OBJECT_TWINS)
      for op in ("adagrad", "sparse_adam")],
    Property("coalesce", "rounds-correctly",
             "float16/bfloat16 sums of duplicates are correctly rounded (many equal duplicates, cancelling pairs)",
             lambda dtype: strategies.coalesce_rounding_inputs(dtype), check_rounds_correctly,
             skip_backends=("reference",), dtypes=lowprec.HALF_DTYPES),
    Property("adagrad", "rounds-correctly",
             "a float16/bfloat16 parameter moved by a fraction of an ulp to a few ulps is correctly rounded",
             lambda dtype: strategies.optimizer_rounding_inputs("adagrad", dtype), check_rounds_correctly,
             skip_backends=("reference",), dtypes=lowprec.HALF_DTYPES),
    Property("sparse_adam", "rounds-correctly",
             "a float16/bfloat16 parameter moved by a fraction of an ulp to a few ulps is correctly rounded",
             lambda dtype: strategies.optimizer_rounding_inputs("sparse_adam", dtype), check_rounds_correctly,
             skip_backends=("reference",), dtypes=lowprec.HALF_DTYPES),
    Property("masked_mean", "rounds-correctly",
             "a float16/bfloat16 mean over long masked sums is rounded as float32 arithmetic allows",
             lambda dtype: strategies.masked_mean_rounding_inputs(dtype), check_rounds_correctly,
             skip_backends=("reference",), dtypes=lowprec.HALF_DTYPES),
    Property("masked_mean", "agrees-with-reference", "masked mean and its gradient match the NumPy reference",
             lambda dtype: strategies.masked_mean_inputs(dtype), check_agrees_with_reference,
             skip_backends=("reference",)),
    Property("masked_mean", "ignores-masked-out",
             "values under the mask (NaN and inf included) change neither the value nor the gradient",
             _masked_pairs, check_masked_mean_ignores_masked_out, to_cases=_pair_cases),
    Property("masked_mean", "grad-zero-outside-mask", "the gradient is exactly zero wherever the mask is False",
             lambda dtype: strategies.masked_mean_inputs(dtype), check_masked_mean_grad_zero_outside_mask),
]


def cases_of(prop: Property, example: Any, dtype: str) -> list[tuple[str, Any]]:
    """The op inputs an example stands for (two for the pairwise properties)."""
    if prop.id == "adagrad-sparse-equals-dense":
        return _dense_cases(dtype)(example)
    return prop.to_cases(example)


# ---------------------------------------------------------------- searching

UNSUPPORTED_BUDGET = 25  # examples drawn before an item on which none can run is reported unsupported


class _NothingRuns(BaseException):
    """Ends a Hypothesis run whose first UNSUPPORTED_BUDGET examples were all unsupported
    (Hypothesis does not catch BaseException subclasses)."""


SAME_AS_TORCH = lowprec.Divergence(
    "same-as-torch",
    "the result is the same as stock torch's on the same inputs, and torch itself misses the property here",
    None,
)


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


def _misses(prop: Property, trial: Trial, example: Any) -> bool:
    """Whether ``trial``'s backend misses the property on this example (a departure of any kind)."""
    try:
        prop.check(trial, example)
    except (Mismatch, DivergenceObserved):
        return True
    except Unsupported:
        return False
    except Exception:  # noqa: BLE001 - torch raising where the property expects a result
        return True
    return False


def same_as_torch(prop: Property, trial: Trial, torch_trial: Trial, example: Any,
                  mismatch: Mismatch) -> DivergenceObserved | None:
    """The three-way verdict on one example a candidate misses: a DivergenceObserved when stock
    torch misses it too and the candidate's outputs are torch's (within
    :func:`conformance.verdict.agreement_tolerance`); None when the candidate differs from torch
    (the mismatch then stands, and says what torch did)."""
    if not _misses(prop, torch_trial, example):
        mismatch.args = (f"{mismatch.args[0] if mismatch.args else ''}\n  stock torch on the same example: "
                         f"has the property",)
        return None
    tolerance = agreement_tolerance(torch_dtype(trial.dtype))
    if prop.observe is not None:  # the property's own outputs, not its cases' single runs
        runs = [lambda: (prop.observe(trial, example), prop.observe(torch_trial, example))]
    else:
        runs = [lambda inputs=inputs: (trial.run(inputs), torch_trial.run(inputs))
                for _, inputs in cases_of(prop, example, trial.dtype)]
    for run in runs:
        try:
            ours, theirs = run()
        except Exception:  # noqa: BLE001 - one of them raises on these inputs: not the same behaviour
            return None
        tols = {name: (None if name in trial.op.exact_outputs else tolerance) for name in theirs}
        if not agrees(ours, theirs, tols, list(theirs)):
            mismatch.args = (f"{mismatch.args[0] if mismatch.args else ''}\n  stock torch on the same example: "
                             f"misses the property too, but differently (max abs difference "
                             f"{distance(ours, theirs):.6g})",)
            return None
    single = prop.observe is None and len(runs) == 1
    explained = trial.known_divergence(cases_of(prop, example, trial.dtype)[0][1], ours, tols) if single else None
    divergence = explained or SAME_AS_TORCH
    return DivergenceObserved(lowprec.Divergence(
        divergence.key, f"same as torch: {divergence.reason}", divergence.link), str(mismatch).splitlines()[0])


def derive_seed(base_seed: int, prop: Property, dtype: str) -> int:
    """Per-item seed: the same for every backend and device, so all of them see the same examples."""
    digest = hashlib.sha256(f"{base_seed}:{prop.id}:{dtype}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def run_property(prop: Property, backend: Backend, device: str, dtype: str, *, settings, base_seed: int,
                 database_key: str | None = None) -> PropertyResult:
    """Search ``prop`` on one backend/device/dtype with Hypothesis under ``settings``."""
    from hypothesis import given

    from hypothesis import reject
    from hypothesis.errors import Unsatisfiable

    result = PropertyResult(seed=base_seed)
    op = OPS[prop.op]
    trial = Trial(op, backend, device, dtype)
    torch_trial = None
    if backend.judged_against_torch and op.torch_implementation is not None:
        torch_trial = Trial(op, StockTorch(), device, dtype)

    def observed(hit: DivergenceObserved, example) -> None:
        result.divergences[hit.divergence.key] += 1
        result.divergence_details.setdefault(hit.divergence.key, (hit.divergence, hit.detail, example))

    def generated_case(example):
        try:
            prop.check(trial, example)
        except DivergenceObserved as hit:
            result.examples += 1
            observed(hit, example)
        except Unsupported as exc:  # this example only: Hypothesis draws another
            result.unsupported_examples += 1
            result.first_unsupported = result.first_unsupported or exc
            if result.examples == 0 and result.unsupported_examples >= UNSUPPORTED_BUDGET:
                raise _NothingRuns() from None
            reject()
        except Mismatch as mismatch:
            result.examples += 1
            if torch_trial is not None:
                hit = same_as_torch(prop, trial, torch_trial, example, mismatch)
                if hit is not None:
                    observed(hit, example)
                    return
            result.failing_example = example
            raise
        except BaseException:
            result.examples += 1
            result.failing_example = example
            raise
        else:
            result.examples += 1
            if torch_trial is not None and _misses(prop, torch_trial, example):
                result.improvements += 1

    generated_case._hypothesis_internal_add_digest = (database_key or prop.id).encode()
    # a seed without the public @seed decorator, which would also switch the example database off
    generated_case._hypothesis_internal_use_seed = derive_seed(base_seed, prop, dtype)
    test = settings(given(prop.strategy(dtype))(generated_case))
    if getattr(test, "_hypothesis_internal_use_seed", None) is None:  # another Hypothesis version
        from hypothesis import seed

        test = seed(derive_seed(base_seed, prop, dtype))(test)
    try:
        test()
    except _NothingRuns:
        result.unsupported = result.first_unsupported
    except Unsatisfiable:
        if result.examples == 0 and result.first_unsupported is not None:
            result.unsupported = result.first_unsupported  # no example could run at all
        else:
            raise
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        result.failure = exc
    return result


def describe_divergences(result: PropertyResult) -> str:
    parts = []
    for key, count in result.divergences.items():
        divergence, detail, _ = result.divergence_details[key]
        link = f" ({divergence.link})" if divergence.link else ""
        parts.append(f"{divergence.reason}{link} -- on {count} of {result.examples} examples; e.g. {detail}")
    return "; ".join(parts)


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")
