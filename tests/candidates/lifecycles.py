"""Planted candidates for the lifecycle dimension (the property lifecycle): each is torch's optimizer except
for one mistake that only a parameter's life in a real training job shows. ``check`` must fail each and name
the lifecycle event."""

from __future__ import annotations

import torch


class GlobalStepAdagrad(torch.optim.Adagrad):
    """Counts steps once per ``optimizer.step()`` for every parameter (one counter), not per parameter: a
    parameter that missed a gradient, or joined by add_param_group later, gets the decayed lr of steps it
    never took (``lr / (1 + (step - 1) * lr_decay)``)."""

    @torch.no_grad()
    def step(self, closure=None):
        self.steps_taken = getattr(self, "steps_taken", 0) + 1
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and "step" in self.state[p]:  # (a parameter added later: made at its first step)
                    self.state[p]["step"].fill_(self.steps_taken - 1)  # torch's step adds the one
        return super().step(closure)


class CachedLrSGD(torch.optim.SGD):
    """Reads each group's lr once, in the constructor (as a hand-written loop that copies the hyperparameters
    into attributes does): the lr a scheduler sets between steps never reaches the update."""

    def __init__(self, params, *args, **kwargs):
        super().__init__(params, *args, **kwargs)
        self.cached_lr = [group["lr"] for group in self.param_groups]

    @torch.no_grad()
    def step(self, closure=None):
        current = [group["lr"] for group in self.param_groups]
        for group, lr in zip(self.param_groups, self.cached_lr):
            group["lr"] = lr
        try:
            return super().step(closure)
        finally:
            for group, lr in zip(self.param_groups, current):
                group["lr"] = lr
