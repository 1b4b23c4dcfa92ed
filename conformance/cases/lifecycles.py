"""The property lifecycle (the lifecycle dimension of the optimizers' input space,
:class:`~conformance.ops.optimizers.inputs.LifecycleInputs`): one optimizer over parameters that miss
gradients, are frozen, 0-d or zero-size, of a second dtype, join by add_param_group, with lr changed between
steps (a new value, or a tensor's fill_) and a state_dict round trip, moves each parameter as an optimizer of its
own would."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from conformance.cases.trial import Trial
from conformance.core import tolerances
from conformance.core.compare import compare_outputs
from conformance.core.tensors import torch_dtype
from conformance.core.types import Mismatch, RunContext, Unsupported, exception_text
from conformance.ops.optimizers.drive import run_lifecycle, run_member_alone
from conformance.ops.optimizers.inputs import LifecycleInputs, OptimizerInputs

LIFECYCLE = "lifecycle"  # the property (an optimizer record declares it)


def check_lifecycle(trial: Trial, inputs: LifecycleInputs) -> None:
    """One optimizer through a parameter lifecycle (:class:`LifecycleInputs`: missing gradients, frozen,
    0-d and zero-size parameters, parameters of a second dtype, add_param_group mid-run, lr changed between
    steps, a 0-d tensor or one changed in place, a weights_only state_dict round trip) leaves each parameter and
    the state entries its op's contract names (:func:`contract_entries`) bit for bit as an optimizer of its own
    stepped only where that parameter has a gradient (the agreement tolerance off cpu); a frozen parameter keeps
    its value. A candidate's own run (first parameter) with the lr changed also agrees with stock torch's class
    (:func:`_assert_lr_schedule_followed`). A failure names the events."""
    op = trial.optimizer
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
            trial.excuse_conditional(LIFECYCLE, inputs, f"lifecycle ({inputs.events()}): "
                                f"{exception_text(exc).splitlines()[0]}", kind="error", error=exc)
            raise
        together, alone = [contract_entries(op, o) for o in together], [contract_entries(op, o) for o in alone]
        for index, (ours, theirs) in enumerate(zip(together, alone)):
            member = inputs.members[index]
            stepped = not member.frozen and any(g is not None for g in member.grads[member.start:])
            if set(ours) != set(theirs) and stepped:  # (state made at construction, or lazily at a first step)
                raise Mismatch(f"parameter {index} has state {sorted(ours)[1:]} where an optimizer of its own has "
                               f"{sorted(theirs)[1:]}")
            for name in set(ours) & set(theirs):
                trial.assert_same_runs(f"{name} of parameter {index}", ours[name], theirs[name],
                                  against=f"an optimizer of its own for parameter {index}, stepped where it has a "
                                          "gradient")
        if trial.backend.judged_against_torch and any(scale != 1.0 for scale in inputs.lr_scales):
            _assert_lr_schedule_followed(trial, inputs, ctx, base_lr, alone[0])
    except Mismatch as mismatch:
        trial.excuse_conditional(LIFECYCLE, inputs, f"lifecycle ({inputs.events()}): "
                            f"{str(mismatch).splitlines()[0]}", kind="mismatch")
        raise Mismatch(f"lifecycle ({inputs.events()}): {mismatch}", mismatch.max_abs_error,
                       mismatch.max_rel_error) from None


def observe_lifecycle(trial: Trial, inputs: LifecycleInputs) -> dict[str, Any]:
    """The lifecycle run's parameters and states, flat (what the three-way verdict compares with torch's)."""
    ctx = RunContext(trial.device, torch_dtype(trial.dtype))
    base_lr = float(trial.optimizer.hyperparameters(inputs.hyperparameters)["lr"])
    together = trial.backend.drive_optimizer(trial.op.name, ctx,
                                             lambda cls: run_lifecycle(cls, inputs, ctx, base_lr))
    return {f"{name} of parameter {index}": value for index, outputs in enumerate(together)
            for name, value in contract_entries(trial.op, outputs).items() if hasattr(value, "shape")}


def contract_entries(op: Any, outputs: dict[str, Any]) -> dict[str, Any]:
    """Of a run's parameter and state (:func:`~conformance.ops.optimizers.drive.whole_state`), the parameter and
    the state entries the op's contract names (``state_outputs``: Adagrad's sum and step; none for SGD, whose
    momentum buffer shows in the parameter): never an entry the contract leaves to the implementation."""
    named = {"param", *(f"state[{key!r}]" for key in op.state_outputs.values())}
    return {name: value for name, value in outputs.items() if name in named}


def _assert_lr_schedule_followed(trial: Trial, inputs: LifecycleInputs, ctx: RunContext, base_lr: float,
                                 ours: dict) -> None:
    """The candidate's first parameter, alone, against torch's class on the same steps and lr schedule, within
    the generated tolerance; where it differs, against torch's class run in float64 on the same values (the
    documented result) within the same tolerance: torch's own step may depart from that in the item's dtype
    (its recorded divergences: float16's eps of 1e-10 is 0, so a zero gradient entry gives 0/0 = NaN)."""
    torch_class = trial.op.torch_implementation
    member = inputs.members[0]
    steps = OptimizerInputs(member.param, [g for g in member.grads if g is not None], inputs.hyperparameters)
    tolerance = {"param": tolerances.generated(trial.op, steps, trial.dtype).get("param")}
    against = f"torch's {torch_class.__name__} with the same lr set before each step (a scheduler's)"
    theirs = run_member_alone(torch_class, inputs, 0, ctx, base_lr)
    try:
        compare_outputs({"param": ours["param"]}, {"param": theirs["param"]}, tolerance, against=against)
    except Mismatch as mismatch:
        if ctx.dtype == torch.float64:
            raise
        in_float64 = dataclasses.replace(inputs, members=[dataclasses.replace(member, dtype="float64"),
                                                          *inputs.members[1:]])
        documented = run_member_alone(torch_class, in_float64, 0, ctx, base_lr)
        try:
            compare_outputs({"param": ours["param"]}, {"param": documented["param"]}, tolerance,
                            against=f"{against}, run in float64 (the documented result)")
        except Mismatch:
            raise Mismatch(f"{mismatch}\n  nor does it agree with the same run in float64 (the documented result)",
                           mismatch.max_abs_error, mismatch.max_rel_error) from None
