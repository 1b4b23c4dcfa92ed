"""A candidate whose outputs hold NaN, inf and -inf: how they are written and shown.

torch's own Adagrad, except on the 3 x 3 parameter of ``tests/data/robustness_adagrad.yaml``'s
``misbehave-here`` case, where the first row of the parameter becomes [NaN, inf, -inf]."""

from __future__ import annotations

import torch


class NonFiniteAdagrad(torch.optim.Adagrad):
    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if tuple(p.shape) == (3, 3):
                    p[0, :3] = torch.tensor([float("nan"), float("inf"), float("-inf")], dtype=p.dtype)
        return loss
