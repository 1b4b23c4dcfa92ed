"""What the Triton kernels of both dedup paths share (``_triton``: the sort path; ``_slots``: the slot
path): block sizes, the interpreter switch, scalars split into float32 halves, and the optimizers'
row updates (:func:`_adam_rows`, :func:`_adagrad_rows`), the one place their arithmetic is written."""

from __future__ import annotations

import functools
import math
import os
import struct
from types import MappingProxyType

import numpy as np
import torch
import triton
import triton.language as tl

BLOCK_ELEMENTS = 1024
MAX_KERNEL_SPARSE_DIMS = 4

_TL_DTYPES = MappingProxyType({
    torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16,
    torch.float32: tl.float32,
    torch.float64: tl.float64,
})


def interpreter_active() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# triton.jit picks interpreter or compiler when the kernels below are decorated
INTERPRETED = interpreter_active()
INTERPRETED_ROWS, INTERPRETED_DUPS = 256, 256  # the interpreter's tiles (see _grid)
# the most elements one Triton tensor may hold (1,048,576 in Triton 3.x): the (rows, duplicates,
# columns) tile of _sum_runs is kept within it
MAX_TILE_ELEMENTS = getattr(tl, "TRITON_MAX_TENSOR_NUMEL", 1 << 20)


def _ieee_arithmetic(launch):
    """Triton's interpreter runs a kernel's arithmetic in NumPy, which warns (RuntimeWarning: invalid
    value encountered in divide / reduce) on 0/0, inf - inf and overflow. The GPU it stands for
    returns NaN or inf silently, as IEEE 754 says, and the specs expect exactly those values (a
    masked mean over +inf and -inf is NaN): the interpreted launches run under np.errstate(all=
    "ignore"), so the main job prints no warning the suite causes on purpose. Compiled kernels
    are unchanged."""
    if not INTERPRETED:
        return launch

    @functools.wraps(launch)
    def quiet(*args, **kwargs):
        with np.errstate(all="ignore"):
            return launch(*args, **kwargs)

    return quiet


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


def _block_dups(block_cols: int) -> int:
    """Sorted positions summed per loop iteration (narrow rows: more duplicates per iteration)."""
    return 16 if block_cols <= 16 else 8 if block_cols <= 64 else 4


def _block_rows(block_cols: int) -> int:
    """Sorted positions per program: about 4096 elements per loaded tile."""
    return max(2, min(32, 4096 // (block_cols * _block_dups(block_cols))))


def key_dtype(total: int) -> torch.dtype:
    """Narrowest signed integer dtype holding every key in [0, total] (total is the sentinel)."""
    for dtype in (torch.int16, torch.int32):
        if total <= torch.iinfo(dtype).max:
            return dtype
    return torch.int64


def _to_float32(x: float) -> float:
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:  # beyond float32's range: the kernel sees inf, as torch's float32 would
        return math.copysign(math.inf, x)


def split_scalar(x: float) -> tuple[float, float]:
    """``x`` as float32 ``hi`` + float32 ``lo``: hi + lo carries 48 significant bits of x.

    Triton passes Python floats to kernels as float32; float64 steps sum both halves in float64.
    """
    x = float(x)
    hi = _to_float32(x)
    if not math.isfinite(hi):
        return hi, 0.0
    return hi, _to_float32(x - hi)


# --------------------------------------------------------------------------- shared device functions


@triton.jit
def _scalar(hi, lo, ACC: tl.constexpr):
    """hi + lo in the accumulation type (works for Python floats and float32 kernel scalars)."""
    return tl.full((), 0.0, ACC) + hi + lo


@triton.jit
def _adam_rows(param_ptr, exp_avg_ptr, exp_avg_sq_ptr, key, live, cols, col_ok, width, g, step_size_hi,
               step_size_lo, step_size_ptr, omb1_hi, omb1_lo, omb2_hi, omb2_lo, eps_hi, eps_lo,
               MAXIMIZE: tl.constexpr, STEP_SIZE_ON_DEVICE: tl.constexpr, ACC: tl.constexpr):
    """SparseAdam's update of rows ``key`` (lanes ``live``) with their summed gradient ``g``: the one
    place its arithmetic is written (the sort path and the slot path, ``_slots``, both call it)."""
    if MAXIMIZE:
        g = -g
    if STEP_SIZE_ON_DEVICE:
        neg_step_size = -tl.load(step_size_ptr).to(ACC)
    else:
        neg_step_size = -_scalar(step_size_hi, step_size_lo, ACC)
    one_minus_beta1 = _scalar(omb1_hi, omb1_lo, ACC)
    one_minus_beta2 = _scalar(omb2_hi, omb2_lo, ACC)
    eps = _scalar(eps_hi, eps_lo, ACC)
    offs = key.to(tl.int64)[:, None] * width + cols[None, :]
    ok = live[:, None] & col_ok[None, :]
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
def _adagrad_rows(param_ptr, sum_ptr, key, live, cols, col_ok, width, g, clr_hi, clr_lo, clr_ptr, eps_hi,
                  eps_lo, MAXIMIZE: tl.constexpr, CLR_ON_DEVICE: tl.constexpr, ACC: tl.constexpr):
    """Sparse Adagrad's update of rows ``key`` (lanes ``live``) with their summed gradient ``g``."""
    if MAXIMIZE:
        g = -g
    if CLR_ON_DEVICE:
        neg_clr = -tl.load(clr_ptr).to(ACC)
    else:
        neg_clr = -_scalar(clr_hi, clr_lo, ACC)
    eps = _scalar(eps_hi, eps_lo, ACC)
    offs = key.to(tl.int64)[:, None] * width + cols[None, :]
    ok = live[:, None] & col_ok[None, :]
    s_new = tl.load(sum_ptr + offs, mask=ok, other=0.0).to(ACC) + g * g
    std = tl.sqrt(s_new) + eps
    p_new = tl.load(param_ptr + offs, mask=ok, other=0.0).to(ACC) + (g / std) * neg_clr
    tl.store(sum_ptr + offs, s_new.to(sum_ptr.dtype.element_ty), mask=ok)
    tl.store(param_ptr + offs, p_new.to(param_ptr.dtype.element_ty), mask=ok)
