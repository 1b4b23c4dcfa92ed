"""Candidates that are right on the inputs the suite once drew and wrong on the ones it missed
(issue 23): NaN at a valid entry of a masked mean, and coalesce with ``sparse_dim == 0``. The
default ``conformance check`` must fail each of them (tests/test_coverage.py)."""

from __future__ import annotations

import torch


def skipna_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """pandas' ``Series.where(mask).mean()`` (skipna=True by default): a NaN at a valid entry is
    skipped and not counted, so ``[nan, 1]`` with both valid gives 1.0 where torch gives NaN.
    Right whenever no valid entry is NaN."""
    kept = mask & ~torch.isnan(values)
    return torch.nansum(torch.where(mask, values, torch.nan)) / kept.sum()


def coalesce_without_sparse_scalars(tensor: torch.Tensor) -> torch.Tensor:
    """torch's coalesce, but it refuses a tensor with no sparse dimension (a 0-d sparse scalar, or
    an all-dense hybrid ``sparse_dim=0, dense_dim>0``), as an implementation that indexes
    ``indices[0]`` would. Right on every tensor with ``sparse_dim >= 1``."""
    if tensor.sparse_dim() == 0:
        raise IndexError("coalesce: a tensor without sparse dimensions is not supported")
    return tensor.coalesce()


class DenseBufferSGD(torch.optim.Optimizer):
    """SGD (momentum, dampening, nesterov, maximize) whose momentum buffer is a dense tensor with a
    mask of the entries some gradient specified: it computes the documented algorithm where torch
    raises ``add(sparse, dense) is not supported`` -- a dense gradient into a buffer started sparse,
    nesterov's sparse gradient on a dense buffer. Like torch it rejects weight_decay with a sparse
    gradient (the suite's contract). An improvement on torch, never a failure."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False):
        for name, value in (("learning rate", lr), ("momentum value", momentum), ("weight_decay value", weight_decay)):
            if value < 0.0:
                raise ValueError(f"Invalid {name}: {value}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            m = group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    if group["weight_decay"] != 0:
                        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
                    grad = p.grad.coalesce()
                    g = grad.to_dense()
                    marks = torch.sparse_coo_tensor(grad.indices(), torch.ones(grad._nnz(), dtype=torch.bool,
                                                    device=p.device), grad.shape[:grad.sparse_dim()])
                    mask = marks.to_dense().reshape(*marks.shape, *[1] * grad.dense_dim()).expand_as(p)
                else:
                    g, mask = p.grad, torch.ones_like(p, dtype=torch.bool)
                    g = g + group["weight_decay"] * p if group["weight_decay"] else g
                if group["maximize"]:
                    g = -g
                if m != 0:
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"], state["buffer_mask"] = g.clone(), mask.clone()
                    else:
                        state["momentum_buffer"].mul_(m).add_(g, alpha=1 - group["dampening"])
                        state["buffer_mask"] |= mask
                    buf, buf_mask = state["momentum_buffer"], state["buffer_mask"]
                    g, mask = (g + m * buf, mask | buf_mask) if group["nesterov"] else (buf, buf_mask)
                p.copy_(torch.where(mask, p - group["lr"] * g, p))


class RestartingBufferSGD(DenseBufferSGD):
    """Steps past torch's limitation with a wrong value: a dense gradient restarts the momentum buffer
    (b = g) instead of adding into it. Must fail where torch raises, not pass as an improvement."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and not p.grad.is_sparse:
                    self.state[p].clear()
        return super().step(closure)
