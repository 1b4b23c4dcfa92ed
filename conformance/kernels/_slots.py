"""Sparse steps and ``coalesce`` without a sort: a slot table sized to the sparse rows.

The sort path (``_triton``: a keys kernel, ``torch.sort``'s radix sort of about ten launches, an
update kernel) is bound by the host on a GPU: most of a step's time is launching. This path
launches two Triton kernels per optimizer step (``coalesce``: the two and ``torch.cumsum`` over the
table, for the rows' ranks):

* **Claim** (one lane per gradient entry): validate the entry's indices and linearize them into a
  row key; ``atomic_cas(slot[key], EMPTY, position)``: the first entry to arrive owns the row.
  Every later entry of the row counts itself (``count[key]``) and adds its values to the owner's
  row of an accumulator (``atomic_add``). A bad index is counted in ``sync[0]`` instead.
* **Update** (one lane per entry): an owner adds its own values to its accumulator row (zeroing
  that row again), updates the parameter's row, and gives its slot back (``slot = EMPTY``, ``count
  = 0``). Between steps the tables and the accumulator are all empty again, so they are made once
  per device (at the first step, not inside a CUDA-graph capture) and shared by every step on it.
  The program that finishes last (an ``atomic_add`` on ``sync[1]``) copies the bad-index count to
  the step's own result and clears ``sync``. No lane writes when that count is not zero.

Sums: a row of one or two entries is summed exactly as a sort would (``a + b == b + a``); a row of
three or more is summed in the order its atomic adds land, so its last bit may differ from run to
run, as torch's own atomics-based CUDA kernels do. Under ``torch.use_deterministic_algorithms(True)``
the sort path runs instead.

Steps on one device share the tables, so they must be ordered on one stream (as an optimizer's
steps are). Tables larger than :data:`SLOT_ROWS_LIMIT` rows, more than
``MAX_KERNEL_SPARSE_DIMS`` sparse dimensions or no sparse dimension take the sort path.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from ._triton_common import (
    INTERPRETED,
    MAX_KERNEL_SPARSE_DIMS,
    _acc_dtype,
    _adagrad_rows,
    _adam_rows,
    _block_cols,
    split_scalar,
)

SLOT_ROWS_LIMIT = 1 << 24  # 16,777,216 rows: the tables (int32 each) stay within 64 MiB apiece
EMPTY = 2**31 - 1  # a free slot (positions are below it: nnz < 2**31 on this path)
_EMPTY = tl.constexpr(EMPTY)


def usable(total: int, nnz: int, sparse_dim: int) -> bool:
    """Whether a gradient with these shapes takes the slot path (decided from shapes, no sync; with
    ``torch.use_deterministic_algorithms(True)`` never: rows of three or more entries are summed in
    the order their atomic adds land)."""
    return (1 <= sparse_dim <= MAX_KERNEL_SPARSE_DIMS and 0 < total <= SLOT_ROWS_LIMIT and nnz < EMPTY
            and not torch.are_deterministic_algorithms_enabled())


class Tables:
    """One device's slot tables: ``slot`` (owner position or EMPTY), ``count`` (entries per row),
    ``present`` (0/1 per row, for coalesce's ranks; made when first needed) and ``sync`` (bad-index
    count, finished programs). All empty between steps."""

    def __init__(self, device: torch.device, rows: int) -> None:
        self.rows = rows
        self.slot = torch.full((rows + 1,), EMPTY, dtype=torch.int32, device=device)
        self.count = torch.zeros(rows, dtype=torch.int32, device=device)
        self.sync = torch.zeros(2, dtype=torch.int32, device=device)
        self.present: torch.Tensor | None = None

    def reset(self) -> None:
        """Empty every table again (after a launch that raised between the claim and the update)."""
        self.slot.fill_(EMPTY)
        self.count.zero_()
        self.sync.zero_()
        if self.present is not None:
            self.present.zero_()

    def with_present(self) -> torch.Tensor:
        if self.present is None:
            self.present = torch.zeros(self.rows, dtype=torch.int32, device=self.slot.device)
        return self.present


_TABLES: dict[torch.device, list[Tables]] = {}


def tables(device: torch.device, rows: int) -> Tables:
    """The device's smallest tables with at least ``rows`` rows (made on first need, never freed:
    a captured CUDA graph may hold their addresses)."""
    kept = _TABLES.setdefault(device, [])
    for t in kept:
        if t.rows >= rows:
            return t
    made = Tables(device, max(rows, 1024))
    kept.append(made)
    kept.sort(key=lambda t: t.rows)
    return made


# --------------------------------------------------------------------------- kernels


@triton.jit
def _claim_kernel(idx_ptr, values_ptr, keys_ptr, slot_ptr, count_ptr, present_ptr, acc_ptr, sync_ptr, nnz, width,
                  s0, s1, s2, s3, spare, NDIM: tl.constexpr, PRESENT: tl.constexpr, BLOCK_S: tl.constexpr,
                  BLOCK_D: tl.constexpr, ACC: tl.constexpr):
    """Row key of each entry (-1 for a bad index); the first entry to reach a row's slot owns the
    row, every later one counts itself and adds its values to the owner's accumulator row."""
    pos = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    ok = pos < nnz
    key = tl.zeros((BLOCK_S,), dtype=tl.int64)
    bad = pos < 0
    for d in tl.static_range(NDIM):
        v = tl.load(idx_ptr + d * nnz + pos, mask=ok, other=0)
        if d == 0:
            size = s0
        elif d == 1:
            size = s1
        elif d == 2:
            size = s2
        else:
            size = s3
        bad = bad | (v < 0) | (v >= size)
        key = key * size + v
    good = ok & (bad == 0)
    key = tl.where(good, key, 0)
    tl.store(keys_ptr + pos, tl.where(good, key, -1).to(tl.int32), mask=ok)
    # a lane without a row compares against -2 at the spare slot: never equal, nothing written
    owner = tl.atomic_cas(slot_ptr + tl.where(good, key, spare), tl.where(good, _EMPTY, -2).to(tl.int32),
                          pos.to(tl.int32))
    later = good & (owner != _EMPTY)
    tl.atomic_add(count_ptr + key, tl.full((BLOCK_S,), 1, tl.int32), mask=later)
    if PRESENT:
        tl.store(present_ptr + key, tl.full((BLOCK_S,), 1, tl.int32), mask=good)
    tl.atomic_add(sync_ptr, tl.sum((ok & bad).to(tl.int32), axis=0))
    if tl.max(later.to(tl.int32), axis=0) > 0:
        rows = tl.where(later, owner, 0).to(tl.int64)[:, None] * width
        c0 = 0
        while c0 < width:
            cols = c0 + tl.arange(0, BLOCK_D)
            m = later[:, None] & (cols < width)[None, :]
            vals = tl.load(values_ptr + pos.to(tl.int64)[:, None] * width + cols[None, :], mask=m, other=0.0)
            tl.atomic_add(acc_ptr + rows + cols[None, :], vals.to(ACC), mask=m)
            c0 += BLOCK_D


