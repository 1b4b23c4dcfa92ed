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

On CUDA tensors a step never waits for the GPU: an out-of-range gradient index
makes that step a no-op on the device, and the ValueError naming the index is
raised by a later ``step()`` once the device has reported it, or by
``check_index_errors()``, which waits for it. On CPU tensors it is raised at once.

``capturable=True`` (an extra keyword argument) keeps the step count on the
parameter's device and computes the step size there, so ``step()`` can be
captured in a CUDA graph (static shapes: same nnz each step) and replayed; the
step count in the state is then a 0-d float64 tensor, not torch's type.
"""

from __future__ import annotations

import inspect
import math
from typing import TYPE_CHECKING

import torch
from torch.optim.adagrad import adagrad as _torch_adagrad
from torch.optim.optimizer import _get_value

try:
    from torch.optim.optimizer import _to_scalar  # torch 2.6+ (a tensor lr)
except ImportError:
    def _to_scalar(x: float | torch.Tensor):  # (torch's signature: mypy checks the two variants agree)
        """A 0-d tensor's number (a tensor lr), else the value: torch's ``_to_scalar`` before it was there."""
        return x.item() if isinstance(x, torch.Tensor) else x

from ._memory import advise_huge_pages, state_like
from ._ops import adagrad_step, resolve_impl, sparse_adam_step
from ._validate import check_sparse_grad

_SPARSE_ADAM_DENSE_GRAD = "SparseAdam does not support dense gradients, please consider Adam instead"
_ADAGRAD_WEIGHT_DECAY = "weight_decay option is not compatible with sparse gradients"


def _update_in_place(update, targets: list[torch.Tensor], *args, **kwargs):
    """Run ``update(*targets, *args)`` in place, through contiguous copies if needed."""
    if all(t.is_contiguous() for t in targets):
        return update(*targets, *args, **kwargs)
    staged = [t.contiguous() for t in targets]
    result = update(*staged, *args, **kwargs)
    for target, copy in zip(targets, staged):
        if target is not copy:
            target.copy_(copy)
    return result


if TYPE_CHECKING:  # what the mixin is mixed into (its methods call the optimizer's)
    _OptimizerBase = torch.optim.Optimizer
else:
    _OptimizerBase = object


class _KernelOptimizer(_OptimizerBase):
    """Mixin: huge pages for CPU parameters (see ``_memory``), deferred CUDA index checks."""

    capturable = False

    def add_param_group(self, param_group) -> None:
        super().add_param_group(param_group)
        for p in self.param_groups[-1]["params"]:
            advise_huge_pages(p.data)

    def _remember_check(self, check) -> None:
        if check is not None:
            self.__dict__.setdefault("_index_checks", []).append(check)

    def _poll_index_checks(self) -> None:
        """Raise the ValueError of an earlier step whose deferred index check has landed (no wait)."""
        checks = self.__dict__.get("_index_checks")
        if not checks or _capturing():
            return
        pending = []
        try:
            while checks:
                check = checks.pop(0)
                if not check.poll():
                    pending.append(check)
        finally:
            checks[:0] = pending

    def check_index_errors(self) -> None:
        """Wait for the deferred index checks of earlier CUDA steps; ValueError if one failed.

        A step whose gradient had an index out of range changed nothing. On CPU tensors the
        error is raised by ``step()`` itself, so this returns at once.
        """
        checks = self.__dict__.pop("_index_checks", [])
        for check in checks:
            check.wait()


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _pop_capturable(kwargs) -> bool:
    capturable = kwargs.pop("capturable", False)
    if not isinstance(capturable, bool):
        raise TypeError(f"capturable must be a bool, got {type(capturable).__name__}")
    return capturable


def _on_device_scalars(capturable: bool, impl: str, param: torch.Tensor) -> bool:
    """Whether this step reads its step size from a device tensor (capturable, Triton path)."""
    return capturable and (impl == "triton" or (impl == "auto" and param.device.type == "cuda"))


def _device_step(state, key: str, param: torch.Tensor) -> torch.Tensor:
    """The state's step count as a 0-d float64 tensor on the parameter's device (capturable)."""
    step = state[key]
    if not (torch.is_tensor(step) and step.device == param.device and step.dtype == torch.float64):
        step = torch.tensor(float(step), dtype=torch.float64, device=param.device)
        state[key] = step
    return step


class SparseAdam(_KernelOptimizer, torch.optim.SparseAdam):
    """torch.optim.SparseAdam with a fused coalesce + moment + parameter update kernel."""

    def __init__(self, *args, **kwargs) -> None:
        capturable = _pop_capturable(kwargs)
        super().__init__(*args, **kwargs)
        self.capturable = capturable

    __init__.__doc__ = torch.optim.SparseAdam.__init__.__doc__

    @torch.no_grad()
    def step(self, closure=None):
        """Perform a single optimization step (same semantics as torch.optim.SparseAdam)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        self._poll_index_checks()
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
                if _on_device_scalars(self.capturable, impl, p):
                    step_t = _device_step(state, "step", p)
                    step_t += 1
                else:
                    state["step"] += 1
                work.append((p, p.grad, state["exp_avg"], state["exp_avg_sq"], state["step"]))

            lr = _to_scalar(group["lr"])
            for param, grad, exp_avg, exp_avg_sq, step in work:
                check_sparse_grad(param, grad)
                values = grad._values()
                if values.numel() == 0:
                    continue  # torch skips the update (the step count still advanced)
                extra = {}
                if torch.is_tensor(step):  # capturable: the step size is computed on the device
                    step_size = 0.0
                    extra["step_size_tensor"] = (
                        lr * torch.sqrt(1 - torch.pow(beta2, step)) / (1 - torch.pow(beta1, step)))
                else:
                    step_size = lr * math.sqrt(1 - beta2**step) / (1 - beta1**step)
                self._remember_check(_update_in_place(
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
                    **extra,
                ))
        return loss


