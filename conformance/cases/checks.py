"""The suite's generic checks, by property name (:data:`CHECKS`): what a property an op record
declares without a check of its own runs (``GeneratedProperty.check`` None).

Each check runs a backend through a :class:`~conformance.cases.trial.Trial` and raises Mismatch
where it misses the property, or DivergenceObserved where a known divergence explains the miss:
agrees-with-reference, rounds-correctly, rejects-invalid and deterministic for every op, and the
optimizers' unspecified-unchanged, sparse-equals-dense, param-groups and state-dict-resume.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from conformance.cases import lowprec
from conformance.cases.trial import DivergenceObserved, Property, Trial, same_as_torch, tolerances, unbound
from conformance.core.compare import assert_bits_equal, compare_outputs
from conformance.core.divergences import ConditionalDivergence, Divergence, LayoutDivergence, lookup
from conformance.core.layouts import describe, in_storage_order, outside_changed, torch_equal_bits
from conformance.ops.base import LAYOUT_INVARIANT, SIZES
from conformance.core.dtypes import DTYPES, HALF_DTYPES
from conformance.ops.base import Op
# the machinery's own modules, not the package (which imports the records): one level less
from conformance.ops.optimizers.drive import run_lifecycle, run_member_alone, run_optimizer, run_param_groups
from conformance.ops.optimizers.inputs import LifecycleInputs, OptimizerInputs, ParamGroupsInputs, grad_to_torch
from conformance.ops.optimizers.reference import dense_grad_and_mask, densified
from conformance.core.rounding import check_rounding
from conformance.core.tensors import CooArray, quantize, to_numpy, torch_dtype
from conformance.core.types import Mismatch, RunContext, Unsupported, exception_text, safe_text
from conformance.judging.verdict import StockTorch, agreement_tolerance

def check_agrees_with_reference(trial: Trial, inputs: Any) -> None:
    outputs = trial.run(inputs)
    trial.op.check_invariants(outputs, inputs)
    reference = trial.reference(inputs)
    trial.compare(outputs, reference, tolerances(trial.op, inputs, trial.dtype, reference), inputs,
                  against="the NumPy reference")


# optimizers

def specified_mask(grad: CooArray | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return dense_grad_and_mask(grad, shape)[1]


def check_unspecified_unchanged(trial: Trial, inputs: OptimizerInputs) -> None:
    """Step by step (running each prefix of the trajectory): entries a step's gradient does not
    specify keep the parameter's and the state's exact bits through that step."""
    names = ("param", *trial.op.state_tensors)
    prefixes: dict[int, dict[str, Any]] = {}

    def run_prefix(prefix: OptimizerInputs) -> dict[str, Any]:
        """The backend's run of a prefix of this trajectory, once (reading a lazily created state's
        dtype runs the first step, which step 1 below runs again otherwise)."""
        steps = len(prefix.grads)
        if steps not in prefixes:
            prefixes[steps] = trial.run(prefix)
        return prefixes[steps]

    previous = {name: to_numpy(value) for name, value in trial.op.state_before_steps(run_prefix, inputs).items()}
    for step in range(1, inputs.steps + 1):
        outputs = run_prefix(OptimizerInputs(inputs.param, inputs.grads[:step], inputs.hyperparameters))
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
    compared = {name: touched for name in names}
    compared["param"] = touched & ~undefined_when_densified(trial.op, dense_inputs, trial.dtype)
    pick = {name: to_numpy(sparse_out[name])[compared[name]] for name in names}
    want = {name: to_numpy(dense_out[name])[compared[name]] for name in names}
    tols = tolerances(trial.op, inputs, trial.dtype)

    def model():
        emulated, dense_emulated = trial.emulate(inputs), trial.emulate(dense_inputs)
        # both runs must match stock torch's float16/bfloat16 arithmetic for the divergence to apply
        compare_outputs({n: want[n] for n in names}, {n: dense_emulated[n][compared[n]] for n in names}, tols,
                        against=f"dense {title} in stock torch's arithmetic")
        return {n: emulated[n][compared[n]] for n in names}

    trial.compare(pick, want, tols, inputs, against=f"dense {title} on the densified gradients (same backend)",
                  model=model)


def undefined_when_densified(op: Op, dense_inputs: OptimizerInputs, dtype: str) -> np.ndarray:
    """The parameter's entries where torch's documented dense update itself is 0/0: Adagrad with eps 0
    (or an eps ``dtype`` rounds to 0, 1e-10 in float16) at an accumulator still 0 (or underflowed to
    0). The dense run writes NaN there, whether a step's gradient leaves the entry out (the sparse run
    leaves it alone) or specifies a zero (a sparse run that adds eps in float32 gets the reference's
    value); the property compares nothing against that NaN (agrees-with-reference judges the sparse
    run there). Found by replaying torch's documented steps in ``dtype``."""
    try:
        with np.errstate(all="ignore"):
            dense = op.replay_in_dtype(dense_inputs, dtype, set(), dtype)["param"]
    except NotImplementedError:
        return np.zeros(dense_inputs.param.shape, dtype=bool)
    return np.isnan(dense)


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
    rounding mode, one of stock torch's rounding models of the op (``Op.torch_rounding_models``), or
    stock torch's half-precision accumulation of duplicates (any order)."""
    if trial.backend.is_oracle or trial.backend.judged_against_torch:
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
    for divergence, model in trial.op.torch_rounding_models:
        if divergence.applies_to(backend=trial.backend.name, device=trial.device, dtype=dtype):
            exact, low, high = trial.op.rounding_bounds(inputs, dtype, **model)[name]
            try:
                check_rounding(name, got, exact, low, high, dtype)
                return divergence
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
    """The backend raises the documented error: the reference's exception type (or a subclass of
    it, which ``except <type>`` catches too) and, for stock torch and the built-in backends, its
    exact message. A candidate (``Backend.judged_against_torch``) is judged by the kind of its
    refusal, not its text: an outside implementation words its errors its own way (and stock
    torch, as the second opinion on a candidate's example, is judged the same way)."""
    try:
        trial.reference(inputs)
    except Exception as expected:
        wanted_type, wanted_message = type(expected).__name__, safe_text(expected)
    else:
        raise RuntimeError(f"harness: the strategy drew inputs the reference accepts: {inputs!r}")
    # stock torch as a candidate's second opinion (StockTorch) on the same terms; torch's own items
    # (its stock backend, e.g. coo) keep the exact text
    by_kind = trial.backend.judged_against_torch or isinstance(trial.backend, StockTorch)
    wanted = (f"{wanted_type}, the type torch raises here (the text may be the implementation's own; torch's: "
              f"{wanted_message!r})") if by_kind else f"{wanted_type}({wanted_message!r})"
    try:
        trial.run(inputs)
    except Unsupported:
        raise
    except Exception as exc:
        if not any(cls.__name__ == wanted_type for cls in type(exc).__mro__):
            raise Mismatch(f"expected {wanted}, but it raised {exception_text(exc)}") from exc
        if not by_kind and safe_text(exc) != wanted_message:
            raise Mismatch(f"expected {wanted}, but the message was {safe_text(exc)!r}") from exc
        return
    raise Mismatch(f"expected {wanted}, but nothing was raised")


