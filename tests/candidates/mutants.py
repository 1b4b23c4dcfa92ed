"""Deliberately wrong implementations, each with one slip a user could make; the tests and the
gate must flag every one of them. Also a correct wrapper of torch's own classes as a control."""

from __future__ import annotations

import math

import torch


class SquareBeforeSumAdagrad(torch.optim.Adagrad):
    """Adagrad that squares each written entry before summing duplicates (skips coalesce)."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["sum"] = torch.full_like(p, group["initial_accumulator_value"])
                state["step"] += 1
                grad = p.grad
                if group["maximize"]:
                    grad = -grad
                if group["weight_decay"] != 0:
                    raise RuntimeError("weight_decay option is not compatible with sparse gradients")
                clr = group["lr"] / (1 + (state["step"].item() - 1) * group["lr_decay"])
                indices, values = grad._indices(), grad._values()
                squares = torch.sparse_coo_tensor(indices, values.pow(2), grad.shape).coalesce()
                state["sum"].add_(squares)
                summed = grad.coalesce()
                std = state["sum"].sparse_mask(summed)._values().sqrt().add_(group["eps"])
                p.add_(torch.sparse_coo_tensor(summed._indices(), summed._values() / std, grad.shape), alpha=-clr)
        return None


class PerRowStepSparseAdam(torch.optim.SparseAdam):
    """SparseAdam whose bias correction counts steps only when a gradient is non-empty."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                grad = p.grad.coalesce()
                if grad._nnz() == 0:
                    continue  # slip: the empty step is not counted
                state["step"] += 1
                step = state["step"].item()
                index = tuple(grad._indices())
                g = -grad._values() if group["maximize"] else grad._values()
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m[index] += (g - m[index]) * (1 - beta1)
                v[index] += (g * g - v[index]) * (1 - beta2)
                step_size = group["lr"] * math.sqrt(1 - beta2**step) / (1 - beta1**step)
                p[index] -= step_size * m[index] / (v[index].sqrt() + group["eps"])
        return None


def multiply_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The multiply-by-mask idiom: NaN * 0 = NaN lets a masked NaN through."""
    return (values * mask).sum() / mask.sum()


def dropping_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    """Coalesce that drops entries whose sum is zero."""
    result = tensor.coalesce()
    keep = result._values() != 0
    return torch.sparse_coo_tensor(result._indices()[:, keep], result._values()[keep], result.shape).coalesce()


def raising_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("this candidate always raises")


TorchAdagrad = torch.optim.Adagrad
TorchSparseAdam = torch.optim.SparseAdam