@triton.jit
def _owners(keys_ptr, slot_ptr, count_ptr, nnz, BLOCK_S: tl.constexpr):
    """This program's positions, their row keys, which own their row, and which of those owners
    have later entries summed in their accumulator row."""
    pos = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    key = tl.load(keys_ptr + pos, mask=pos < nnz, other=-1)
    valid = key >= 0
    own = valid & (tl.load(slot_ptr + key, mask=valid, other=-1) == pos)
    dup = own & (tl.load(count_ptr + key, mask=own, other=0) > 0)
    return pos, key, own, dup


@triton.jit
def _row_sum(values_ptr, acc_ptr, pos, own, dup, cols, col_ok, width, ACC: tl.constexpr):
    """An owner's row sum over the columns ``cols``: its own values plus its accumulator row (the
    later entries), which it sets back to zero."""
    offs = pos.to(tl.int64)[:, None] * width + cols[None, :]
    g = tl.load(values_ptr + offs, mask=own[:, None] & col_ok[None, :], other=0.0).to(ACC)
    m = dup[:, None] & col_ok[None, :]
    g += tl.load(acc_ptr + offs, mask=m, other=0.0)
    tl.store(acc_ptr + offs, tl.zeros(g.shape, ACC), mask=m)
    return g


@triton.jit
def _release(key, own, slot_ptr, count_ptr, present_ptr, sync_ptr, result_ptr, PRESENT: tl.constexpr):
    """Give the owned slots back; the program that finishes last reports the bad-index count in
    ``result[0]``, clears ``sync`` and returns True."""
    tl.store(slot_ptr + key, tl.full(key.shape, _EMPTY, tl.int32), mask=own)
    tl.store(count_ptr + key, tl.zeros(key.shape, tl.int32), mask=own)
    if PRESENT:
        tl.store(present_ptr + key, tl.zeros(key.shape, tl.int32), mask=own)
    last = tl.atomic_add(sync_ptr + 1, 1) == tl.num_programs(0) - 1
    tl.store(result_ptr, tl.load(sync_ptr), mask=last)
    tl.store(sync_ptr, 0, mask=last)
    tl.store(sync_ptr + 1, 0, mask=last)
    return last