def _assert_same_runs(trial: Trial, name: str, got, want, against: str) -> None:
    """Bit for bit on cpu; within :func:`conformance.judging.verdict.agreement_tolerance` on other devices,
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


PATHS_AGREE = "paths-agree"  # the twins of torch's own code paths (registered divergences name it)
COMPILED_AGREES = "compiled-agrees"  # the twin of torch's step under torch.compile


def _is_torch_path(backend) -> bool:
    """A backend that runs one of torch's own code paths (conformance/backends/torch_paths.py): it
    names the path (``torch_path``) and runs torch's for-loop step beside it (``run_for_loop``)."""
    return getattr(backend, "torch_path", None) is not None and callable(getattr(backend, "run_for_loop", None))


def check_paths_agree(trial: Trial, inputs: OptimizerInputs) -> None:
    """The differential twin of one of torch's code paths: the path (the trial's backend: foreach,
    fused) and torch's for-loop step of the same optimizer, on the same inputs, give the same outputs
    -- bit for bit for foreach in float32/float64 on cpu (the same arithmetic, tensor by tensor), else
    within the agreement tolerance (:func:`conformance.judging.verdict.agreement_tolerance`: another order of
    the same arithmetic). A path torch does not run on these inputs is Unsupported (torch's reason).
    Where they differ and a registered divergence of the path applies (stock torch's rounding of its
    intermediates), the difference is that divergence when the path's outputs still agree with the
    NumPy reference within the tolerance of a correct implementation in this dtype."""
    backend, op = trial.backend, trial.op
    ctx = RunContext(trial.device, torch_dtype(trial.dtype))
    path = backend.torch_path
    got = trial.run(inputs)
    try:
        want = backend.run_for_loop(op.name, inputs, ctx)
    except Unsupported:
        raise
    except Exception as exc:  # noqa: BLE001 - the path ran where the for-loop step raises
        raise Mismatch(f"torch's {path} step ran, but its for-loop step raises {exception_text(exc)} on the "
                       f"same inputs") from exc
    against = f"torch's for-loop step on the same inputs ({path} twin)"
    names = [name for name in want if hasattr(want[name], "shape")]
    try:
        missing = [name for name in names if name not in got]
        if missing:
            raise Mismatch(f"torch's {path} step did not produce {', '.join(missing)}")
        if path == "foreach" and trial.device == "cpu" and trial.dtype not in HALF_DTYPES:
            for name in names:
                assert_bits_equal(name, got[name], want[name], None, against=against)
        else:
            tolerance = agreement_tolerance(trial.dtype)
            compare_outputs({n: got[n] for n in names}, {n: want[n] for n in names},
                            {n: tolerance for n in names}, against=against)
    except Mismatch as mismatch:
        divergence = _path_divergence(trial, inputs, got, want, names)
        if divergence is None:
            raise
        raise DivergenceObserved(divergence, str(mismatch).splitlines()[0]) from None


