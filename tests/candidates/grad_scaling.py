"""Candidates for the grad-scaling property (torch.amp.GradScaler's contract with an optimizer that takes the
scaling itself, as torch's fused steps do): torch's for-loop Adagrad that unscales ``optimizer.grad_scale`` and
skips a step whose ``optimizer.found_inf`` is set -- correct, and with one mistake each."""

from __future__ import annotations

import torch


class ScalingAdagrad(torch.optim.Adagrad):
    """Correct: divides the gradients by grad_scale, and skips the whole step where found_inf is set."""

    supports_grad_scaling = True  # judged on GradScaler's contract (grad-scaling)
    unscales = True
    skips = True

    @torch.no_grad()
    def step(self, closure=None):
        scale, found_inf = getattr(self, "grad_scale", None), getattr(self, "found_inf", None)
        if self.skips and found_inf is not None and float(found_inf) != 0:
            return None
        given = {}  # the gradients as the caller set them: put back after the step (it must leave param.grad)
        if self.unscales and scale is not None:
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        given[p], p.grad = p.grad, p.grad / scale
        self.grad_scale = self.found_inf = None  # torch's for-loop step asserts it is given none
        try:
            return super().step(closure)
        finally:
            self.grad_scale, self.found_inf = scale, found_inf
            for p, grad in given.items():
                p.grad = grad


class StepsThroughFoundInfAdagrad(ScalingAdagrad):
    """Unscales, but steps where found_inf is set (its inf gradients reach the parameter and the state)."""

    skips = False


class IgnoresGradScaleAdagrad(ScalingAdagrad):
    """Skips where found_inf is set, but steps with the scaled gradients (never divides by grad_scale)."""

    unscales = False