@triton.jit
def _slot_adam_kernel(param_ptr, exp_avg_ptr, exp_avg_sq_ptr, values_ptr, acc_ptr, keys_ptr, slot_ptr, count_ptr,
                      sync_ptr, result_ptr, nnz, width, step_size_hi, step_size_lo, step_size_ptr, omb1_hi,
                      omb1_lo, omb2_hi, omb2_lo, eps_hi, eps_lo, MAXIMIZE: tl.constexpr,
                      STEP_SIZE_ON_DEVICE: tl.constexpr, BLOCK_S: tl.constexpr,
                      BLOCK_D: tl.constexpr, ACC: tl.constexpr):
    pos, key, own, dup = _owners(keys_ptr, slot_ptr, count_ptr, nnz, BLOCK_S)
    write = own & (tl.load(sync_ptr + pos * 0) == 0)  # a bad index anywhere: the step writes nothing
    c0 = 0
    while c0 < width:
        cols = c0 + tl.arange(0, BLOCK_D)
        col_ok = cols < width
        g = _row_sum(values_ptr, acc_ptr, pos, own, dup, cols, col_ok, width, ACC)
        _adam_rows(param_ptr, exp_avg_ptr, exp_avg_sq_ptr, key, write, cols, col_ok, width, g, step_size_hi,
                   step_size_lo, step_size_ptr, omb1_hi, omb1_lo, omb2_hi, omb2_lo, eps_hi, eps_lo, MAXIMIZE,
                   STEP_SIZE_ON_DEVICE, ACC)
        c0 += BLOCK_D
    _release(key, own, slot_ptr, count_ptr, slot_ptr, sync_ptr, result_ptr, False)


@triton.jit
def _slot_adagrad_kernel(param_ptr, sum_ptr, values_ptr, acc_ptr, keys_ptr, slot_ptr, count_ptr, sync_ptr, result_ptr,
                         nnz, width, clr_hi, clr_lo, clr_ptr, eps_hi, eps_lo, MAXIMIZE: tl.constexpr,
                         CLR_ON_DEVICE: tl.constexpr, BLOCK_S: tl.constexpr,
                         BLOCK_D: tl.constexpr, ACC: tl.constexpr):
    pos, key, own, dup = _owners(keys_ptr, slot_ptr, count_ptr, nnz, BLOCK_S)
    write = own & (tl.load(sync_ptr + pos * 0) == 0)
    c0 = 0
    while c0 < width:
        cols = c0 + tl.arange(0, BLOCK_D)
        col_ok = cols < width
        g = _row_sum(values_ptr, acc_ptr, pos, own, dup, cols, col_ok, width, ACC)
        _adagrad_rows(param_ptr, sum_ptr, key, write, cols, col_ok, width, g, clr_hi, clr_lo, clr_ptr, eps_hi,
                      eps_lo, MAXIMIZE, CLR_ON_DEVICE, ACC)
        c0 += BLOCK_D
    _release(key, own, slot_ptr, count_ptr, slot_ptr, sync_ptr, result_ptr, False)


