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


# ---------------------------------------------------------------- contract clauses, one breaker each
# (tests/test_contract_errors.py): the right numbers in the wrong container, dtype, device or shape,
# or an input rewritten. Each must fail with one line naming the clause, never a harness traceback.


def masked_mean_sparse_grad(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The right mean, whose gradient a hook turns into a sparse COO tensor once autograd has written it.
    (A MaskedTensor mean, whose gradient arrives as a MaskedTensor, keeps the contract:
    tests/candidates/masked_tensor.py.)"""
    values.register_post_accumulate_grad_hook(lambda leaf: setattr(leaf, "grad", leaf.grad.to_sparse()))
    return torch.masked.mean(values, mask=mask)


def masked_mean_masked_tensor_not_reduced(values: torch.Tensor, mask: torch.Tensor):
    """A MaskedTensor divided by the count but never summed: a MaskedTensor of values' shape, not 0-d."""
    from torch.masked import as_masked_tensor

    return as_masked_tensor(values, mask) / mask.sum()


def masked_mean_on_meta(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The right mean, moved to another device (meta) than values'."""
    return torch.masked.mean(values, mask=mask).to("meta")


def masked_mean_of_shape_1(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The right mean with shape [1] instead of a 0-d tensor."""
    return torch.masked.mean(values, mask=mask).reshape(1)


def masked_mean_filling_values(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The right mean, then zeroes the invalid entries of its input in place."""
    result = torch.masked.mean(values, mask=mask)
    with torch.no_grad():
        values.masked_fill_(~mask, 0.0)
    return result


def coalesce_to_dense(tensor: torch.Tensor) -> torch.Tensor:
    """The right sums, returned as a dense (strided) tensor instead of a sparse COO one."""
    return tensor.coalesce().to_dense()


def coalesce_on_meta(tensor: torch.Tensor) -> torch.Tensor:
    """The right result on another device (meta) than its input's."""
    return tensor.coalesce().to("meta")


class SparseStateAdagrad(torch.optim.Adagrad):
    """torch's Adagrad, but it keeps its ``sum`` state as a sparse COO tensor between steps."""

    @torch.no_grad()
    def step(self, closure=None):
        for state in self.state.values():
            if "sum" in state and state["sum"].is_sparse:
                state["sum"] = state["sum"].to_dense()
        loss = super().step(closure)
        for state in self.state.values():
            state["sum"] = state["sum"].to_sparse()
        return loss


class RowStateAdagrad(torch.optim.Adagrad):
    """torch's Adagrad, but it keeps its ``sum`` state as a row of shape [1, n] between steps."""

    @torch.no_grad()
    def step(self, closure=None):
        for state in self.state.values():
            if "sum" in state and state["sum"].dim() == 2:
                state["sum"] = state["sum"].squeeze(0)
        loss = super().step(closure)
        for state in self.state.values():
            state["sum"] = state["sum"].unsqueeze(0)
        return loss


class StepAttributeRefusingAdagrad(torch.optim.Adagrad):
    """torch's Adagrad, but it sets ``param.grad`` to None after each step, and its ``__setattr__``
    drops every assignment of ``step`` (the attribute the harness wraps to watch step())."""

    def __setattr__(self, name, value):
        if name != "step":
            super().__setattr__(name, value)

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None
        return loss