def _path_divergence(trial: Trial, inputs: OptimizerInputs, got: dict, want: dict,
                     names: list[str]) -> Divergence | None:
    """The registered divergence of this path here that accounts for the difference: each declares
    how (``explains(inputs, got, for_loop, agrees_with_reference)``, conformance/backends/torch_paths.py;
    the last: whether the path's outputs agree with the NumPy reference); None if none does."""
    def agrees() -> bool:
        return path_agrees_with_reference(trial, inputs, got, names)

    twin = getattr(trial.backend, "twin_property", PATHS_AGREE)  # the compiled backend's: compiled-agrees
    for entry in lookup(op=trial.op.name, backend=trial.backend.name, device=trial.device, dtype=trial.dtype,
                        property=twin):
        explains = getattr(entry, "explains", None)
        if explains is not None and explains(inputs, {n: to_numpy(got[n]) for n in names},
                                             {n: to_numpy(want[n]) for n in names}, agrees):
            return entry
    return None


def path_agrees_with_reference(trial: Trial, inputs: OptimizerInputs, got: dict, names: list[str]) -> bool:
    """Whether a path's outputs agree with the NumPy reference within the tolerance of a correct
    implementation in this dtype (what a path that only rounds its intermediates otherwise than the
    for-loop step keeps)."""
    reference = trial.reference(inputs)
    wanted = [name for name in names if name in reference]
    try:
        compare_outputs({n: got[n] for n in wanted}, {n: reference[n] for n in wanted},
                        tolerances(trial.op, inputs, trial.dtype, reference), against="the NumPy reference")
    except Mismatch:
        return False
    return True


# ---------------------------------------------------------------- layouts (conformance/core/layouts.py)

def _placed(placements: list) -> str:
    """The layouts an example's tensors were actually placed in: ``param strided(offset=1, step=2)``."""
    seen: dict[str, str] = {}
    for placement in placements:
        seen.setdefault(placement.role, str(placement.layout))
    return ", ".join(f"{role} {layout}" for role, layout in seen.items())


def _layout_cases(example: tuple[Any, dict], dtype: str) -> list[tuple[str, Any]]:
    inputs, layouts = example
    return [(f"layouts: {describe(layouts)}", inputs)]