class Adagrad(_KernelOptimizer, torch.optim.Adagrad):
    """torch.optim.Adagrad with a fused kernel for sparse gradients."""

    def __init__(self, *args, **kwargs) -> None:
        capturable = _pop_capturable(kwargs)
        super().__init__(*args, **kwargs)
        self.capturable = capturable
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if not torch.is_complex(p) and "sum" in state:
                    state["sum"] = state_like(p, self.defaults["initial_accumulator_value"])

    setattr(__init__, "__signature__", inspect.signature(torch.optim.Adagrad.__init__))  # (what inspect reads)
    __init__.__doc__ = torch.optim.Adagrad.__init__.__doc__

    def step(self, closure=None):
        """Perform a single optimization step (same semantics as torch.optim.Adagrad)."""
        if any(g["differentiable"] or g["fused"] for g in self.param_groups):
            return super().step(closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._poll_index_checks()
        with torch.no_grad():
            self._kernel_step()
        return loss

    def _kernel_step(self) -> None:
        impl = resolve_impl()
        for group in self.param_groups:
            params: list[torch.Tensor] = []
            grads: list[torch.Tensor] = []
            state_sums: list[torch.Tensor] = []
            state_steps: list[torch.Tensor] = []
            _, has_complex = self._init_group(group, params, grads, state_sums, state_steps)
            lr = _to_scalar(group["lr"])
            # params, grads, state sums, steps of the entries torch's own step takes
            dense: tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]] = (
                [], [], [], [])
            for param, grad, state_sum, step_t in zip(params, grads, state_sums, state_steps):
                if not grad.is_sparse or torch.is_complex(param):
                    for bucket, item in zip(dense, (param, grad, state_sum, step_t)):
                        bucket.append(item)
                    continue
                if group["weight_decay"] != 0:
                    raise RuntimeError(_ADAGRAD_WEIGHT_DECAY)
                check_sparse_grad(param, grad)
                extra = {}
                if _on_device_scalars(self.capturable, impl, param):
                    step_t = _device_step(self.state[param], "step", param)
                    step_t += 1
                    clr = 0.0
                    extra["clr_tensor"] = lr / (1 + (step_t - 1) * group["lr_decay"])
                else:
                    step_t += 1
                    clr = lr / (1 + (_get_value(step_t) - 1) * group["lr_decay"])
                self._remember_check(_update_in_place(
                    adagrad_step,
                    [param, state_sum],
                    grad._indices(),
                    grad._values(),
                    clr,
                    group["eps"],
                    group["maximize"],
                    impl,
                    **extra,
                ))
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
