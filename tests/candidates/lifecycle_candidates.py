"""Candidates for the lifecycle dimension (the property lifecycle), each torch's Adagrad but for one thing: an
adapter's own object in the state (right: it must pass), a tensor lr read once (wrong), and work done once per
dtype partition of a group (wrong). Beside tests/candidates/lifecycles.py."""

from __future__ import annotations

import torch


class _Table:
    """A library's own per-parameter object (a lookup table): nothing the suite can read as numbers."""

    def __init__(self, size: int):
        self.size = size
        self.hits = 0


class TableStateAdagrad(torch.optim.Adagrad):
    """torch's Adagrad keeping an object of its own in each stepped parameter's state (``state["table"]``), left
    out of its state_dict and remade on load, as an adapter over a library keeps the library's tables. Right."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.state[p].setdefault("table", _Table(p.numel())).hits += 1
        return loss

    def state_dict(self):
        saved = super().state_dict()
        return {**saved, "state": {key: {name: value for name, value in state.items() if name != "table"}
                                   for key, state in saved["state"].items()}}

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            for p in group["params"]:
                if self.state.get(p):
                    self.state[p]["table"] = _Table(p.numel())


class LrReadOnceAdagrad(torch.optim.Adagrad):
    """torch's Adagrad, except that it reads a tensor lr once, when it first sees that tensor (in ``__init__``,
    or when a scheduler assigns a new one), as a wrapper that saves a device sync per step would: a scheduler's
    ``group["lr"].fill_`` on the same tensor never reaches the update."""

    def __init__(self, params, *args, **kwargs):
        self._lr_read: dict[int, tuple[torch.Tensor, float]] = {}
        super().__init__(params, *args, **kwargs)
        for group in self.param_groups:
            self._read(group["lr"])

    def _read(self, lr):
        if not torch.is_tensor(lr):
            return lr
        seen = self._lr_read.get(id(lr))
        if seen is None or seen[0] is not lr:
            seen = self._lr_read[id(lr)] = (lr, float(lr))
        return seen[1]

    @torch.no_grad()
    def step(self, closure=None):
        given = [group["lr"] for group in self.param_groups]
        for group in self.param_groups:
            group["lr"] = self._read(group["lr"])
        try:
            return super().step(closure)
        finally:
            for group, lr in zip(self.param_groups, given):
                group["lr"] = lr


class DtypePartitionedAdagrad(torch.optim.Adagrad):
    """torch's Adagrad stepping each group's parameters partitioned by dtype (as foreach and fused kernels do),
    with one slip: each partition's loop advances the step counters of every parameter of the group that has a
    gradient, not only its own, so with two dtypes in one group each counter advances twice a step (lr_decay
    applied twice). With one dtype in each group it steps as torch's."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            params, grads, sums, steps = [], [], [], []
            self._init_group(group, params, grads, sums, steps)
            partitions: dict[torch.dtype, list[int]] = {}
            for index, p in enumerate(params):
                partitions.setdefault(p.dtype, []).append(index)
            for indices in partitions.values():
                for step_t in steps:  # the slip: the whole group's counters, once per partition
                    step_t += 1
                for i in indices:
                    _update(params[i], grads[i], sums[i], steps[i].item(), group)


def _update(p: torch.Tensor, grad: torch.Tensor, state_sum: torch.Tensor, step: float, group: dict) -> None:
    """torch's _single_tensor_adagrad on one parameter whose counter is already at ``step``."""
    grad = -grad if group["maximize"] else grad
    if group["weight_decay"] != 0:
        if grad.is_sparse:
            raise RuntimeError("weight_decay option is not compatible with sparse gradients")
        grad = grad.add(p, alpha=group["weight_decay"])
    clr = float(group["lr"]) / (1 + (step - 1) * group["lr_decay"])
    if grad.is_sparse:
        grad = grad.coalesce()
        indices, values = grad._indices(), grad._values()
        state_sum.add_(torch.sparse_coo_tensor(indices, values.pow(2), grad.shape))
        std_values = state_sum.sparse_mask(grad)._values().sqrt_().add_(group["eps"])
        p.add_(torch.sparse_coo_tensor(indices, values / std_values, grad.shape), alpha=-clr)
    else:
        state_sum.addcmul_(grad, grad, value=1)
        p.addcdiv_(grad, state_sum.sqrt().add_(group["eps"]), value=-clr)