def check_layout_invariant(trial: Trial, example: tuple[Any, dict]) -> None:
    """The same inputs handed over in the drawn layouts (views into larger storages, transposed,
    channels_last: :mod:`conformance.core.layouts`) give the result of contiguous copies -- bit for
    bit on cpu, but for the outputs the op declares reordered (a reduction over strides:
    ``Op.layout_reordered_outputs``), which agree within the agreement tolerance -- and no byte of
    the storage around a view changes. A failure names the layouts; a registered
    :class:`~conformance.core.divergences.LayoutDivergence` that reproduces the miss bit for bit
    (the kernel walks ``data_ptr()`` linearly) is that divergence."""
    inputs, layouts = example
    op, backend = trial.op, trial.backend
    ctx = trial.context(layouts)
    try:
        plain = trial.run(copy.deepcopy(inputs))
    except Unsupported:
        raise
    except Exception as refusal:  # noqa: BLE001 - contiguous copies are refused: the views must be refused alike
        try:
            backend.run(op.name, copy.deepcopy(inputs), ctx)
        except Unsupported:
            raise
        except Exception as other:  # noqa: BLE001
            if type(other) is type(refusal):
                return
            raise Mismatch(f"layout {_placed(ctx.placements) or describe(layouts)}: raises {exception_text(other)}, "
                           f"where contiguous copies of the same inputs raise {exception_text(refusal)}") from other
        raise Mismatch(f"layout {_placed(ctx.placements) or describe(layouts)}: returns a result, where contiguous "
                       f"copies of the same inputs raise {exception_text(refusal)}") from None
    try:
        placed = backend.run(op.name, copy.deepcopy(inputs), ctx)
    except Unsupported:
        raise
    except Exception as exc:  # noqa: BLE001 - a view refused where the contiguous copy runs: torch's ops take views
        raise Mismatch(f"layout {_placed(ctx.placements)}: raises {exception_text(exc)} on non-contiguous inputs, "
                       "where contiguous copies of the same inputs run") from exc
    if not ctx.placements:
        return  # every drawn layout is contiguous, or fits none of these tensors: nothing to compare
    where = _placed(ctx.placements)
    try:
        _assert_same_outputs(trial, placed, plain, against=f"the same backend on contiguous copies of the inputs")
        for placement in ctx.placements:
            problem = outside_changed(placement)
            if problem is not None:
                raise Mismatch(f"wrote outside the view it was handed: {problem}")
    except Mismatch as mismatch:
        divergence = _layout_divergence(trial, inputs, layouts, ctx, placed)
        if divergence is not None:
            raise DivergenceObserved(divergence, f"layout {where}: {str(mismatch).splitlines()[0]}") from None
        raise Mismatch(f"layout {where}: {mismatch}", mismatch.max_abs_error, mismatch.max_rel_error) from None


def _assert_same_outputs(trial: Trial, got: dict, want: dict, against: str) -> None:
    missing = sorted(set(want) - set(got))
    if missing:
        raise Mismatch(f"did not produce {', '.join(missing)}")
    for name, expected in want.items():
        value = got[name]
        if not (hasattr(value, "shape") or hasattr(expected, "shape")):
            if value != expected:
                raise Mismatch(f"{name} is {value!r}, {against}: {expected!r}")
        elif name in trial.op.layout_reordered_outputs or trial.device != "cpu":
            compare_outputs({name: value}, {name: expected}, {name: agreement_tolerance(trial.dtype)}, against=against)
        else:
            assert_bits_equal(name, value, expected, None, against=against)


def _layout_divergence(trial: Trial, inputs: Any, layouts: dict, ctx: RunContext, placed: dict) -> Divergence | None:
    """The registered LayoutDivergence of this backend here that reproduces the run bit for bit, or None.
    A candidate is excused only by the three-way verdict (stock torch's default step has the property)."""
    if trial.backend.judged_against_torch:
        return None
    for entry in lookup(op=trial.op.name, backend=trial.backend.name, device=trial.device, dtype=trial.dtype,
                        property=LAYOUT_INVARIANT):
        if not isinstance(entry, LayoutDivergence):
            continue
        if entry.triggered is not None:
            if entry.triggered(inputs, ctx.placements):
                return entry
            continue
        if not any(p.role in entry.walks for p in ctx.placements):
            continue
        model = trial.context(layouts, linear_windows=entry.walks)
        try:
            modelled = trial.backend.run(trial.op.name, copy.deepcopy(inputs), model)
        except Exception:  # noqa: BLE001 - the model does not run here: it does not explain the miss
            continue
        derived = set(trial.op.root_outputs)  # read from a state in index order (Adagrad's std): not walked
        if _same_storages(ctx.placements, model.placements) and _same_in_storage_order(
                {k: v for k, v in placed.items() if k not in derived}, modelled, ctx):
            return entry
    return None


