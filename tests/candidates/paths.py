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
