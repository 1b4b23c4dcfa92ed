"""Triton kernels of ``masked_mean`` and its backward (CUDA tensors; CPU tensors under
``TRITON_INTERPRET=1``): per-block partial sums and counts, one finalizing program, no sync."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._triton_common import BLOCK_ELEMENTS, INTERPRETED, _acc_dtype, _check_launchable, _ieee_arithmetic

# the interpreter pays per program, whatever the tile: one program over 65,536 entries there (the result does not
# depend on the tiling but for the partial sums' order, a correct implementation's freedom)
BLOCK = (1 << 16) if INTERPRETED else BLOCK_ELEMENTS


@triton.jit
def _masked_partials_kernel(values_ptr, mask_ptr, psum_ptr, pcount_ptr, n,
                            BLOCK: tl.constexpr, ACC: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    in_range = offs < n
    keep = (tl.load(mask_ptr + offs, mask=in_range, other=0) != 0) & in_range
    x = tl.load(values_ptr + offs, mask=in_range, other=0.0).to(ACC)
    x = tl.where(keep, x, 0.0)
    tl.store(psum_ptr + tl.program_id(0), tl.sum(x, axis=0))
    tl.store(pcount_ptr + tl.program_id(0), tl.sum(keep.to(tl.int64), axis=0))


@triton.jit
def _masked_finalize_kernel(psum_ptr, pcount_ptr, mean_ptr, count_ptr, nparts,
                            BLOCK: tl.constexpr, ACC: tl.constexpr):
    total = tl.zeros((BLOCK,), dtype=ACC)
    count = tl.zeros((BLOCK,), dtype=tl.int64)
    first = 0
    while first < nparts:
        offs = first + tl.arange(0, BLOCK)
        ok = offs < nparts
        total += tl.load(psum_ptr + offs, mask=ok, other=0.0)
        count += tl.load(pcount_ptr + offs, mask=ok, other=0)
        first += BLOCK
    total_sum = tl.sum(total, axis=0)
    total_count = tl.sum(count, axis=0)
    nan = tl.full((), float("nan"), ACC)
    mean = tl.where(total_count > 0, total_sum / tl.maximum(total_count, 1).to(ACC), nan)
    tl.store(mean_ptr, mean.to(mean_ptr.dtype.element_ty))
    tl.store(count_ptr, total_count)


@triton.jit
def _masked_backward_kernel(grad_ptr, mask_ptr, count_ptr, out_ptr, n, BLOCK: tl.constexpr,
                            ACC: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    in_range = offs < n
    keep = tl.load(mask_ptr + offs, mask=in_range, other=0) != 0
    count = tl.load(count_ptr)
    g = tl.load(grad_ptr).to(ACC)
    share = tl.where(count > 0, g / tl.maximum(count, 1).to(ACC), 0.0)
    out = tl.where(keep, share, 0.0)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=in_range)


@_ieee_arithmetic
def masked_mean(values: torch.Tensor, mask: torch.Tensor):
    """(mean, count) of values where mask is true; NaN mean for an empty mask."""
    _check_launchable(values, mask)
    values = values.contiguous()
    mask = mask.contiguous()
    n = values.numel()
    nparts = max(1, triton.cdiv(n, BLOCK))
    acc_torch = torch.float64 if values.dtype == torch.float64 else torch.float32
    psum = torch.empty(nparts, dtype=acc_torch, device=values.device)
    pcount = torch.empty(nparts, dtype=torch.int64, device=values.device)
    acc = _acc_dtype(values.dtype)
    _masked_partials_kernel[(nparts,)](values, mask, psum, pcount, n, BLOCK=BLOCK, ACC=acc)
    mean = values.new_empty(())
    count = torch.empty((), dtype=torch.int64, device=values.device)
    _masked_finalize_kernel[(1,)](psum, pcount, mean, count, nparts, BLOCK=256, ACC=acc)
    return mean, count


@_ieee_arithmetic
def masked_mean_backward(grad: torch.Tensor, mask: torch.Tensor, count: torch.Tensor):
    _check_launchable(grad, mask, count)
    mask = mask.contiguous()
    out = torch.empty(mask.shape, dtype=grad.dtype, device=grad.device)
    n = mask.numel()
    if n:
        _masked_backward_kernel[(triton.cdiv(n, BLOCK),)](
            grad.reshape(()).contiguous(), mask, count, out, n, BLOCK=BLOCK,
            ACC=_acc_dtype(grad.dtype))
    return out
