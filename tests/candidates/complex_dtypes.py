"""Planted candidates for the complex dimension (the property complex-agrees): torch's optimizer but for one
mistake in how it treats complex parameters, which torch takes as pairs of reals (torch.view_as_real)."""

from __future__ import annotations

import torch


def _swapped_grads(optimizer, make):
    """Each complex parameter's dense gradient replaced by ``make(grad)`` (None: skipped); the originals."""
    given = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None and p.is_complex() and not p.grad.is_sparse:
                given[p] = p.grad
                p.grad = make(p.grad)
    return given


class AbsSquaredAdagrad(torch.optim.Adagrad):
    """The textbook complex Adagrad: accumulates |g|^2 (g * conj(g)) per entry and divides both parts by its
    root, where torch accumulates re^2 and im^2 apart (the pairs of reals view_as_real shows)."""

    supports_complex = True  # judged on complex parameters (complex-agrees)

    @torch.no_grad()
    def step(self, closure=None):
        mine = []
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and p.is_complex() and not p.grad.is_sparse:
                    state = self.state[p]
                    state["step"] += 1
                    clr = group["lr"] / (1 + (float(state["step"]) - 1) * group["lr_decay"])
                    state["sum"].add_(p.grad * p.grad.conj())  # the slip: one |g|^2 for both parts
                    p.addcdiv_(p.grad, state["sum"].sqrt().add_(group["eps"]), value=-clr)
                    mine.append(p)
        given = {p: p.grad for p in mine}
        for p in mine:
            p.grad = None  # torch's step leaves them alone
        try:
            return super().step(closure)
        finally:
            for p, grad in given.items():
                p.grad = grad


class RealPartSGD(torch.optim.SGD):
    """Steps a complex parameter by its gradient's real part only (as code that calls .real, or casts the
    gradient to the real dtype, does): the imaginary part never moves."""

    supports_complex = True

    @torch.no_grad()
    def step(self, closure=None):
        given = _swapped_grads(self, lambda grad: torch.complex(grad.real, torch.zeros_like(grad.real)))
        try:
            return super().step(closure)
        finally:
            for p, grad in given.items():
                p.grad = grad