@triton.jit
def _slot_coalesce_kernel(values_ptr, acc_ptr, idx_ptr, keys_ptr, slot_ptr, count_ptr, present_ptr, rank_ptr, sync_ptr,
                          result_ptr, out_idx_ptr, out_ptr, nnz, width, last_row, NDIM: tl.constexpr,
                          BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
                          ACC: tl.constexpr):
    """Each owner writes its row's sum and indices at its row's rank (the inclusive cumsum of
    ``present`` over the table, minus one): the result is sorted by row, as torch's is."""
    pos, key, own, dup = _owners(keys_ptr, slot_ptr, count_ptr, nnz, BLOCK_S)
    rank = tl.load(rank_ptr + key, mask=own, other=1).to(tl.int64) - 1
    for d in tl.static_range(NDIM):
        tl.store(out_idx_ptr + d * nnz + rank, tl.load(idx_ptr + d * nnz + pos, mask=own, other=0), mask=own)
    c0 = 0
    while c0 < width:
        cols = c0 + tl.arange(0, BLOCK_D)
        col_ok = cols < width
        g = _row_sum(values_ptr, acc_ptr, pos, own, dup, cols, col_ok, width, ACC)
        tl.store(out_ptr + rank[:, None] * width + cols[None, :], g.to(out_ptr.dtype.element_ty),
                 mask=own[:, None] & col_ok[None, :])
        c0 += BLOCK_D
    last = _release(key, own, slot_ptr, count_ptr, present_ptr, sync_ptr, result_ptr, True)
    tl.store(result_ptr + 1, tl.load(rank_ptr + last_row).to(tl.int32), mask=last)


# --------------------------------------------------------------------------- host side


