"""Drop-in ``Adagrad`` and ``SparseAdam`` whose sparse-gradient steps run fused kernels.

Both subclass the stock torch optimizers, so constructors, argument validation,
defaults, state keys and ``state_dict``/``load_state_dict`` are torch's own;
only ``step`` differs. Sparse COO gradients (hybrid ones included, e.g. from
``nn.Embedding(sparse=True)``) go to one fused kernel per parameter that
coalesces the gradient and updates the state and the parameter. Adagrad falls
back to torch's own implementation for dense or complex gradients and for
``differentiable``/``fused`` groups. The kernel is chosen per
``$CONFORMANCE_KERNEL_IMPL`` (auto/cpp/triton).

Parameters or state tensors that are not contiguous are updated through a
contiguous temporary that is copied back. Large CPU parameters and state
tensors are put on transparent huge pages (see ``_memory``).
"""

from __future__ import annotations

import inspect
import math

import torch
from torch.optim.adagrad import adagrad as _torch_adagrad
from torch.optim.optimizer import _get_value, _to_scalar

from ._memory import advise_huge_pages, state_like
from ._ops import adagrad_step, resolve_impl, sparse_adam_step
from ._validate import check_sparse_grad

_SPARSE_ADAM_DENSE_GRAD = "SparseAdam does not support dense gradients, please consider Adam instead"
_ADAGRAD_WEIGHT_DECAY = "weight_decay option is not compatible with sparse gradients"


def _update_in_place(update, targets: list[torch.Tensor], *args) -> None:
    """Run ``update(*targets, *args)`` in place, through contiguous copies if needed."""
    if all(t.is_contiguous() for t in targets):
        update(*targets, *args)
        return
    staged = [t.contiguous() for t in targets]
    update(*staged, *args)
    for target, result in zip(targets, staged):
        if target is not result:
            target.copy_(result)


class _HugePageParams:
    """Mixin: parameters added to the optimizer are moved onto huge pages (see ``_memory``)."""

    def add_param_group(self, param_group) -> None:
        super().add_param_group(param_group)
        for p in self.param_groups[-1]["params"]:
            advise_huge_pages(p.data)


class SparseAdam(_HugePageParams, torch.optim.SparseAdam):
    """torch.optim.SparseAdam with a fused coalesce + moment + parameter update kernel."""

    @torch.no_grad()
    def step(self, closure=None):
        """Perform a single optimization step (same semantics as torch.optim.SparseAdam)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        impl = resolve_impl()
        for group in self.param_groups:
            work = []
            beta1, beta2 = group["betas"]
            maximize = group.get("maximize", False)
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise RuntimeError(_SPARSE_ADAM_DENSE_GRAD)
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = state_like(p, 0)
                    state["exp_avg_sq"] = state_like(p, 0)
                state["step"] += 1
                work.append((p, p.grad, state["exp_avg"], state["exp_avg_sq"], state["step"]))

            lr = _to_scalar(group["lr"])
            for param, grad, exp_avg, exp_avg_sq, step in work:
                check_sparse_grad(param, grad)
                values = grad._values()
                if values.numel() == 0:
                    continue  # torch skips the update (the step count still advanced)
                step_size = lr * math.sqrt(1 - beta2**step) / (1 - beta1**step)
                _update_in_place(
                    sparse_adam_step,
                    [param, exp_avg, exp_avg_sq],
                    grad._indices(),
                    values,
                    step_size,
                    beta1,
                    beta2,
                    group["eps"],
                    maximize,
                    impl,
                )
        return loss


class Adagrad(_HugePageParams, torch.optim.Adagrad):
    """torch.optim.Adagrad with a fused kernel for sparse gradients."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if not torch.is_complex(p) and "sum" in state:
                    state["sum"] = state_like(p, self.defaults["initial_accumulator_value"])

    __init__.__signature__ = inspect.signature(torch.optim.Adagrad.__init__)
    __init__.__doc__ = torch.optim.Adagrad.__init__.__doc__

    def step(self, closure=None):
        """Perform a single optimization step (same semantics as torch.optim.Adagrad)."""
        if any(g["differentiable"] or g["fused"] for g in self.param_groups):
            return super().step(closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        with torch.no_grad():
            self._kernel_step()
        return loss

    def _kernel_step(self) -> None:
        impl = resolve_impl()
        for group in self.param_groups:
            params, grads, state_sums, state_steps = [], [], [], []
            _, has_complex = self._init_group(group, params, grads, state_sums, state_steps)
            lr = _to_scalar(group["lr"])
            dense = ([], [], [], [])
            for param, grad, state_sum, step_t in zip(params, grads, state_sums, state_steps):
                if not grad.is_sparse or torch.is_complex(param):
                    for bucket, item in zip(dense, (param, grad, state_sum, step_t)):
                        bucket.append(item)
                    continue
                step_t += 1
                step = _get_value(step_t)
                if group["weight_decay"] != 0:
                    raise RuntimeError(_ADAGRAD_WEIGHT_DECAY)
                check_sparse_grad(param, grad)
                clr = lr / (1 + (step - 1) * group["lr_decay"])
                _update_in_place(
                    adagrad_step,
                    [param, state_sum],
                    grad._indices(),
                    grad._values(),
                    clr,
                    group["eps"],
                    group["maximize"],
                    impl,
                )
            if dense[0]:
                _torch_adagrad(
                    *dense,
                    lr=group["lr"],
                    weight_decay=group["weight_decay"],
                    lr_decay=group["lr_decay"],
                    eps=group["eps"],
                    has_sparse_grad=any(g.is_sparse for g in dense[1]),
                    foreach=group["foreach"],
                    maximize=group["maximize"],
                    differentiable=False,
                    has_complex=has_complex,
                    fused=group["fused"],
                )