def _same_storages(ours: list, theirs: list) -> bool:
    return len(ours) == len(theirs) and all(
        a.role == b.role and torch_equal_bits(a.storage, b.storage) for a, b in zip(ours, theirs))


def _same_in_storage_order(placed: dict, modelled: dict, ctx: RunContext) -> bool:
    """Each output that is not a view into a placed storage (those are compared whole) equal in storage
    order: a state tensor created like a transposed parameter is walked in its storage's order too."""
    storages = {p.storage.untyped_storage().data_ptr() for p in ctx.placements}
    for name, value in placed.items():
        other = modelled.get(name)
        if not hasattr(value, "shape"):
            if value != other:
                return False
            continue
        if not hasattr(other, "shape"):
            return False
        if value.layout == other.layout == torch.strided and value.untyped_storage().data_ptr() in storages:
            continue
        if not torch_equal_bits(in_storage_order(value), in_storage_order(other)):
            return False
    return True


# ---------------------------------------------------------------- lifecycles

LIFECYCLE = "lifecycle"  # the property (an optimizer record declares it)


def check_lifecycle(trial: Trial, inputs: LifecycleInputs) -> None:
    """One optimizer through a parameter lifecycle (:class:`LifecycleInputs`: missing gradients, frozen,
    0-d and zero-size parameters, add_param_group mid-run, lr changed between steps or a 0-d tensor, a
    weights_only state_dict round trip) leaves each parameter and its whole state bit for bit as an optimizer
    of its own stepped only where that parameter has a gradient (the agreement tolerance off cpu); a frozen
    parameter keeps its value. A candidate's own run (first parameter) with the lr changed also agrees with
    stock torch's class on the same steps, within the generated tolerance. A failure names the events."""
    op = trial.op
    ctx = RunContext(trial.device, torch_dtype(trial.dtype))
    base_lr = float(op.hyperparameters(inputs.hyperparameters)["lr"])

    def runs(optimizer_class):
        together = run_lifecycle(optimizer_class, inputs, ctx, base_lr)
        alone = [run_member_alone(optimizer_class, inputs, index, ctx, base_lr)
                 for index in range(len(inputs.members))]
        return together, alone

    try:
        try:
            together, alone = trial.backend.drive_optimizer(op.name, ctx, runs)
        except (Unsupported, Mismatch):
            raise
        except Exception as exc:  # noqa: BLE001 - a refusal torch is known for (kind "error"), else an error
            _excuse_conditional(trial, LIFECYCLE, inputs, f"lifecycle ({inputs.events()}): "
                                f"{exception_text(exc).splitlines()[0]}", kind="error")
            raise
        for index, (ours, theirs) in enumerate(zip(together, alone)):
            member = inputs.members[index]
            stepped = not member.frozen and any(g is not None for g in member.grads[member.start:])
            if set(ours) != set(theirs) and stepped:  # (state made at construction, or lazily at a first step)
                raise Mismatch(f"parameter {index} has state {sorted(ours)[1:]} where an optimizer of its own has "
                               f"{sorted(theirs)[1:]}")
            for name in set(ours) & set(theirs):
                _assert_same_runs(trial, f"{name} of parameter {index}", ours[name], theirs[name],
                                  against=f"an optimizer of its own for parameter {index}, stepped where it has a "
                                          "gradient")
        if trial.backend.judged_against_torch and any(scale != 1.0 for scale in inputs.lr_scales):
            _assert_lr_schedule_followed(trial, inputs, ctx, base_lr, alone[0])
    except Mismatch as mismatch:
        _excuse_conditional(trial, LIFECYCLE, inputs, f"lifecycle ({inputs.events()}): "
                            f"{str(mismatch).splitlines()[0]}", kind="mismatch")
        raise Mismatch(f"lifecycle ({inputs.events()}): {mismatch}", mismatch.max_abs_error,
                       mismatch.max_rel_error) from None


def _excuse_conditional(trial: Trial, prop: str, inputs: Any, detail: str, kind: str) -> None:
    """Raise DivergenceObserved when a registered ConditionalDivergence of this backend and property ``prop``
    (of the ``kind``: a mismatch, or an error) is triggered by the example; a candidate is excused only by the
    three-way verdict."""
    if trial.backend.judged_against_torch:
        return
    for entry in lookup(op=trial.op.name, backend=trial.backend.name, device=trial.device, dtype=trial.dtype,
                        property=prop):
        if isinstance(entry, ConditionalDivergence) and entry.kind == kind and entry.triggered(inputs):
            raise DivergenceObserved(entry, detail) from None


