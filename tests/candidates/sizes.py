"""Planted candidates for the size dimension (the property sizes): torch's optimizer but for a mistake a
kernel makes only past a vector width or a block size."""

from __future__ import annotations

import torch


def _keep_after(optimizer, step, keep):
    """torch's step, then each parameter's flattened entries that ``keep(numel)`` leaves out restored to their
    values before it (the state moves on: the mistake is in the store)."""
    params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    before = {p: p.detach().clone() for p in params}
    result = step()
    for p in params:
        cut = keep(p.numel())
        if cut < p.numel():
            p.detach().view(-1)[cut:] = before[p].view(-1)[cut:]
    return result


class VectorBodyOnlyAdagrad(torch.optim.Adagrad):
    """Stores only the vectorized body of each parameter, the leading multiple of 16 entries, and drops the
    scalar remainder (the mirror of torch 2.13's fused SGD half-precision bug): right up to 16 entries' multiples."""

    @torch.no_grad()
    def step(self, closure=None):
        return _keep_after(self, lambda: super(VectorBodyOnlyAdagrad, self).step(closure),
                           lambda n: n if n < 16 else n - n % 16)


class OneBlockSGD(torch.optim.SGD):
    """Launches one block of 256 entries per parameter: everything past the first 256 entries keeps its value."""

    @torch.no_grad()
    def step(self, closure=None):
        return _keep_after(self, lambda: super(OneBlockSGD, self).step(closure), lambda n: min(n, 256))


class BFloat16StepAdagrad(torch.optim.Adagrad):
    """Keeps its step counter in bfloat16 (integers exact up to 256 only): past step 256 the count sticks at 256,
    so lr / (1 + (step - 1) * lr_decay) stops decaying. Right for every trajectory of 256 steps or fewer."""

    @torch.no_grad()
    def step(self, closure=None):
        result = super().step(closure)
        for state in self.state.values():
            if torch.is_tensor(state.get("step")):
                state["step"].copy_(state["step"].to(torch.bfloat16).to(state["step"].dtype))
        return result
