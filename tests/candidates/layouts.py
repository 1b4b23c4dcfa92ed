"""Planted candidates for the layout dimension (layout-invariant): each is torch's Adagrad or SGD except
for one mistake that only a non-contiguous input shows. ``check`` must fail each and name the layout."""

from __future__ import annotations

import torch


def _storage_order(tensor: torch.Tensor) -> torch.Tensor:
    """The ``numel`` entries from ``data_ptr()`` on, as a contiguous tensor of ``tensor``'s shape: what a
    kernel that walks memory linearly reads (the strides ignored)."""
    return tensor.as_strided(tuple(tensor.shape), torch.empty(tuple(tensor.shape)).stride(), tensor.storage_offset())


class StorageOrderGradAdagrad(torch.optim.Adagrad):
    """Reads a dense gradient in storage order: right for a contiguous gradient, the entries permuted for a
    transposed one (``g.t()``) and the wrong entries for a strided one."""

    @torch.no_grad()
    def step(self, closure=None):
        given = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and not p.grad.is_sparse:
                    given[p] = p.grad
                    p.grad = _storage_order(p.grad).clone()  # the slip: the strides ignored
        try:
            return super().step(closure)
        finally:
            for p, grad in given.items():
                p.grad = grad  # the harness's gradient back in place


class WritesPastTheViewSGD(torch.optim.SGD):
    """Computes torch's SGD step right, then stores the parameter linearly from ``data_ptr()``: a parameter
    that is a strided view gets its neighbours in the same storage overwritten."""

    @torch.no_grad()
    def step(self, closure=None):
        params = [p for group in self.param_groups for p in group["params"]
                  if p.grad is not None and not p.grad.is_sparse]
        result = super().step(closure)  # torch's step, right, through the strides
        for p in params:
            stepped = p.clone()
            _storage_order(p).copy_(stepped)  # the slip: stored linearly from data_ptr(), the strides ignored
        return result
