"""Public torch.library operators ``torch.ops.conformance_kernels.*`` and kernel selection.

Each operator takes a trailing ``impl`` string: ``"auto"`` sends CPU tensors to
the C++ kernels (``torch.ops.conformance_kernels_cpu.*``, built on first use)
and CUDA tensors to the Triton kernels; ``"cpp"`` and ``"triton"`` force one
path (``"triton"`` on CPU tensors needs ``TRITON_INTERPRET=1``). The operators
have fake (meta) implementations, so they trace under ``torch.compile``, and
``masked_mean`` has an autograd formula.
"""

from __future__ import annotations

import os
from typing import Sequence

import torch
from torch import Tensor

from conformance.core.torch_release import require

from ._build import load_cpu_kernels
from ._validate import (
    check_coo_parts,
    check_index_range,
    check_masked_pair,
    check_sparse_extent,
    check_sparse_step,
    check_tensor,
)

# the operators are torch.library custom ops declared with postponed (string) annotations: torch 2.4's
# custom_op refuses those ("Parameter indices has unsupported type Tensor"), 2.1-2.3 have no custom_op; there
# the kernels' items are unsupported (NotInTorch)
require("2.5", "torch.library.custom_op taking the suite's kernels' string annotations")

IMPL_ENV_VAR = "CONFORMANCE_KERNEL_IMPL"
IMPLS = ("auto", "cpp", "triton")


def resolve_impl(impl: str | None = None) -> str:
    """The kernel implementation to use: the argument, else $CONFORMANCE_KERNEL_IMPL, else auto."""
    chosen = impl if impl is not None else os.environ.get(IMPL_ENV_VAR, "auto")
    chosen = chosen.strip().lower() or "auto"
    if chosen not in IMPLS:
        source = "impl argument" if impl is not None else f"${IMPL_ENV_VAR}"
        raise ValueError(f"{source} must be one of {IMPLS}, got {chosen!r}")
    return chosen


def _triton_backend():
    try:
        from . import _triton  # optional dependency: triton
    except ImportError as exc:  # triton missing or broken
        raise RuntimeError(
            "conformance.kernels: the Triton kernels need the `triton` package "
            "(pip install triton --no-deps)"
        ) from exc
    return _triton


