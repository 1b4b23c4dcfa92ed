"""Candidates whose numbers are right (or close) but that break their op's contract otherwise:
another dtype than the contract states, mutated inputs, a rewritten gradient, SystemExit.

``coalesce`` picks its misbehaviour by the input's size, so one run shows each next to a
correct item (tests/test_bad_input.py).
"""

from __future__ import annotations

import torch


def coalesce(tensor: torch.Tensor) -> torch.Tensor:
    size = tensor.shape[0]
    result = tensor.coalesce()
    if size == 2:  # another dtype than its input's
        return result.to(torch.float64 if tensor.dtype != torch.float64 else torch.float32)
    if size == 3:  # right answer, then zeroes the input's indices and scales its values by 1000
        tensor._indices().zero_()
        tensor._values().mul_(1000)
        return result
    if size == 4:
        raise SystemExit(3)
    return result


def masked_mean_float64(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The right mean, computed and returned in float64 whatever values.dtype is."""
    return (values.double() * mask).sum() / mask.sum()


class GradRewritingAdagrad(torch.optim.Adagrad):
    """torch's Adagrad, then doubles the values of the gradient the harness set."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and p.grad.is_sparse:
                    p.grad._values().mul_(2)
        return loss