def observe_lifecycle(trial: Trial, inputs: LifecycleInputs) -> dict[str, Any]:
    """The lifecycle run's parameters and states, flat (what the three-way verdict compares with torch's)."""
    ctx = RunContext(trial.device, torch_dtype(trial.dtype))
    base_lr = float(trial.op.hyperparameters(inputs.hyperparameters)["lr"])
    together = trial.backend.drive_optimizer(trial.op.name, ctx,
                                             lambda cls: run_lifecycle(cls, inputs, ctx, base_lr))
    return {f"{name} of parameter {index}": value for index, outputs in enumerate(together)
            for name, value in outputs.items() if hasattr(value, "shape")}


def _assert_lr_schedule_followed(trial: Trial, inputs: LifecycleInputs, ctx: RunContext, base_lr: float,
                                 ours: dict) -> None:
    """The candidate's first parameter, alone, against torch's class on the same steps and lr schedule."""
    torch_class = trial.op.torch_implementation
    theirs = run_member_alone(torch_class, inputs, 0, ctx, base_lr)
    member = inputs.members[0]
    steps = OptimizerInputs(member.param, [g for g in member.grads if g is not None], inputs.hyperparameters)
    tols = tolerances(trial.op, steps, trial.dtype)
    tolerance = tols.get("param")
    compare_outputs({"param": ours["param"]}, {"param": theirs["param"]}, {"param": tolerance},
                    against=f"torch's {torch_class.__name__} with the same lr set before each step (a scheduler's)")


# ---------------------------------------------------------------- complex dtypes

COMPLEX_AGREES = "complex-agrees"  # the property (an optimizer record declares it; divergences name it)
COMPLEX_OF = {"float32": torch.complex64, "float64": torch.complex128}
# a candidate opts in to complex-agrees with this class attribute (torch's OptimizerInfo supports_complex): one
# written for real parameters, as most are, is not judged on complex ones (unsupported, with this reason)
SUPPORTS_COMPLEX = "supports_complex"


def _as_complex(inputs: OptimizerInputs, dtype: torch.dtype, device) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The example's parameter and gradients (last dim: real, imaginary) as complex tensors."""
    param = torch.view_as_complex(torch.from_numpy(inputs.param.copy()).to(dtype).to(device).contiguous())
    grads = []
    for grad in inputs.grads:
        if isinstance(grad, CooArray):
            parts = torch.from_numpy(grad.values.copy()).to(dtype).to(device).contiguous()
            values = (torch.view_as_complex(parts) if parts.numel() else
                      torch.zeros(parts.shape[:-1], dtype=COMPLEX_OF[str(dtype).replace("torch.", "")], device=device))
            grads.append(torch.sparse_coo_tensor(torch.from_numpy(grad.indices.copy()).to(device), values,
                                                 grad.size[:-1]))
        else:
            grads.append(torch.view_as_complex(torch.from_numpy(grad.copy()).to(dtype).to(device).contiguous()))
    return param, grads


def _complex_run(optimizer_class, inputs: OptimizerInputs, ctx: RunContext) -> dict[str, Any]:
    """The optimizer over the complex parameter (``ctx.dtype``: its parts' dtype): the parameter and its
    state's tensors as view_as_real. The tensors are built before the optimizer sees them: only the
    optimizer's own refusal escapes as torch's (a harness error raises RuntimeError before it)."""
    try:
        param, grads = _as_complex(inputs, ctx.dtype, ctx.torch_device)
    except Exception as exc:  # noqa: BLE001 - never mistaken for an optimizer's refusal
        raise RuntimeError(f"harness: the complex example could not be built: {exc}") from exc
    optimizer = optimizer_class([param], **inputs.hyperparameters)
    for grad in grads:
        param.grad = grad
        optimizer.step()
    state = {key: _dense(value) for key, value in optimizer.state.get(param, {}).items()}
    return {"param": torch.view_as_real(param.detach()),
            **{f"state[{key!r}]": torch.view_as_real(value) if torch.is_tensor(value) and value.is_complex() else value
               for key, value in state.items()}}


def _dense(value: Any) -> Any:
    """A sparse state tensor (SGD's momentum buffer of sparse gradients) as a dense one, to compare."""
    return value.to_dense() if torch.is_tensor(value) and value.is_sparse else value


