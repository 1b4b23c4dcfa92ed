"""Transparent huge pages for optimizer state and parameters (Linux, CPU tensors >= 4 MiB).

A sparse step touches random rows of the parameter and of every state tensor;
with 4 KiB pages nearly each row costs a TLB miss (on the 1M x 64 float32
benchmark the step is ~1.4-1.7x slower with the parameter on 4 KiB pages).

* State tensors allocated here are ``madvise(MADV_HUGEPAGE)``-d before first
  touch, so they fault in as huge pages at no extra cost.
* Parameters handed to the optimizers already exist, so by default they are
  advised *and* collapsed in place, synchronously, at optimizer construction
  (``MADV_COLLAPSE``, Linux >= 6.1): same addresses, contents unchanged, a
  one-time ~0.3-3 ms per MiB (80-830 ms per 256 MiB on the loaded 2-core test
  machine, the first collapse being the slowest because it has to compact
  memory). ``last_collapse_seconds`` holds the time of the latest collapse.

``CONFORMANCE_KERNEL_HUGEPAGES``: unset/``1``/``collapse`` as above;
``advise`` only advises parameters (khugepaged collapses them in the
background, at its own slow pace); ``0``/``off`` turns all of it off.
Everything is best effort: where madvise is missing or refused (non-Linux,
kernels before 6.1, no free huge pages, file-backed or shared mappings that
cannot be collapsed) the tensors simply stay on small pages.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import time

import torch

HUGE_PAGE_BYTES = 2 << 20
MIN_BYTES = 4 << 20
_MADV_HUGEPAGE = 14
_MADV_COLLAPSE = 25

#: Seconds spent in the latest synchronous MADV_COLLAPSE (None before the first).
last_collapse_seconds: float | None = None


def _mode() -> str:
    return os.environ.get("CONFORMANCE_KERNEL_HUGEPAGES", "1").strip().lower()


def _enabled() -> bool:
    return _mode() not in ("0", "off", "false", "no")


@functools.lru_cache(maxsize=1)
def _madvise():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


def state_like(param: torch.Tensor, fill_value) -> torch.Tensor:
    """``torch.full_like(param, fill_value)``, backed by huge pages where that helps."""
    nbytes = param.numel() * param.element_size()
    madvise = _madvise()
    if (
        not _enabled()
        or madvise is None
        or param.device.type != "cpu"
        or not param.is_contiguous()
        or nbytes < MIN_BYTES
    ):
        return torch.full_like(param, fill_value, memory_format=torch.preserve_format)
    raw = torch.empty(nbytes + HUGE_PAGE_BYTES, dtype=torch.uint8)
    address = raw.data_ptr()
    start = (address + HUGE_PAGE_BYTES - 1) & ~(HUGE_PAGE_BYTES - 1)
    advised = (nbytes // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES  # stays inside our buffer
    madvise(start, advised, _MADV_HUGEPAGE)  # best effort: failure only costs speed
    offset = start - address
    state = raw[offset : offset + nbytes].view(param.dtype).view(param.shape)
    state.fill_(fill_value)
    return state


def advise_huge_pages(tensor: torch.Tensor) -> bool:
    """Advise huge pages for the 2 MiB-aligned interior of a large CPU tensor's bytes.

    Only whole huge pages inside the tensor's own bytes are advised, so no
    neighbouring allocation is affected. Unless the mode is ``advise``, the
    range is then collapsed synchronously (``MADV_COLLAPSE``). Returns whether
    the kernel accepted the last request.
    """
    madvise = _madvise()
    nbytes = tensor.numel() * tensor.element_size()
    if (
        not _enabled()
        or madvise is None
        or tensor.device.type != "cpu"
        or tensor.layout != torch.strided
        or not tensor.is_contiguous()
        or nbytes < MIN_BYTES
    ):
        return False
    address = tensor.data_ptr()
    start = (address + HUGE_PAGE_BYTES - 1) & ~(HUGE_PAGE_BYTES - 1)
    length = (address + nbytes - start) // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
    if length <= 0:
        return False
    advised = madvise(start, length, _MADV_HUGEPAGE) == 0
    if advised and _mode() != "advise":
        global last_collapse_seconds
        started = time.perf_counter()
        collapsed = madvise(start, length, _MADV_COLLAPSE) == 0
        last_collapse_seconds = time.perf_counter() - started
        return collapsed  # False: refused (old kernel, no huge pages): still advised
    return advised
