"""Candidates that are right or wrong only in how they round and accumulate, and candidates that
cannot express every input: what the three-way verdict and the half-precision checks must tell
apart. Each is a small change to torch's own implementation."""

from __future__ import annotations

import torch

from conformance import Unsupported

HALF = (torch.float16, torch.bfloat16)


def wide(dtype: torch.dtype) -> torch.dtype:
    """float32 for the half dtypes, the dtype itself otherwise."""
    return torch.promote_types(dtype, torch.float32)


def round_toward_zero(exact: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``exact`` (float32/float64) stored in ``dtype`` by truncation instead of round-to-nearest-even."""
    nearest = exact.to(dtype)
    rounded_up = nearest.to(exact.dtype).abs() > exact.abs()
    if dtype not in HALF:
        return nearest
    bits = nearest.view(torch.int16)
    return torch.where(rounded_up, bits - 1, bits).view(dtype)  # one step toward zero, either sign


# ---------------------------------------------------------------- Adagrad

class Float32StateAdagrad(torch.optim.Optimizer):
    """Adagrad as fused kernels commonly write it: the accumulator kept in float32 for a
    float16/bfloat16 parameter, each step computed in float32 and the parameter rounded once.
    Right: it must pass everything (and fixes torch's float16 0/0 on a specified zero)."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                 eps=1e-10, maximize=False):
        self._torch = torch.optim.Adagrad(params, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                          initial_accumulator_value=initial_accumulator_value, eps=eps,
                                          maximize=maximize)  # torch's argument checks and messages
        super().__init__(self._torch.param_groups, dict(self._torch.defaults))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {"step": torch.tensor(0.0),
                                 "sum": torch.full(p.shape, initial_accumulator_value, dtype=wide(p.dtype),
                                                   device=p.device)}

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:  # a parameter of a group added later (add_param_group): its state made here, as torch does
                    state.update(step=torch.tensor(0.0), sum=torch.full(p.shape, group["initial_accumulator_value"],
                                                                        dtype=wide(p.dtype), device=p.device))
                state["step"] += 1
                clr = group["lr"] / (1 + (state["step"].item() - 1) * group["lr_decay"])
                grad = p.grad.to(wide(p.dtype))
                if group["maximize"]:
                    grad = -grad
                if grad.is_sparse:
                    if group["weight_decay"] != 0:
                        raise RuntimeError("weight_decay option is not compatible with sparse gradients")
                    grad = grad.coalesce()
                    index = tuple(grad._indices())
                    values = grad._values()
                    state["sum"][index] += values * values
                    std = state["sum"][index].sqrt() + group["eps"]
                    p[index] = (p[index].to(grad.dtype) - clr * values / std).to(p.dtype)
                else:
                    if group["weight_decay"] != 0:
                        grad = grad + group["weight_decay"] * p.to(grad.dtype)
                    state["sum"] += grad * grad
                    std = state["sum"].sqrt() + group["eps"]
                    p.copy_((p.to(grad.dtype) - clr * grad / std).to(p.dtype))


    def load_state_dict(self, state_dict):
        """Keep the float32 accumulator: torch's Optimizer.load_state_dict casts floating-point state
        to the parameter's dtype, which would round it to float16/bfloat16 on every resume."""
        ids = [pid for group in state_dict["param_groups"] for pid in group["params"]]
        wide_sums = {pid: state_dict["state"][pid]["sum"].clone() for pid in ids if pid in state_dict["state"]}
        super().load_state_dict(state_dict)
        for pid, p in zip(ids, (p for group in self.param_groups for p in group["params"])):
            if pid in wide_sums:
                self.state[p]["sum"] = wide_sums[pid].to(device=p.device, dtype=wide(p.dtype))


class DowncastOnLoadAdagrad(Float32StateAdagrad):
    """Float32StateAdagrad relying on torch's Optimizer.load_state_dict, which casts its float32
    accumulator to a float16/bfloat16 parameter's dtype: a resumed run departs from the
    uninterrupted one (a real trap for mixed-precision optimizers)."""

    load_state_dict = torch.optim.Optimizer.load_state_dict


class GroupBlindAdagrad(torch.optim.Adagrad):
    """torch's Adagrad stepping every parameter with the first param group's hyperparameters: a
    per-group lr or eps is ignored."""

    @torch.no_grad()
    def step(self, closure=None):
        first = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        saved = [dict(group) for group in self.param_groups]
        for group in self.param_groups:
            group.update(first)
        try:
            return super().step(closure)
        finally:
            for group, old in zip(self.param_groups, saved):
                group.update(old)


class SparseOnlyAdagrad(torch.optim.Adagrad):
    """torch's Adagrad behind a library made for embedding tables: it rejects dense gradients and
    declares so (``sparse_gradients_only``), so the harness reports those inputs unsupported."""

    sparse_gradients_only = True

    @torch.no_grad()
    def step(self, closure=None):
        if any(p.grad is not None and not p.grad.is_sparse for group in self.param_groups for p in group["params"]):
            raise TypeError("this optimizer takes sparse gradients only")
        return super().step(closure)


class UndeclaredSparseOnlyAdagrad(SparseOnlyAdagrad):
    """SparseOnlyAdagrad without the declaration: its dense-gradient inputs are errors."""

    sparse_gradients_only = False


class NoLrDecayAdagrad(torch.optim.Adagrad):
    """torch's Adagrad behind a library that cannot express ``lr_decay``: it raises Unsupported
    for those inputs only, and must still get generated coverage for everything else."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, **kwargs):
        if lr_decay != 0:
            raise Unsupported("this library has no lr_decay")
        super().__init__(params, lr=lr, lr_decay=lr_decay, **kwargs)


class TruncatingAdagrad(Float32StateAdagrad):
    """Float32StateAdagrad, but the float16/bfloat16 parameter is stored by truncation: a rounding
    bug that ships in real accelerator backends, and passes closeness tolerances."""

    @torch.no_grad()
    def step(self, closure=None):
        saved = {p: p.detach().clone() for group in self.param_groups for p in group["params"]}
        for p in saved:
            p.data = p.data.to(wide(p.dtype))  # compute in float32 ...
        try:
            super().step(closure)
        finally:
            for p, old in saved.items():
                exact = p.data
                p.data = round_toward_zero(exact, old.dtype)  # ... and truncate once


# ---------------------------------------------------------------- coalesce

def float32_reversed_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    """Right: duplicates summed in float32 in reverse input order, rounded once to the dtype
    (another order of float32 arithmetic, and better than torch's half-precision sum)."""
    widened = torch.sparse_coo_tensor(tensor._indices().flip(-1), tensor._values().flip(0).to(wide(tensor.dtype)),
                                      tensor.shape)
    result = widened.coalesce()
    return torch.sparse_coo_tensor(result._indices(), result._values().to(tensor.dtype), tensor.shape).coalesce()


def truncating_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    """Duplicates summed in float32, then stored in the half dtype by truncation."""
    result = torch.sparse_coo_tensor(tensor._indices(), tensor._values().double(), tensor.shape).coalesce()
    values = round_toward_zero(result._values(), tensor.dtype)
    return torch.sparse_coo_tensor(result._indices(), values, tensor.shape).coalesce()


# ---------------------------------------------------------------- masked mean

def half_sum_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The masked values summed one after another in the values' own (half) precision, where
    torch's sum accumulates in float32."""
    selected = torch.where(mask, values, torch.zeros_like(values)).reshape(-1)
    total = selected[:0].sum()  # zero, differentiable
    for value in selected.unbind():
        total = total + value  # rounded to the dtype at every addition
    return total / mask.sum()


class NeverSupportedAdagrad(torch.optim.Adagrad):
    """A library that can express none of the inputs: its generated items are unsupported."""

    def __init__(self, params, **kwargs):
        raise Unsupported("this library cannot express any of it")


def index_add_coalesce(tensor: torch.Tensor) -> torch.Tensor:
    """coalesce written the common way: ``torch.unique(..., return_inverse=True)`` and ``index_add_``, which
    sums half-precision duplicates in half precision, in input order -- as stock torch's coalesce does
    (in its sort's order): the same as torch by the model of its recorded divergence."""
    indices, values = tensor._indices(), tensor._values()
    if indices.shape[1] == 0:
        return torch.sparse_coo_tensor(indices, values, tensor.shape)._coalesced_(True)
    if indices.shape[0] == 0:  # a sparse scalar, or an all-dense hybrid: one entry
        return torch.sparse_coo_tensor(indices[:, :1], values.sum(0, keepdim=True), tensor.shape)._coalesced_(True)
    unique, inverse = torch.unique(indices, dim=1, return_inverse=True)
    sums = torch.zeros((unique.shape[1], *values.shape[1:]), dtype=values.dtype, device=values.device)
    sums.index_add_(0, inverse, values)
    return torch.sparse_coo_tensor(unique, sums, tensor.shape)._coalesced_(True)
