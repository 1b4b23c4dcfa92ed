"""Triton kernels for the same operators as the C++ ones (used for CUDA tensors).

With ``TRITON_INTERPRET=1`` set before this module is imported, the kernels run in Triton's
interpreter on CPU tensors, which is how the tests check them on machines without a GPU.

Design of the sparse paths (see docs/kernels-gpu.md), chosen so that an optimizer step never waits
for the GPU and can be captured in a CUDA graph:

* **Keys.** One kernel validates the COO indices and linearizes them into row keys, written in the
  narrowest integer type that holds every key plus one sentinel (int16, int32 or int64; the type
  follows from the shape, not from the data). An entry with an index out of range gets the sentinel
  key ``total`` (the number of sparse elements), so it sorts last.
* **Sort.** ``torch.sort(stable=True)`` of the narrow keys gives the sorted keys and the
  permutation; duplicates keep their original order, so sums are deterministic.
* **Runs without compaction.** The update kernels are launched over *sorted positions* (the grid
  depends only on nnz): the lane at the first position of a run of equal keys sums the run's value
  rows (BLOCK_K positions per iteration, in a loop whose trip count is read on the device) and
  updates that row. No ``unique``, no
  ``.item()``, no device-to-host copy: sizes and block shapes come from shapes alone.
* **Bad indices never touch memory.** The update kernels read the last sorted key; when it is the
  sentinel, no lane writes, so the step is a no-op. On CPU tensors (interpreter) the indices are
  checked eagerly and ValueError is raised at once. On CUDA tensors, raising at once would need a
  sync, so the check is deferred: :class:`IndexCheck` copies the last key to pinned memory
  asynchronously and the optimizers raise the ValueError at their next ``step()`` (or at
  ``check_index_errors()``, which waits).
* **Scalars** are passed as kernel arguments. Triton passes Python floats as float32, so a scalar
  that must be exact in float64 is passed as two float32 halves (``hi + lo``, 48 significant bits)
  and summed in the accumulation type. A step whose scalars depend on a device-side step count
  (``capturable=True``) reads them from a device tensor computed by torch ops on the device.
* ``coalesce`` needs the number of unique keys to size its result, so it reads it (and the
  sentinel check) in one device-to-host copy *after* its kernels have been launched: one sync.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import _slots
from ._triton_common import (  # noqa: F401 - re-exported: this module is the Triton backend (_ops._triton_backend)
    BLOCK_ELEMENTS,
    INTERPRETED,
    INTERPRETED_DUPS,
    INTERPRETED_ROWS,
    MAX_KERNEL_SPARSE_DIMS,
    MAX_TILE_ELEMENTS,
    _acc_dtype,
    _adagrad_rows,
    _adam_rows,
    _block_cols,
    _block_dups,
    _block_rows,
    _check_launchable,
    _TL_DTYPES,
    _ieee_arithmetic,
    key_dtype,
    split_scalar,
)
from ._triton_masked import masked_mean, masked_mean_backward  # noqa: F401 - the Triton backend's masked mean
from ._validate import check_index_range
# --------------------------------------------------------------------------- kernels


@triton.jit
def _keys_kernel(idx0_ptr, idx1_ptr, idx2_ptr, idx3_ptr, keys_ptr, nnz, s0, s1, s2, s3, total,
                 NDIM: tl.constexpr, BLOCK: tl.constexpr):
    """Row keys of NDIM (<= 4) index rows; an entry with any index out of range gets ``total``."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < nnz
    key = tl.zeros((BLOCK,), dtype=tl.int64)
    bad = offs < 0
    for d in tl.static_range(NDIM):
        if d == 0:
            v = tl.load(idx0_ptr + offs, mask=ok, other=0)
            size = s0
        elif d == 1:
            v = tl.load(idx1_ptr + offs, mask=ok, other=0)
            size = s1
        elif d == 2:
            v = tl.load(idx2_ptr + offs, mask=ok, other=0)
            size = s2
        else:
            v = tl.load(idx3_ptr + offs, mask=ok, other=0)
            size = s3
        bad = bad | (v < 0) | (v >= size)
        key = key * size + v
    key = tl.where(bad, total, key)
    tl.store(keys_ptr + offs, key.to(keys_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _run_heads(skeys_ptr, nnz, BLOCK_S: tl.constexpr):
    """Sorted positions of this program, their keys, and which of them start a run of equal keys."""
    pos = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    in_range = pos < nnz
    key = tl.load(skeys_ptr + pos, mask=in_range, other=0)
    prev = tl.load(skeys_ptr + pos - 1, mask=in_range & (pos > 0), other=0)
    head = in_range & ((pos == 0) | (prev != key))
    return pos, key, head


@triton.jit
def _sum_runs(values_ptr, perm_ptr, skeys_ptr, nnz, pos, key, head, cols, col_ok, width,
              BLOCK_S: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
              ACC: tl.constexpr):
    """Each head lane sums the value rows of its run, BLOCK_K sorted positions per iteration.

    The loop runs while some lane's run filled its whole tile; the trip count is read on the
    device (no host-side maximum run length)."""
    acc = tl.zeros((BLOCK_S, BLOCK_D), dtype=ACC)
    ks = tl.arange(0, BLOCK_K)
    more = head
    at = pos
    while tl.max(more.to(tl.int32), axis=0) > 0:
        at2 = at[:, None] + ks[None, :]
        inb = more[:, None] & (at2 < nnz)
        live = inb & (tl.load(skeys_ptr + at2, mask=inb, other=0) == key[:, None])
        src = tl.load(perm_ptr + at2, mask=live, other=0)
        rows = tl.load(values_ptr + src[:, :, None] * width + cols[None, None, :],
                       mask=live[:, :, None] & col_ok[None, None, :], other=0.0)
        acc += tl.sum(rows.to(ACC), axis=1)
        more = more & (tl.sum(live.to(tl.int32), axis=1) == BLOCK_K)
        at = at + BLOCK_K
    return acc


@triton.jit
def _coalesce_kernel(values_ptr, perm_ptr, skeys_ptr, seg_ptr, first_ptr, out_ptr, nnz, width,
                     BLOCK_S: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, ACC: tl.constexpr):
    pos, key, head = _run_heads(skeys_ptr, nnz, BLOCK_S)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    col_ok = cols < width
    seg = tl.load(seg_ptr + pos, mask=head, other=0) - 1
    if tl.program_id(1) == 0:
        tl.store(first_ptr + seg, tl.load(perm_ptr + pos, mask=head, other=0), mask=head)
    acc = _sum_runs(values_ptr, perm_ptr, skeys_ptr, nnz, pos, key, head, cols, col_ok, width,
                    BLOCK_S, BLOCK_K, BLOCK_D, ACC)
    out = out_ptr + seg.to(tl.int64)[:, None] * width + cols[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=head[:, None] & col_ok[None, :])


@triton.jit
def _sparse_adam_kernel(param_ptr, exp_avg_ptr, exp_avg_sq_ptr, values_ptr, perm_ptr, skeys_ptr,
                        nnz, width, total, step_size_hi, step_size_lo, step_size_ptr, omb1_hi,
                        omb1_lo, omb2_hi, omb2_lo, eps_hi, eps_lo, MAXIMIZE: tl.constexpr,
                        STEP_SIZE_ON_DEVICE: tl.constexpr, BLOCK_S: tl.constexpr,
                        BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, ACC: tl.constexpr):
    pos, key, head = _run_heads(skeys_ptr, nnz, BLOCK_S)
    # an index out of range sorted the sentinel last: then no lane writes anything
    head = head & (tl.load(skeys_ptr + (nnz - 1) + pos * 0) < total)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    col_ok = cols < width
    g = _sum_runs(values_ptr, perm_ptr, skeys_ptr, nnz, pos, key, head, cols, col_ok, width,
                  BLOCK_S, BLOCK_K, BLOCK_D, ACC)
    _adam_rows(param_ptr, exp_avg_ptr, exp_avg_sq_ptr, key, head, cols, col_ok, width, g, step_size_hi,
               step_size_lo, step_size_ptr, omb1_hi, omb1_lo, omb2_hi, omb2_lo, eps_hi, eps_lo, MAXIMIZE,
               STEP_SIZE_ON_DEVICE, ACC)


@triton.jit
def _adagrad_kernel(param_ptr, sum_ptr, values_ptr, perm_ptr, skeys_ptr, nnz, width, total,
                    clr_hi, clr_lo, clr_ptr, eps_hi, eps_lo, MAXIMIZE: tl.constexpr,
                    CLR_ON_DEVICE: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_K: tl.constexpr,
                    BLOCK_D: tl.constexpr, ACC: tl.constexpr):
    pos, key, head = _run_heads(skeys_ptr, nnz, BLOCK_S)
    head = head & (tl.load(skeys_ptr + (nnz - 1) + pos * 0) < total)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    col_ok = cols < width
    g = _sum_runs(values_ptr, perm_ptr, skeys_ptr, nnz, pos, key, head, cols, col_ok, width,
                  BLOCK_S, BLOCK_K, BLOCK_D, ACC)
    _adagrad_rows(param_ptr, sum_ptr, key, head, cols, col_ok, width, g, clr_hi, clr_lo, clr_ptr, eps_hi,
                  eps_lo, MAXIMIZE, CLR_ON_DEVICE, ACC)


# --------------------------------------------------------------------------- host side


def _sparse_total(sparse_size: list[int]) -> int:
    total = 1
    for s in sparse_size:
        total *= s
    return total


class SortedKeys:
    """Sorted narrow row keys of COO indices and the permutation that sorts them; no sync.

    ``total`` (the number of sparse elements) is the sentinel key of entries with an index out of
    range; ``keys[-1] == total`` tells that the indices are bad.
    """

    @_ieee_arithmetic
    def __init__(self, indices: torch.Tensor, sparse_size: list[int]) -> None:
        sparse_dim, nnz = indices.shape
        self.total = _sparse_total(sparse_size)
        self.nnz = nnz
        dtype = key_dtype(self.total)
        keys = torch.empty(nnz, dtype=dtype, device=indices.device)
        if nnz == 0:
            pass
        elif sparse_dim == 0:
            keys.zero_()
        elif sparse_dim <= MAX_KERNEL_SPARSE_DIMS:
            rows = [indices[d] for d in range(sparse_dim)]
            rows += [rows[0]] * (MAX_KERNEL_SPARSE_DIMS - sparse_dim)
            sizes = list(sparse_size) + [1] * (MAX_KERNEL_SPARSE_DIMS - sparse_dim)
            _keys_kernel[(triton.cdiv(nnz, BLOCK_ELEMENTS),)](
                *rows, keys, nnz, *sizes, self.total, NDIM=sparse_dim, BLOCK=BLOCK_ELEMENTS)
        else:  # rare: torch ops with Python-scalar operands (no host-to-device copies)
            key = torch.zeros(nnz, dtype=torch.int64, device=indices.device)
            bad = torch.zeros(nnz, dtype=torch.bool, device=indices.device)
            for d, size in enumerate(sparse_size):
                col = indices[d]
                bad |= (col < 0) | (col >= size)
                key = key * size + col
            keys.copy_(key.masked_fill_(bad, self.total))
        self.keys, self.perm = torch.sort(keys, stable=True)

    def bad_indices(self) -> torch.Tensor:
        """0-d bool device tensor: some index was out of range (reads the last sorted key)."""
        return self.keys[-1] >= self.total


class IndexCheck:
    """A deferred check that the indices of one step were in range (see the module docstring).

    The last sorted key is copied to pinned host memory without waiting and an event recorded;
    :meth:`poll` raises ValueError once the copy has landed and shows the sentinel, :meth:`wait`
    waits for it first.
    """

    def __init__(self, flag: torch.Tensor, threshold: int, indices: torch.Tensor, sparse_size: list[int]) -> None:
        """``flag``: a one-element device tensor whose value is ``>= threshold`` when an index was bad
        (the last sorted key against the sentinel; the slot path's count of bad entries against 1)."""
        self.indices = indices
        self.sparse_size = list(sparse_size)
        self.total = threshold
        last = flag
        if last.device.type == "cuda":
            self.host = torch.empty(1, dtype=last.dtype, pin_memory=True)
            self.host.copy_(last, non_blocking=True)
            self.event: torch.cuda.Event | None = torch.cuda.Event()
            self.event.record()
        else:
            self.host = last.clone()
            self.event = None

    def ready(self) -> bool:
        return self.event is None or self.event.query()

    def poll(self) -> bool:
        """Raise ValueError if the copy has landed and the indices were bad; True once decided."""
        if not self.ready():
            return False
        if int(self.host[0]) >= self.total:
            check_index_range(self.indices, self.sparse_size)  # names the index (may sync)
            raise ValueError("an index of the sparse gradient is out of range")  # not reached
        return True

    def wait(self) -> None:
        if self.event is not None:
            self.event.synchronize()
        self.poll()


def _row_width(values: torch.Tensor) -> int:
    width = 1
    for s in values.shape[1:]:
        width *= s
    return width


def _grid(nnz: int, width: int):
    block_d = _block_cols(width)
    block_s, block_k = _block_rows(block_d), _block_dups(block_d)
    if INTERPRETED:
        # the interpreter pays ~20 ms per program and per loop trip, whatever the tile: fewer,
        # bigger tiles on CPU tensors (the results do not depend on the tiling); and no columns
        # past the row's width, which it would compute and mask away (16x the work at width 1)
        block_d = min(block_d, triton.next_power_of_2(max(width, 1)))
        block_s = max(block_s, min(INTERPRETED_ROWS, triton.next_power_of_2(max(nnz, 1))))
        block_k = max(block_k, INTERPRETED_DUPS)
        while block_s * block_k * block_d > MAX_TILE_ELEMENTS:  # (256 x 1 x 128 always fits)
            block_k //= 2  # the (rows, duplicates, columns) tile stays within Triton's tensor limit
    return (triton.cdiv(nnz, block_s), max(1, triton.cdiv(width, block_d))), dict(
        BLOCK_S=block_s, BLOCK_K=block_k, BLOCK_D=block_d)


@_ieee_arithmetic
def coalesce(indices: torch.Tensor, values: torch.Tensor, size: list[int], *,
             eager_check: bool | None = None):
    """Coalesced (indices, values) of a COO tensor; floating dtypes only.

    One device-to-host read (the number of unique keys, which sizes the result, together with the
    bad-index sentinel), after all kernels have been launched; ValueError for a bad index comes
    from that read. ``eager_check`` (default: on CPU tensors) checks the indices first instead.
    """
    _check_launchable(indices, values)
    if values.dtype not in _TL_DTYPES:
        raise TypeError(f"the Triton coalesce supports floating dtypes only, got {values.dtype}")
    sparse_dim, nnz = indices.shape
    sparse_size = list(size[:sparse_dim])
    if eager_check or (eager_check is None and indices.device.type == "cpu"):
        check_index_range(indices, sparse_size)
    if nnz == 0:
        return indices.clone(), values.clone()
    values = values.contiguous()
    width = _row_width(values)
    if _slots.usable(_sparse_total(sparse_size), nnz, sparse_dim) and width > 0:
        out_indices, out_values, result = _slots.coalesce(indices.contiguous(), values, sparse_size, width)
        nbad, nseg = result.tolist()  # the sync
        if nbad:
            check_index_range(indices, sparse_size)
        return out_indices[:, :nseg], out_values[:nseg]
    keys = SortedKeys(indices.contiguous(), sparse_size)
    run_start = torch.ones(nnz, dtype=torch.int64, device=values.device)
    torch.ne(keys.keys[1:], keys.keys[:-1], out=run_start[1:])
    seg = run_start.cumsum_(0)  # 1-based run number of each sorted position
    first = torch.empty(nnz, dtype=torch.int64, device=values.device)
    out_values = values.new_empty((nnz, *values.shape[1:]))
    grid, meta = _grid(nnz, width)
    _coalesce_kernel[grid](values, keys.perm, keys.keys, seg, first, out_values, nnz, width,
                           ACC=_acc_dtype(values.dtype), **meta)
    nseg, last_key = torch.stack([seg[-1], keys.keys[-1].to(torch.int64)]).tolist()  # the sync
    if last_key >= keys.total:
        check_index_range(indices, sparse_size)
    out_indices = indices.index_select(1, first[:nseg])
    return out_indices, out_values[:nseg]


def _step_setup(param, indices, values, eager_check: bool | None):
    """(contiguous values, sparse size, eager check, whether the slot path takes the step)."""
    values = values.contiguous()
    sparse_size = list(param.shape[: indices.shape[0]])
    if eager_check is None:
        eager_check = param.device.type == "cpu"
    if eager_check:
        check_index_range(indices, sparse_size)
    slots = _slots.usable(_sparse_total(sparse_size), indices.shape[1], indices.shape[0])
    return values, sparse_size, eager_check, slots


def _maybe_check(flag, threshold, indices, sparse_size, eager_check):
    if not eager_check:
        if indices.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return None  # no event or copy inside a graph; the kernels still guard memory
        return IndexCheck(flag, threshold, indices, sparse_size)
    return None


@_ieee_arithmetic
def sparse_adam_step_(param, exp_avg, exp_avg_sq, indices, values, step_size, beta1, beta2,
                      eps, maximize, *, step_size_tensor=None, eager_check=None):
    """Fused SparseAdam update; returns an :class:`IndexCheck` when the index check is deferred.

    ``step_size_tensor``: a 0-d float64 device tensor holding the step size (for capturable
    steps); then ``step_size`` is ignored. ``eager_check``: check the index range before launching
    (default on CPU tensors); otherwise it is deferred.
    """
    _check_launchable(param, exp_avg, exp_avg_sq, indices, values)
    nnz, width = indices.shape[1], _row_width(values)
    if nnz == 0 or width == 0:
        return None
    values, sparse_size, eager_check, slots = _step_setup(param, indices, values, eager_check)
    indices = indices.contiguous()
    if slots:
        result = _slots.sparse_adam_step_(param, exp_avg, exp_avg_sq, indices, values, width, step_size,
                                            beta1, beta2, eps, maximize, step_size_tensor, sparse_size)
        return _maybe_check(result[:1], 1, indices, sparse_size, eager_check)
    keys = SortedKeys(indices, sparse_size)
    grid, meta = _grid(nnz, width)
    on_device = step_size_tensor is not None
    _sparse_adam_kernel[grid](
        param, exp_avg, exp_avg_sq, values, keys.perm, keys.keys, nnz, width, keys.total,
        *split_scalar(0.0 if on_device else float(step_size)),
        step_size_tensor if on_device else param,
        *split_scalar(1.0 - beta1), *split_scalar(1.0 - beta2), *split_scalar(eps),
        MAXIMIZE=bool(maximize), STEP_SIZE_ON_DEVICE=on_device, ACC=_acc_dtype(param.dtype), **meta)
    return _maybe_check(keys.keys[-1:], keys.total, indices, sparse_size, eager_check)


@_ieee_arithmetic
def adagrad_step_(param, state_sum, indices, values, clr, eps, maximize, *, clr_tensor=None,
                  eager_check=None):
    """Fused sparse Adagrad update; arguments as in :func:`sparse_adam_step_`."""
    _check_launchable(param, state_sum, indices, values)
    nnz, width = indices.shape[1], _row_width(values)
    if nnz == 0 or width == 0:
        return None
    values, sparse_size, eager_check, slots = _step_setup(param, indices, values, eager_check)
    indices = indices.contiguous()
    if slots:
        result = _slots.adagrad_step_(param, state_sum, indices, values, width, clr, eps, maximize, clr_tensor,
                                        sparse_size)
        return _maybe_check(result[:1], 1, indices, sparse_size, eager_check)
    keys = SortedKeys(indices, sparse_size)
    grid, meta = _grid(nnz, width)
    on_device = clr_tensor is not None
    _adagrad_kernel[grid](
        param, state_sum, values, keys.perm, keys.keys, nnz, width, keys.total,
        *split_scalar(0.0 if on_device else float(clr)), clr_tensor if on_device else param,
        *split_scalar(eps), MAXIMIZE=bool(maximize), CLR_ON_DEVICE=on_device,
        ACC=_acc_dtype(param.dtype), **meta)
    return _maybe_check(keys.keys[-1:], keys.total, indices, sparse_size, eager_check)
