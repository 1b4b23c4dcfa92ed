"""Triton kernels for the same operators as the C++ ones (used for CUDA tensors).

Sorting of the linearized COO indices uses ``torch.sort(stable=True)`` on the
device; the segmented duplicate sums, the fused optimizer updates and the masked
mean forward/backward are Triton kernels. With ``TRITON_INTERPRET=1`` set before
this module is imported, the kernels run in Triton's interpreter on CPU tensors,
which is how the tests check them on machines without a GPU.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ._validate import check_index_range

BLOCK_SEGMENTS = 16
BLOCK_ELEMENTS = 1024

_TL_DTYPES = {
    torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16,
    torch.float32: tl.float32,
    torch.float64: tl.float64,
}


def interpreter_active() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# triton.jit picks interpreter or compiler when the kernels below are decorated
INTERPRETED = interpreter_active()


def _acc_dtype(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


def _check_launchable(*tensors: torch.Tensor) -> None:
    for t in tensors:
        if t.device.type != "cuda" and not INTERPRETED:
            raise RuntimeError(
                "conformance.kernels: the Triton kernels need CUDA tensors; to run them on "
                f"{t.device.type} tensors set TRITON_INTERPRET=1 before the first Triton kernel "
                "is used (conformance.kernels imports triton lazily)"
            )


def _block_cols(width: int) -> int:
    return max(16, min(128, triton.next_power_of_2(max(width, 1))))


def _block_dups(max_count: int) -> int:
    """Duplicates summed per iteration: one specialization per power of two up to 16."""
    return min(16, triton.next_power_of_2(max(max_count, 1)))


@triton.jit
def _sum_segments(values_ptr, perm_ptr, start_ptr, count_ptr, segs, seg_ok, cols, col_ok,
                  width, max_count, BLOCK_S: tl.constexpr, BLOCK_K: tl.constexpr,
                  BLOCK_D: tl.constexpr, ACC: tl.constexpr):
    """Sums the duplicate value rows of a block of segments, BLOCK_K duplicates at a time."""
    start = tl.load(start_ptr + segs, mask=seg_ok, other=0)
    count = tl.load(count_ptr + segs, mask=seg_ok, other=0)
    acc = tl.zeros((BLOCK_S, BLOCK_D), dtype=ACC)
    for first in range(0, max_count, BLOCK_K):
        ks = first + tl.arange(0, BLOCK_K)
        live = seg_ok[:, None] & (ks[None, :] < count[:, None])
        pos = tl.load(perm_ptr + start[:, None] + ks[None, :], mask=live, other=0)
        rows = tl.load(values_ptr + pos[:, :, None] * width + cols[None, None, :],
                       mask=live[:, :, None] & col_ok[None, None, :], other=0.0)
        acc += tl.sum(rows.to(ACC), axis=1)
    return acc


@triton.jit
def _coalesce_values_kernel(values_ptr, perm_ptr, start_ptr, count_ptr, out_ptr, nseg, width,
                            max_count, BLOCK_S: tl.constexpr, BLOCK_K: tl.constexpr,
                            BLOCK_D: tl.constexpr, ACC: tl.constexpr):
    segs = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    seg_ok = segs < nseg
    col_ok = cols < width
    acc = _sum_segments(values_ptr, perm_ptr, start_ptr, count_ptr, segs, seg_ok, cols, col_ok,
                        width, max_count, BLOCK_S, BLOCK_K, BLOCK_D, ACC)
    out = out_ptr + segs.to(tl.int64)[:, None] * width + cols[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=seg_ok[:, None] & col_ok[None, :])


@triton.jit
def _sparse_adam_kernel(param_ptr, exp_avg_ptr, exp_avg_sq_ptr, values_ptr, perm_ptr, start_ptr,
                        count_ptr, key_ptr, nseg, width, max_count, scalars_ptr,
                        BLOCK_S: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
                        ACC: tl.constexpr):
    segs = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    seg_ok = segs < nseg
    col_ok = cols < width
    g = _sum_segments(values_ptr, perm_ptr, start_ptr, count_ptr, segs, seg_ok, cols, col_ok,
                      width, max_count, BLOCK_S, BLOCK_K, BLOCK_D, ACC)
    # scalars in the accumulation dtype (a Python float argument would be float32)
    g = g * tl.load(scalars_ptr + 0)
    neg_step_size = tl.load(scalars_ptr + 1)
    one_minus_beta1 = tl.load(scalars_ptr + 2)
    one_minus_beta2 = tl.load(scalars_ptr + 3)
    eps = tl.load(scalars_ptr + 4)
    rows = tl.load(key_ptr + segs, mask=seg_ok, other=0)
    offs = rows[:, None] * width + cols[None, :]
    ok = seg_ok[:, None] & col_ok[None, :]
    m_old = tl.load(exp_avg_ptr + offs, mask=ok, other=0.0).to(ACC)
    v_old = tl.load(exp_avg_sq_ptr + offs, mask=ok, other=0.0).to(ACC)
    p_old = tl.load(param_ptr + offs, mask=ok, other=0.0).to(ACC)
    m_new = (g - m_old) * one_minus_beta1 + m_old
    v_new = (g * g - v_old) * one_minus_beta2 + v_old
    denom = tl.sqrt(v_new) + eps
    p_new = p_old + (m_new / denom) * neg_step_size
    tl.store(exp_avg_ptr + offs, m_new.to(exp_avg_ptr.dtype.element_ty), mask=ok)
    tl.store(exp_avg_sq_ptr + offs, v_new.to(exp_avg_sq_ptr.dtype.element_ty), mask=ok)
    tl.store(param_ptr + offs, p_new.to(param_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _adagrad_kernel(param_ptr, sum_ptr, values_ptr, perm_ptr, start_ptr, count_ptr, key_ptr,
                    nseg, width, max_count, scalars_ptr, BLOCK_S: tl.constexpr,
                    BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, ACC: tl.constexpr):
    segs = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    seg_ok = segs < nseg
    col_ok = cols < width
    g = _sum_segments(values_ptr, perm_ptr, start_ptr, count_ptr, segs, seg_ok, cols, col_ok,
                      width, max_count, BLOCK_S, BLOCK_K, BLOCK_D, ACC)
    g = g * tl.load(scalars_ptr + 0)
    neg_clr = tl.load(scalars_ptr + 1)
    eps = tl.load(scalars_ptr + 2)
    rows = tl.load(key_ptr + segs, mask=seg_ok, other=0)
    offs = rows[:, None] * width + cols[None, :]
    ok = seg_ok[:, None] & col_ok[None, :]
    s_new = tl.load(sum_ptr + offs, mask=ok, other=0.0).to(ACC) + g * g
    std = tl.sqrt(s_new) + eps
    p_new = tl.load(param_ptr + offs, mask=ok, other=0.0).to(ACC) + (g / std) * neg_clr
    tl.store(sum_ptr + offs, s_new.to(sum_ptr.dtype.element_ty), mask=ok)
    tl.store(param_ptr + offs, p_new.to(param_ptr.dtype.element_ty), mask=ok)


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
    for first in range(0, nparts, BLOCK):
        offs = first + tl.arange(0, BLOCK)
        ok = offs < nparts
        total += tl.load(psum_ptr + offs, mask=ok, other=0.0)
        count += tl.load(pcount_ptr + offs, mask=ok, other=0)
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


class _Segments:
    """Stable sort of linearized COO indices into runs of equal keys (torch ops)."""

    def __init__(self, indices: torch.Tensor, sparse_size: list[int]) -> None:
        check_index_range(indices, sparse_size)
        nnz = indices.shape[1]
        strides = [1] * len(sparse_size)
        for d in range(len(sparse_size) - 2, -1, -1):
            strides[d] = strides[d + 1] * sparse_size[d + 1]
        if len(sparse_size) == 0:
            keys = torch.zeros(nnz, dtype=torch.int64, device=indices.device)
        else:
            stride_t = torch.tensor(strides, dtype=torch.int64, device=indices.device)
            keys = (indices * stride_t[:, None]).sum(0)
        sorted_keys, perm = torch.sort(keys, stable=True)
        self.perm = perm.contiguous()
        self.keys, self.counts = torch.unique_consecutive(sorted_keys, return_counts=True)
        self.starts = (torch.cumsum(self.counts, 0) - self.counts).contiguous()
        self.count = self.keys.numel()
        self.max_count = int(self.counts.max()) if self.count else 0


def _segment_launch(seg: "_Segments", width: int, dtype: torch.dtype):
    """Grid (segment blocks x column blocks) and compile-time block sizes of a segment kernel."""
    block_d = _block_cols(width)
    grid = (triton.cdiv(seg.count, BLOCK_SEGMENTS), triton.cdiv(width, block_d))
    meta = dict(BLOCK_S=BLOCK_SEGMENTS, BLOCK_K=_block_dups(seg.max_count), BLOCK_D=block_d,
                ACC=_acc_dtype(dtype))
    return grid, meta


def _scalars(like: torch.Tensor, *values: float) -> torch.Tensor:
    """Kernel scalars as a small tensor in the accumulation dtype (float64 for float64)."""
    dtype = torch.float64 if like.dtype == torch.float64 else torch.float32
    return torch.tensor(values, dtype=dtype).to(like.device, non_blocking=True)


def _row_width(values: torch.Tensor) -> int:
    width = 1
    for s in values.shape[1:]:
        width *= s
    return width


def coalesce(indices: torch.Tensor, values: torch.Tensor, size: list[int]):
    """Coalesced (indices, values) of a COO tensor; floating dtypes only."""
    _check_launchable(indices, values)
    if values.dtype not in _TL_DTYPES:
        raise TypeError(f"the Triton coalesce supports floating dtypes only, got {values.dtype}")
    sparse_dim = indices.shape[0]
    values = values.contiguous()
    seg = _Segments(indices.contiguous(), list(size[:sparse_dim]))
    out_indices = indices[:, seg.perm[seg.starts]].contiguous()
    out_values = values.new_empty((seg.count, *values.shape[1:]))
    width = _row_width(values)
    if seg.count and width:
        grid, meta = _segment_launch(seg, width, values.dtype)
        _coalesce_values_kernel[grid](values, seg.perm, seg.starts, seg.counts, out_values,
                                      seg.count, width, seg.max_count, **meta)
    return out_indices, out_values


def sparse_adam_step_(param, exp_avg, exp_avg_sq, indices, values, step_size, beta1, beta2,
                      eps, maximize) -> None:
    _check_launchable(param, exp_avg, exp_avg_sq, indices, values)
    values = values.contiguous()
    seg = _Segments(indices.contiguous(), list(param.shape[: indices.shape[0]]))
    width = _row_width(values)
    if not (seg.count and width):
        return
    grid, meta = _segment_launch(seg, width, param.dtype)
    _sparse_adam_kernel[grid](param, exp_avg, exp_avg_sq, values, seg.perm, seg.starts,
                              seg.counts, seg.keys, seg.count, width, seg.max_count,
                              _scalars(param, -1.0 if maximize else 1.0, -step_size,
                                       1.0 - beta1, 1.0 - beta2, eps), **meta)


def adagrad_step_(param, state_sum, indices, values, clr, eps, maximize) -> None:
    _check_launchable(param, state_sum, indices, values)
    values = values.contiguous()
    seg = _Segments(indices.contiguous(), list(param.shape[: indices.shape[0]]))
    width = _row_width(values)
    if not (seg.count and width):
        return
    grid, meta = _segment_launch(seg, width, param.dtype)
    _adagrad_kernel[grid](param, state_sum, values, seg.perm, seg.starts, seg.counts, seg.keys,
                          seg.count, width, seg.max_count,
                          _scalars(param, -1.0 if maximize else 1.0, -clr, eps), **meta)


def masked_mean(values: torch.Tensor, mask: torch.Tensor):
    """(mean, count) of values where mask is true; NaN mean for an empty mask."""
    _check_launchable(values, mask)
    values = values.contiguous()
    mask = mask.contiguous()
    n = values.numel()
    nparts = max(1, triton.cdiv(n, BLOCK_ELEMENTS))
    acc_torch = torch.float64 if values.dtype == torch.float64 else torch.float32
    psum = torch.empty(nparts, dtype=acc_torch, device=values.device)
    pcount = torch.empty(nparts, dtype=torch.int64, device=values.device)
    acc = _acc_dtype(values.dtype)
    _masked_partials_kernel[(nparts,)](values, mask, psum, pcount, n, BLOCK=BLOCK_ELEMENTS, ACC=acc)
    mean = values.new_empty(())
    count = torch.empty((), dtype=torch.int64, device=values.device)
    _masked_finalize_kernel[(1,)](psum, pcount, mean, count, nparts, BLOCK=256, ACC=acc)
    return mean, count


def masked_mean_backward(grad: torch.Tensor, mask: torch.Tensor, count: torch.Tensor):
    _check_launchable(grad, mask, count)
    mask = mask.contiguous()
    out = torch.empty(mask.shape, dtype=grad.dtype, device=grad.device)
    n = mask.numel()
    if n:
        _masked_backward_kernel[(triton.cdiv(n, BLOCK_ELEMENTS),)](
            grad.reshape(()).contiguous(), mask, count, out, n, BLOCK=BLOCK_ELEMENTS,
            ACC=_acc_dtype(grad.dtype))
    return out
