"""A candidate that only drawn examples find: right on the op records' explicit examples, wrong on
larger inputs, so Hypothesis finds it while drawing and shrinks it (the shrinking notice's subject
in tests/test_check_robustness.py; a failure on an explicit example is not shrunk)."""

from __future__ import annotations

import torch


class LargeParamLrSlipAdagrad(torch.optim.Adagrad):
    """torch's Adagrad, except that a param group holding a parameter of more than 4 entries steps
    with twice its lr (the explicit examples' parameter has 4)."""

    @torch.no_grad()
    def step(self, closure=None):
        saved = [group["lr"] for group in self.param_groups]
        for group in self.param_groups:
            if any(p.numel() > 4 for p in group["params"]):
                group["lr"] = group["lr"] * 2
        try:
            return super().step(closure)
        finally:
            for group, lr in zip(self.param_groups, saved):
                group["lr"] = lr