def _real_run(optimizer_class, inputs: OptimizerInputs, ctx: RunContext) -> dict[str, Any]:
    param = torch.from_numpy(inputs.param.copy()).to(ctx.dtype).to(ctx.torch_device)
    optimizer = optimizer_class([param], **inputs.hyperparameters)
    for grad in inputs.grads:
        param.grad = grad_to_torch(grad, ctx)
        optimizer.step()
    return {"param": param.detach(),
            **{f"state[{key!r}]": _dense(value) for key, value in optimizer.state.get(param, {}).items()}}


def check_complex_agrees(trial: Trial, inputs: OptimizerInputs) -> None:
    """torch's optimizers take a complex parameter as the pairs of reals torch.view_as_real shows
    (torch/optim/_functional: ``_view_as_real``; torch's test_complex): the optimizer over complex64/complex128
    parameters and gradients equals itself over their view_as_real, parameter and every state tensor, within
    the tolerance of a correct implementation (complex arithmetic rounds otherwise than on pairs of reals).
    Where torch refuses complex parameters (SparseAdam: ValueError), the backend refuses them with the same
    type of error. A failure names the complex dtype."""
    op = trial.op
    ctx = RunContext(trial.device, torch_dtype(trial.dtype))
    complex_dtype = COMPLEX_OF[trial.dtype]
    name = str(complex_dtype).replace("torch.", "")
    torch_refusal = None
    _as_complex(inputs, ctx.dtype, ctx.torch_device)  # (a harness error here is an error, never a refusal)
    try:
        _complex_run(op.torch_implementation, inputs, ctx)
    except Exception as refusal:  # noqa: BLE001 - torch's documented refusal of complex parameters
        torch_refusal = refusal

    def runs(optimizer_class):
        if trial.backend.judged_against_torch and not getattr(optimizer_class, SUPPORTS_COMPLEX, False):
            raise Unsupported(f"the candidate does not declare {SUPPORTS_COMPLEX} = True (a class attribute, torch's "
                              f"OptimizerInfo field): declare it to be judged on {name} parameters")
        try:
            got = _complex_run(optimizer_class, inputs, ctx)
        except Unsupported:
            raise
        except Exception as exc:  # noqa: BLE001
            if torch_refusal is not None and isinstance(exc, type(torch_refusal)):
                return None, None
            raise Mismatch(f"{name}: raises {exception_text(exc)} on complex parameters, "
                           + (f"where torch raises {exception_text(torch_refusal)}" if torch_refusal is not None
                              else "which torch's optimizer takes as pairs of reals")) from exc
        if torch_refusal is not None:
            raise Mismatch(f"{name}: steps complex parameters, where torch refuses them: "
                           f"{exception_text(torch_refusal)}")
        return got, _real_run(optimizer_class, inputs, ctx)

    got, want = trial.backend.drive_optimizer(op.name, ctx, runs)
    if got is None:
        return
    against = f"the same optimizer on torch.view_as_real of the {name} parameter and gradients"
    by_output = tolerances(op, inputs, trial.dtype)  # the real view is an example of the op's own
    tols = {"param": by_output.get("param"),
            **{f"state[{key!r}]": by_output.get(output) for output, key in op.state_outputs.items()}}
    try:
        for key in want:
            if key not in got:
                raise Mismatch(f"has no {key} for the complex parameter, where the real view has one")
            value, expected = got[key], want[key]
            if hasattr(expected, "shape") and hasattr(value, "shape") and value.shape != expected.shape:
                expected = expected.reshape(value.shape) if expected.numel() == value.numel() else expected
            if hasattr(expected, "shape") and expected.dim() and hasattr(value, "shape"):
                # complex arithmetic (SGD's add_(grad, alpha=-lr) on complex numbers, no view_as_real) rounds
                # otherwise than on pairs of reals: the same within what a correct implementation may be off by
                compare_outputs({key: value}, {key: expected}, {key: tols.get(key) or agreement_tolerance(trial.dtype)},
                                against=against)
            elif to_numpy(value).tolist() != to_numpy(expected).tolist():
                raise Mismatch(f"{key} is {to_numpy(value).tolist()}, {against}: {to_numpy(expected).tolist()}")
    except Mismatch as mismatch:
        _excuse_conditional(trial, COMPLEX_AGREES, inputs, f"{name}: {str(mismatch).splitlines()[0]}", kind="mismatch")
        raise Mismatch(f"{name}: {mismatch}", mismatch.max_abs_error, mismatch.max_rel_error) from None


