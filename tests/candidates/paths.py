"""Deliberately wrong code paths of torch's optimizers: each is torch's class, whose foreach step
takes a 1% larger learning rate (the slip the twins ``paths-agree`` must catch; tests/test_torch_paths.py)."""

from __future__ import annotations

import torch


def _slipped_step(torch_class):
    def step(self, closure=None):
        foreach = [group for group in self.param_groups if group.get("foreach")]
        saved = [group["lr"] for group in foreach]
        for group in foreach:
            group["lr"] = group["lr"] * 1.01
        try:
            return torch_class.step(self, closure)
        finally:
            for group, lr in zip(foreach, saved):
                group["lr"] = lr
    return step


class SlipForeachAdagrad(torch.optim.Adagrad):
    """torch.optim.Adagrad, whose foreach step (foreach=True) uses lr * 1.01."""

    step = _slipped_step(torch.optim.Adagrad)


class SlipForeachSGD(torch.optim.SGD):
    """torch.optim.SGD, whose foreach step (foreach=True) uses lr * 1.01."""

    step = _slipped_step(torch.optim.SGD)


class UlpForeachAdagrad(torch.optim.Adagrad):
    """torch.optim.Adagrad, whose foreach step (foreach=True) leaves each parameter one ulp up: within the
    agreement tolerance, but not the for-loop step's bits (what foreach on cpu declares, ``bit_exact_on``)."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            if group.get("foreach"):
                for param in group["params"]:
                    param.copy_(torch.nextafter(param, torch.full_like(param, float("inf"))))
        return loss