def _grid(nnz: int, width: int):
    block_d = _block_cols(width)
    block_s = max(16, min(128, 4096 // block_d))
    if INTERPRETED:  # the interpreter pays per program and per trip: big tiles, no columns past the width
        block_d = min(block_d, triton.next_power_of_2(max(width, 1)))
        block_s = max(block_s, min(256, triton.next_power_of_2(max(nnz, 1))))
    return (triton.cdiv(nnz, block_s),), dict(BLOCK_S=block_s, BLOCK_D=block_d)


_ACCUMULATORS: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}


def accumulator(device: torch.device, dtype: torch.dtype, elements: int) -> torch.Tensor:
    """A zeroed accumulation buffer of at least ``elements`` (kept zero between steps: an owner
    zeroes the rows it read; made on first need, never freed)."""
    kept = _ACCUMULATORS.setdefault((device, dtype), [])
    for buffer in kept:
        if buffer.numel() >= elements:
            return buffer
    made = torch.zeros(max(elements, 1 << 16), dtype=dtype, device=device)
    kept.append(made)
    kept.sort(key=torch.Tensor.numel)
    return made


@contextlib.contextmanager
def _emptied_on_error(t: Tables, acc: torch.Tensor):
    """Launches that may leave claimed slots behind (an exception in the interpreter, a
    KeyboardInterrupt): if one raises, empty the tables and the accumulator again, so that the
    next step does not find stale owners."""
    try:
        yield
    except BaseException:
        t.reset()
        acc.zero_()
        raise


def claim(indices: torch.Tensor, values: torch.Tensor, sparse_size: list[int], width: int, present: bool = False):
    """Launch the claim kernel; (the step's tables, accumulator, keys, result, grid, meta) where
    ``result`` (int32, 2 entries) receives the bad-index count (and, for coalesce, the rows)."""
    sparse_dim, nnz = indices.shape
    total = _total(sparse_size)
    t = tables(indices.device, total)
    acc_dtype = torch.float64 if values.dtype == torch.float64 else torch.float32
    acc = accumulator(indices.device, acc_dtype, nnz * width)
    keys = torch.empty(nnz, dtype=torch.int32, device=indices.device)
    result = torch.empty(2, dtype=torch.int32, device=indices.device)
    sizes = list(sparse_size) + [1] * (MAX_KERNEL_SPARSE_DIMS - sparse_dim)
    grid, meta = _grid(nnz, width)
    with _emptied_on_error(t, acc):
        _claim_kernel[grid](
            indices, values, keys, t.slot, t.count, t.with_present() if present else t.count, acc, t.sync, nnz,
            width, *sizes, t.rows, NDIM=sparse_dim, PRESENT=present, ACC=_acc_dtype(values.dtype), **meta)
    return t, acc, keys, result, grid, meta


def sparse_adam_step_(param, exp_avg, exp_avg_sq, indices, values, width, step_size, beta1, beta2, eps,
                      maximize, step_size_tensor, sparse_size) -> torch.Tensor:
    """The SparseAdam step on the slot path; returns the step's result (bad-index count first)."""
    t, acc, keys, result, grid, meta = claim(indices, values, sparse_size, width)
    on_device = step_size_tensor is not None
    with _emptied_on_error(t, acc):
        _slot_adam_kernel[grid](
            param, exp_avg, exp_avg_sq, values, acc, keys, t.slot, t.count, t.sync, result, indices.shape[1], width,
            *split_scalar(0.0 if on_device else float(step_size)), step_size_tensor if on_device else param,
            *split_scalar(1.0 - beta1), *split_scalar(1.0 - beta2), *split_scalar(eps),
            MAXIMIZE=bool(maximize), STEP_SIZE_ON_DEVICE=on_device, ACC=_acc_dtype(param.dtype), **meta)
    return result


def adagrad_step_(param, state_sum, indices, values, width, clr, eps, maximize, clr_tensor,
                  sparse_size) -> torch.Tensor:
    """The sparse Adagrad step on the slot path; returns the step's result (bad-index count first)."""
    t, acc, keys, result, grid, meta = claim(indices, values, sparse_size, width)
    on_device = clr_tensor is not None
    with _emptied_on_error(t, acc):
        _slot_adagrad_kernel[grid](
            param, state_sum, values, acc, keys, t.slot, t.count, t.sync, result, indices.shape[1], width,
            *split_scalar(0.0 if on_device else float(clr)), clr_tensor if on_device else param,
            *split_scalar(eps), MAXIMIZE=bool(maximize), CLR_ON_DEVICE=on_device,
            ACC=_acc_dtype(param.dtype), **meta)
    return result


def coalesce(indices: torch.Tensor, values: torch.Tensor, sparse_size: list[int], width: int):
    """(out_indices, out_values, result) on the slot path: the outputs have room for nnz rows;
    ``result`` holds (bad-index count, number of rows) once the kernels have run."""
    sparse_dim, nnz = indices.shape
    t, acc, keys, result, grid, meta = claim(indices, values, sparse_size, width, present=True)
    with _emptied_on_error(t, acc):
        ranks = torch.cumsum(t.present[: _total(sparse_size)], 0)
        out_indices = torch.empty_like(indices)
        out_values = values.new_empty((nnz, *values.shape[1:]))
        _slot_coalesce_kernel[grid](
            values, acc, indices, keys, t.slot, t.count, t.present, ranks, t.sync, result, out_indices, out_values,
            nnz, width, ranks.shape[0] - 1, NDIM=sparse_dim, ACC=_acc_dtype(values.dtype), **meta)
    return out_indices, out_values, result


def _total(sparse_size: list[int]) -> int:
    total = 1
    for s in sparse_size:
        total *= s
    return total
