"""The suite's generic checks, by property name (:data:`CHECKS`): what a property an op record
declares without a check of its own runs (``GeneratedProperty.check`` None).

Each check runs a backend through a :class:`~conformance.cases.trial.Trial` and raises Mismatch
where it misses the property, or DivergenceObserved where a known divergence explains the miss:
agrees-with-reference, rounds-correctly, rejects-invalid and deterministic for every op, and the
optimizers' unspecified-unchanged, sparse-equals-dense, param-groups and state-dict-resume.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from conformance.backends.base import Backend
from conformance.cases.trial import DivergenceObserved, Trial, same_as_torch
from conformance.core import tolerances
from conformance.core.compare import assert_bits_equal, compare_outputs
from conformance.core.divergences import Divergence, PathDivergence, lookup
from conformance.core.dtypes import HALF_DTYPES
from conformance.ops.base import Op
# the machinery's own modules, not the package (which imports the records): one level less
from conformance.ops.optimizers.configurations import describe, inputs_of, row_of, simpler_rows
from conformance.ops.optimizers.drive import run_optimizer, run_param_groups
from conformance.ops.optimizers.inputs import OptimizerInputs, ParamGroupsInputs
from conformance.ops.optimizers.reference import dense_grad_and_mask, densified
from conformance.core.tensors import CooArray, quantize, to_numpy, torch_dtype
from conformance.core.types import Mismatch, RunContext, Unsupported, exception_text, safe_text
from conformance.judging.verdict import StockTorch

if TYPE_CHECKING:
    from conformance.ops.optimizers.base import OptimizerOp


def check_agrees_with_reference(trial: Trial, inputs: Any) -> None:
    outputs = trial.run(inputs)
    trial.op.check_invariants(outputs, inputs)
    reference = trial.reference(inputs)
    trial.compare(outputs, reference, tolerances.generated(trial.op, inputs, trial.dtype, reference), inputs,
                  against="the NumPy reference")


# optimizers

def check_configuration(trial: Trial, inputs: OptimizerInputs) -> None:
    """agrees-with-reference on one configuration of the op's space; a miss is shrunk to the simplest
    configuration that still misses (one setting back to torch's default at a time) and names it
    (``weight_decay=0.1, maximize=True, dense steps``)."""
    try:
        check_agrees_with_reference(trial, inputs)
    except Mismatch as mismatch:
        op = trial.optimizer
        row, failure = row_of(op, inputs), mismatch
        while True:
            for simpler in simpler_rows(op, row):
                try:
                    check_agrees_with_reference(trial, inputs_of(simpler))
                except Mismatch as still:
                    row, failure = simpler, still
                    break
                except Exception:  # noqa: BLE001 - a simpler configuration that errs or is excused shrinks no further
                    continue
            else:
                break
        drawn = describe(op, inputs)
        named = describe(op, inputs_of(row))
        raise Mismatch(f"configuration {named}" + (f" (shrunk from {drawn})" if named != drawn else "") + f": {failure}",
                       failure.max_abs_error, failure.max_rel_error) from None


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

    previous = {name: to_numpy(value) for name, value in trial.optimizer.state_before_steps(run_prefix, inputs).items()}
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
    title = trial.optimizer.title
    compared = {name: touched for name in names}
    compared["param"] = touched & ~undefined_when_densified(trial.optimizer, dense_inputs, trial.dtype)
    pick = {name: to_numpy(sparse_out[name])[compared[name]] for name in names}
    want = {name: to_numpy(dense_out[name])[compared[name]] for name in names}
    tols = tolerances.generated(trial.op, inputs, trial.dtype)

    def model():
        emulated, dense_emulated = trial.emulate(inputs), trial.emulate(dense_inputs)
        # both runs must match stock torch's float16/bfloat16 arithmetic for the divergence to apply
        compare_outputs({n: want[n] for n in names}, {n: dense_emulated[n][compared[n]] for n in names}, tols,
                        against=f"dense {title} in stock torch's arithmetic")
        return {n: emulated[n][compared[n]] for n in names}

    trial.compare(pick, want, tols, inputs, against=f"dense {title} on the densified gradients (same backend)",
                  model=model)


def undefined_when_densified(op: OptimizerOp, dense_inputs: OptimizerInputs, dtype: str) -> np.ndarray:
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




def _state_names(op: Op) -> list[str]:
    return ["param", *op.state_outputs]


def grouped_runs(trial: Trial, inputs: ParamGroupsInputs, resume_after: int | None = None):
    """(the grouped run's member outputs, its idle parameters, each member run alone)."""
    ctx = RunContext(trial.device, torch_dtype(trial.dtype))
    op = trial.op

    def runs(optimizer_class):
        together, idle = run_param_groups(optimizer_class, inputs, ctx, op.state_outputs, resume_after=resume_after)
        alone = [run_optimizer(optimizer_class, member, ctx, op.state_outputs) for member in inputs.members]
        return together, idle, alone

    return trial.backend.drive_optimizer(op.name, ctx, runs)


def flat_outputs(op: Op, members: list[dict]) -> dict[str, Any]:
    return {f"{name}[{index}]": outputs[name] for index, outputs in enumerate(members) for name in _state_names(op)}


def observe_param_groups(trial: Trial, inputs: ParamGroupsInputs) -> dict[str, Any]:
    return flat_outputs(trial.op, grouped_runs(trial, inputs)[0])


PARAM_GROUPS = "param-groups"  # the property (registered divergences name it)


def check_param_groups(trial: Trial, inputs: ParamGroupsInputs) -> None:
    """One optimizer over two param groups (different shapes, hyperparameters, one parameter without
    a gradient) moves each parameter exactly as an optimizer of its own would, and leaves the
    parameter without a gradient untouched."""
    together, idle, alone = grouped_runs(trial, inputs)
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
            trial.assert_same_runs(f"{name} of parameter {index}", ours[name], theirs[name],
                              against=against.format(index=index))


def _param_groups_divergence(trial: Trial, inputs: ParamGroupsInputs, together: list[dict]):
    """The known divergence of stock torch the backend's grouped run matches, or None. A candidate
    (judged against torch) is excused only where stock torch matches the same model."""
    found = lookup(op=trial.op.name, device=trial.device, dtype=trial.dtype, property=PARAM_GROUPS)
    for entry in found:
        if entry.model is None:
            continue
        modelled = entry.model(inputs)
        if not _matches_group_model(trial, inputs, modelled, together, entry):
            continue
        if not trial.backend.judged_against_torch:
            return entry
        # a candidate is excused by behaving as stock torch does: torch must match the model too
        torch_trial = Trial(trial.op, StockTorch(), trial.device, trial.dtype)
        if _matches_group_model(torch_trial, inputs, modelled, grouped_runs(torch_trial, inputs)[0], entry):
            return same_as_torch(entry)
    return None


def _matches_group_model(trial: Trial, inputs: ParamGroupsInputs, modelled: ParamGroupsInputs,
                         together: list[dict], entry) -> bool:
    alone = grouped_runs(trial, modelled)[2]
    try:
        _assert_members_equal(trial, together, alone, against="the model of " + entry.key)
    except Mismatch:
        return False
    return True


def check_state_dict_resume(trial: Trial, example: tuple[ParamGroupsInputs, int]) -> None:
    """Saving ``state_dict()`` after step k (through torch.save/torch.load) and loading it into a
    fresh optimizer on fresh parameters continues the trajectory exactly as if never interrupted."""
    inputs, resume_after = example
    whole = grouped_runs(trial, inputs)[0]
    resumed = grouped_runs(trial, inputs, resume_after)[0]
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
                trial.assert_same_runs(name, a, b, against="the first run of the same inputs")
            elif a != b:
                raise Mismatch(f"{name} differs between two runs of the same inputs: {a!r} vs {b!r}")
    except Mismatch as mismatch:
        raise Mismatch(f"nondeterministic: the same inputs run twice give different results -- {mismatch}\n"
                       + _runs_side_by_side(first, second), mismatch.max_abs_error, mismatch.max_rel_error) from None


def is_torch_path(backend: Backend) -> bool:
    """A backend that runs one of torch's own code paths (conformance/backends/torch_paths.py): it
    names the path (``torch_path``) and runs torch's for-loop step beside it (``run_for_loop``)."""
    return backend.torch_path is not None


def check_paths_agree(trial: Trial, inputs: OptimizerInputs) -> None:
    """The differential twin of one of torch's code paths: the path (the trial's backend: foreach,
    fused) and torch's for-loop step of the same optimizer, on the same inputs, give the same outputs
    -- bit for bit in float32/float64 on the devices the op's TorchPath declares (``bit_exact_on``:
    foreach on cpu, the same arithmetic tensor by tensor), else within the agreement tolerance (:func:`conformance.core.tolerances.agreement`: another order of
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
        declared = op.torch_path(path) if path is not None else None  # (a path's backend names one)
        if declared is not None and trial.device in declared.bit_exact_on and trial.dtype not in HALF_DTYPES:
            for name in names:
                assert_bits_equal(name, got[name], want[name], None, against=against)
        else:
            compare_outputs({n: got[n] for n in names}, {n: want[n] for n in names},
                            tolerances.per_output(names, (), tolerances.agreement(trial.dtype)), against=against)
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

    twin = trial.backend.twin_property  # the compiled backend's: compiled-agrees
    for entry in lookup(op=trial.op.name, backend=trial.backend.name, device=trial.device, dtype=trial.dtype,
                        property=twin):
        explains = entry.explains if isinstance(entry, PathDivergence) else None
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
                        tolerances.generated(trial.op, inputs, trial.dtype, reference), against="the NumPy reference")
    except Mismatch:
        return False
    return True


# ---------------------------------------------------------------- sizes

def check_sizes(trial: Trial, inputs: Any) -> None:
    """agrees-with-reference on inputs at kernel-size boundaries (``Op.strategies.sizes``); a failure names the
    size (``Op.describe_size``)."""
    try:
        check_agrees_with_reference(trial, inputs)
    except Mismatch as mismatch:
        raise Mismatch(f"size: {trial.op.describe_size(inputs)}: {mismatch}", mismatch.max_abs_error,
                       mismatch.max_rel_error) from None
