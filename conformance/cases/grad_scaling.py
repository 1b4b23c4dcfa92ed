"""The property grad-scaling: an optimizer step that takes ``grad_scale`` and ``found_inf`` (torch's fused
steps, as ``torch.amp.GradScaler`` drives them) divides the scale out exactly, and a step whose
``found_inf`` is set leaves the parameter and every state tensor as they were."""

from __future__ import annotations

from dataclasses import dataclass

from conformance.cases.trial import DivergenceObserved, Trial
from conformance.core.tensors import torch_dtype
from conformance.core.types import Mismatch, RunContext, Unsupported
from conformance.ops.base import GRAD_SCALING  # the property (the fused paths declare it: TorchPath.twins)
from conformance.ops.optimizers.drive import run_scaled, run_whole
from conformance.ops.optimizers.inputs import OptimizerInputs

# a candidate opts in with this class attribute: one that ignores optimizer.grad_scale/found_inf, as torch's
# for-loop and foreach steps do, is not judged on them (unsupported, with this reason)
SUPPORTS_GRAD_SCALING = "supports_grad_scaling"
FIRST_SKIPPED = "the first step skipped"
SCALE = 2.0  # a power of two: multiplying and dividing it out is exact unless a gradient overflows


@dataclass(frozen=True)
class ScalingCase:
    """What a registered divergence of property grad-scaling is triggered by: the example, and whether the
    case skipped the optimizer's first step (found_inf set before any state existed)."""

    inputs: OptimizerInputs
    skipped_first: bool


def _same_state(trial: Trial, got: dict, want: dict, against: str) -> None:
    """The same state entries, each bit for bit on cpu (within the agreement tolerance elsewhere)."""
    if set(got) != set(want):
        extra, missing = sorted(set(got) - set(want)), sorted(set(want) - set(got))
        shown = {key: got[key].reshape(-1)[:6].tolist() for key in extra if hasattr(got[key], "reshape")}
        raise Mismatch(f"has {', '.join(extra) or 'no extra state'}{f' {shown}' if shown else ''}"
                       f"{' and lacks ' + ', '.join(missing) if missing else ''}, where {against} has only "
                       f"{', '.join(sorted(want)) or 'nothing'}")
    for key in want:
        trial.assert_same_runs(key, got[key], want[key], against=against)


def check_grad_scaling(trial: Trial, inputs: OptimizerInputs) -> None:
    """GradScaler's contract with an optimizer that takes the scaling (``optimizer.grad_scale``,
    ``optimizer.found_inf``, read by torch's fused steps): gradients scaled by 2 with ``grad_scale`` 2 step
    exactly as the unscaled ones; a step with ``found_inf`` 1 (its gradient inf) changes nothing -- skipped
    first, the parameter and state equal an optimizer's that has not stepped, and the run goes on as one
    over the later steps; skipped last, they equal the run without that step. A failure names the case."""
    ctx = RunContext(trial.device, torch_dtype(trial.dtype))
    steps = len(inputs.grads)
    later = OptimizerInputs(inputs.param, inputs.grads[1:], inputs.hyperparameters)
    earlier = OptimizerInputs(inputs.param, inputs.grads[:-1], inputs.hyperparameters)
    first = OptimizerInputs(inputs.param, inputs.grads[:1], inputs.hyperparameters)
    untouched = OptimizerInputs(inputs.param, [], inputs.hyperparameters)

    def runs(optimizer_class) -> list[tuple[str, dict, dict, str]]:
        if trial.backend.judged_against_torch and not getattr(optimizer_class, SUPPORTS_GRAD_SCALING, False):
            raise Unsupported(f"the candidate does not declare {SUPPORTS_GRAD_SCALING} = True (a class attribute: "
                              "its step reads optimizer.grad_scale and optimizer.found_inf, as torch's fused steps "
                              "do): declare it to be judged on GradScaler's contract")
        cases = [
            (f"{FIRST_SKIPPED} (found_inf)", run_scaled(optimizer_class, first, ctx, [(1.0, True)]),
             run_whole(optimizer_class, untouched, ctx), "an optimizer that has not stepped"),
            (f"gradients scaled by {SCALE:g}", run_scaled(optimizer_class, inputs, ctx, [(SCALE, False)] * steps),
             run_whole(optimizer_class, inputs, ctx), "the same steps unscaled"),
        ]
        if steps > 1:
            cases += [
                (f"{FIRST_SKIPPED}, then the others",
                 run_scaled(optimizer_class, inputs, ctx, [(1.0, True)] + [(1.0, False)] * (steps - 1)),
                 run_whole(optimizer_class, later, ctx), "the run over the later steps alone"),
                ("the last step skipped",
                 run_scaled(optimizer_class, inputs, ctx, [(1.0, False)] * (steps - 1) + [(1.0, True)]),
                 run_whole(optimizer_class, earlier, ctx), "the run without the last step"),
            ]
        return cases

    known = None  # a registered divergence that explains a case: reported once every case has been checked
    for what, got, want, against in trial.backend.drive_optimizer(trial.op.name, ctx, runs):
        try:
            _same_state(trial, got, want, against)
        except Mismatch as mismatch:
            try:
                trial.excuse_conditional(GRAD_SCALING, ScalingCase(inputs, what.startswith(FIRST_SKIPPED)),
                                         f"grad scaling ({what}): {str(mismatch).splitlines()[0]}", kind="mismatch")
            except DivergenceObserved as observed:
                known = known or observed
                continue
            raise Mismatch(f"grad scaling ({what}): {mismatch}", mismatch.max_abs_error,
                           mismatch.max_rel_error) from None
    if known is not None:
        raise known