class _CppBackend:
    """The C++ operators, loaded on first use, behind Python-side checks.

    Everything the C++ code would index with (index values, sizes, dtypes, shapes) is checked
    here first, so a bad input raises a Python exception before any C++ code touches memory, on
    every torch version (the C++ checks stay as a second line).
    """

    @staticmethod
    def _ops():
        load_cpu_kernels()
        return torch.ops.conformance_kernels_cpu

    def coalesce(self, indices, values, size):
        sparse_dim = check_coo_parts(indices, values, list(size))
        check_sparse_extent(list(size[:sparse_dim]))
        check_index_range(indices, list(size[:sparse_dim]))
        return self._ops().coalesce(indices, values, list(size))

    def sparse_adam_step_(self, param, exp_avg, exp_avg_sq, indices, values, *scalars):
        check_sparse_step(param, {"exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}, indices, values)
        sparse_size = list(param.shape[: indices.shape[0]])
        check_sparse_extent(sparse_size)
        check_index_range(indices, sparse_size)
        self._ops().sparse_adam_step_(param, exp_avg, exp_avg_sq, indices, values, *scalars)

    def adagrad_step_(self, param, state_sum, indices, values, *scalars):
        check_sparse_step(param, {"state_sum": state_sum}, indices, values)
        sparse_size = list(param.shape[: indices.shape[0]])
        check_sparse_extent(sparse_size)
        check_index_range(indices, sparse_size)
        self._ops().adagrad_step_(param, state_sum, indices, values, *scalars)

    def masked_mean(self, values, mask):
        check_masked_pair(values, mask)
        return self._ops().masked_mean(values, mask)

    def masked_mean_backward(self, grad, mask, count):
        check_tensor(grad, "grad")
        check_tensor(count, "count")
        if grad.numel() != 1:
            raise ValueError(f"grad must have one element, got shape {tuple(grad.shape)}")
        if count.numel() != 1 or count.dtype != torch.int64:
            raise ValueError(f"count must be a one-element int64 tensor, got {count.dtype} {tuple(count.shape)}")
        return self._ops().masked_mean_backward(grad, mask, count)


_CPP = _CppBackend()


def _backend(impl: str, device: torch.device):
    if impl == "triton":
        return _triton_backend()
    if impl == "cpp" or device.type == "cpu":
        if device.type != "cpu":
            raise RuntimeError(f"the C++ kernels need CPU tensors, got device {device}")
        return _CPP
    if device.type == "cuda":
        return _triton_backend()
    raise RuntimeError(f"conformance.kernels has no kernels for device {device}")


# --------------------------------------------------------------------------- coalesce


@torch.library.custom_op("conformance_kernels::coalesce", mutates_args=())
def coalesce_op(
    indices: Tensor, values: Tensor, size: Sequence[int], impl: str
) -> tuple[Tensor, Tensor]:
    """Coalesced (indices, values) of the COO tensor (indices, values, size)."""
    check_coo_parts(indices, values, list(size))
    return _backend(impl, values.device).coalesce(indices, values, list(size))


@coalesce_op.register_fake
def _coalesce_fake(indices, values, size, impl):
    check_coo_parts(indices, values, list(size))
    nnz = torch.library.get_ctx().new_dynamic_size()
    return indices.new_empty((indices.shape[0], nnz)), values.new_empty((nnz, *values.shape[1:]))


# --------------------------------------------------------------------------- optimizers


@torch.library.custom_op(
    "conformance_kernels::sparse_adam_step_", mutates_args=("param", "exp_avg", "exp_avg_sq")
)
def sparse_adam_step_op(
    param: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    indices: Tensor,
    values: Tensor,
    step_size: float,
    beta1: float,
    beta2: float,
    eps: float,
    maximize: bool,
    impl: str,
) -> None:
    """Fused SparseAdam update of param/exp_avg/exp_avg_sq at the gradient's indices."""
    check_sparse_step(param, {"exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}, indices, values)
    _backend(impl, param.device).sparse_adam_step_(
        param, exp_avg, exp_avg_sq, indices, values, step_size, beta1, beta2, eps, maximize
    )  # a deferred index check (CUDA) is dropped here: the kernel still never writes out of range


@sparse_adam_step_op.register_fake
def _sparse_adam_step_fake(
    param, exp_avg, exp_avg_sq, indices, values, step_size, beta1, beta2, eps, maximize, impl
):
    check_sparse_step(param, {"exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}, indices, values)


@torch.library.custom_op("conformance_kernels::adagrad_step_", mutates_args=("param", "state_sum"))
def adagrad_step_op(
    param: Tensor,
    state_sum: Tensor,
    indices: Tensor,
    values: Tensor,
    clr: float,
    eps: float,
    maximize: bool,
    impl: str,
) -> None:
    """Fused sparse Adagrad update of param/state_sum at the gradient's indices."""
    check_sparse_step(param, {"state_sum": state_sum}, indices, values)
    _backend(impl, param.device).adagrad_step_(param, state_sum, indices, values, clr, eps, maximize)


@adagrad_step_op.register_fake
def _adagrad_step_fake(param, state_sum, indices, values, clr, eps, maximize, impl):
    check_sparse_step(param, {"state_sum": state_sum}, indices, values)


# --------------------------------------------------------------------------- masked mean


@torch.library.custom_op("conformance_kernels::masked_mean", mutates_args=())
def masked_mean_op(values: Tensor, mask: Tensor, impl: str) -> tuple[Tensor, Tensor]:
    """(mean of values where mask, number of true mask entries) as 0-d tensors."""
    check_masked_pair(values, mask)
    return _backend(impl, values.device).masked_mean(values, mask)


@masked_mean_op.register_fake
def _masked_mean_fake(values, mask, impl):
    check_masked_pair(values, mask)
    return values.new_empty(()), values.new_empty((), dtype=torch.int64)


@torch.library.custom_op("conformance_kernels::masked_mean_backward", mutates_args=())
def masked_mean_backward_op(grad: Tensor, mask: Tensor, count: Tensor, impl: str) -> Tensor:
    """Gradient of masked_mean: grad/count where mask, else 0 (all 0 for an empty mask)."""
    return _backend(impl, grad.device).masked_mean_backward(grad, mask, count)


@masked_mean_backward_op.register_fake
def _masked_mean_backward_fake(grad, mask, count, impl):
    return torch.empty(mask.shape, dtype=grad.dtype, device=grad.device)


def _masked_mean_setup_context(ctx, inputs, output):
    _values, mask, impl = inputs
    _mean, count = output
    ctx.save_for_backward(mask, count)
    ctx.impl = impl


def _masked_mean_backward(ctx, grad_mean, _grad_count):
    mask, count = ctx.saved_tensors
    return masked_mean_backward_op(grad_mean, mask, count, ctx.impl), None, None


masked_mean_op.register_autograd(_masked_mean_backward, setup_context=_masked_mean_setup_context)


# --------------------------------------------------------------------------- eager fast paths


def _direct(impl: str, device: torch.device) -> bool:
    """Whether to skip the Python custom-op layer (~0.1-0.2 ms a call) and call a kernel directly.

    In eager mode, on CPU tensors (C++, or Triton's interpreter) and on CUDA tensors (Triton);
    under torch.compile the custom ops (with their fake implementations) are used.
    """
    return device.type in ("cpu", "cuda") and not torch.compiler.is_compiling()


def sparse_adam_step(
    param, exp_avg, exp_avg_sq, indices, values, step_size, beta1, beta2, eps, maximize, impl,
    step_size_tensor=None,
):
    """One fused SparseAdam step; returns a deferred index check (CUDA Triton path) or None.

    ``step_size_tensor`` (Triton only): the step size as a 0-d float64 device tensor, for steps
    captured in a CUDA graph.
    """
    args = (param, exp_avg, exp_avg_sq, indices, values, step_size, beta1, beta2, eps, maximize)
    if step_size_tensor is not None or (_direct(impl, param.device) and _backend(impl, param.device) is not _CPP):
        check_sparse_step(param, {"exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}, indices, values)
        check_sparse_extent(list(param.shape[: indices.shape[0]]))
        return _triton_backend().sparse_adam_step_(*args, step_size_tensor=step_size_tensor)
    if _direct(impl, param.device):
        _CPP.sparse_adam_step_(*args)
    else:
        sparse_adam_step_op(*args, impl)
    return None


def adagrad_step(param, state_sum, indices, values, clr, eps, maximize, impl, clr_tensor=None):
    """One fused sparse Adagrad step; as :func:`sparse_adam_step` (``clr_tensor`` likewise)."""
    args = (param, state_sum, indices, values, clr, eps, maximize)
    if clr_tensor is not None or (_direct(impl, param.device) and _backend(impl, param.device) is not _CPP):
        check_sparse_step(param, {"state_sum": state_sum}, indices, values)
        check_sparse_extent(list(param.shape[: indices.shape[0]]))
        return _triton_backend().adagrad_step_(*args, clr_tensor=clr_tensor)
    if _direct(impl, param.device):
        _CPP.adagrad_step_(*args)
    else:
        adagrad_step_op(*args, impl)
    return None


def coalesce_parts(indices, values, size, impl):
    if _direct(impl, values.device):
        check_coo_parts(indices, values, list(size))
        check_sparse_extent(list(size[: indices.shape[0]]))
        return _backend(impl, values.device).coalesce(indices, values, list(size))
    return coalesce_op(indices, values, size, impl)