# ---------------------------------------------------------------- sizes

def check_sizes(trial: Trial, inputs: Any) -> None:
    """agrees-with-reference on inputs at kernel-size boundaries (``Op.sizes_strategy``); a failure names the
    size (``Op.describe_size``)."""
    try:
        check_agrees_with_reference(trial, inputs)
    except Mismatch as mismatch:
        raise Mismatch(f"size: {trial.op.describe_size(inputs)}: {mismatch}", mismatch.max_abs_error,
                       mismatch.max_rel_error) from None


class _PathTwin(Property):
    """A property whose items are the torch path backends' only (:func:`_is_torch_path`)."""

    def accepts(self, backend) -> bool:
        return _is_torch_path(backend) and super().accepts(backend)


def _member_cases(inputs: ParamGroupsInputs, dtype: str):
    return [(f"param-{index}", member) for index, member in enumerate(inputs.members)]


def _dense_cases(inputs: OptimizerInputs, dtype: str):
    return [("sparse", inputs), ("densified", densified(inputs, dtype))]


# kernel-triton drives the very optimizer classes of kernel (conformance.kernels), which own the
# param groups and the state_dict; only the step kernel differs, and Triton's interpreter is slow
OPTIMIZER_OBJECT_TWINS = ("kernel-triton",)


# a generic check is a Property of no op yet (trial.unbound); property_of binds it to an op's declaration
CHECKS: dict[str, Property] = {
    "agrees-with-reference": unbound(check_agrees_with_reference, skips_oracle=True),
    # the optimizers' long trajectories: the same check, on candidates only (a candidate is what may round a
    # hyperparameter once per step; the built-in backends are stock torch, whose items would cost the main job)
    "long-trajectory": unbound(check_agrees_with_reference, skips_oracle=True, candidates_only=True),
    "rounds-correctly": unbound(check_rounds_correctly, skips_oracle=True, dtypes=HALF_DTYPES),
    "rejects-invalid": unbound(check_rejects_invalid),
    # the suite's own backends are stock torch and its documented idioms: their determinism is torch's
    # (and the main job's minute); a candidate is what may hold a race or an uninitialised buffer
    "deterministic": unbound(check_deterministic, skips_oracle=True, candidates_only=True),
    "unspecified-unchanged": unbound(check_unspecified_unchanged),
    "sparse-equals-dense": unbound(check_sparse_equals_dense, to_cases=_dense_cases),
    PARAM_GROUPS: unbound(check_param_groups, to_cases=_member_cases, skip_backends=OPTIMIZER_OBJECT_TWINS,
                          needs_optimizer_object=True, observe=observe_param_groups),
    # the twins of torch's own code paths: on the torch path backends only (foreach, fused), against torch's
    # for-loop step on the same inputs
    PATHS_AGREE: _PathTwin("", "", "", None, check_paths_agree, skips_oracle=True),
    # the step under torch.compile (backends/compiled.py) against the same step run eagerly, the same check
    COMPILED_AGREES: _PathTwin("", "", "", None, check_paths_agree, skips_oracle=True),
    LIFECYCLE: unbound(check_lifecycle, needs_optimizer_object=True, skip_backends=OPTIMIZER_OBJECT_TWINS,
                       to_cases=lambda example, dtype: [(f"lifecycle: {example.events()}", example)],
                       observe=lambda trial, example: observe_lifecycle(trial, example)),
    COMPLEX_AGREES: unbound(check_complex_agrees, needs_optimizer_object=True,
                              skip_backends=OPTIMIZER_OBJECT_TWINS),
    SIZES: unbound(check_sizes, skips_oracle=True),
    LAYOUT_INVARIANT: unbound(check_layout_invariant, to_cases=_layout_cases, skips_oracle=True),
    "state-dict-resume": unbound(check_state_dict_resume,
                                 to_cases=lambda example, dtype: _member_cases(example[0], dtype),
                                 skip_backends=OPTIMIZER_OBJECT_TWINS, needs_optimizer_object=True,
                                 observe=lambda trial, example: _flat_outputs(trial.op,
                                                                              _grouped_runs(trial, *example)[0])),
}
