"""Transparent huge pages for optimizer state and parameters (Linux, CPU tensors >= 4 MiB).

A sparse step touches random rows of the parameter and of every state tensor;
with 4 KiB pages nearly each row costs a TLB miss. State tensors allocated here
are ``madvise(MADV_HUGEPAGE)``-d before first touch (no extra cost), and
parameters handed to the optimizers are advised too, so the kernel's khugepaged
collapses them in the background. ``CONFORMANCE_KERNEL_HUGEPAGES=collapse``
collapses parameters synchronously instead (``MADV_COLLAPSE``, Linux >= 6.1;
contents unchanged; 0.1-3 s per 256 MiB at optimizer construction on the
2-core test machine). ``CONFORMANCE_KERNEL_HUGEPAGES=0`` turns all of it off.
Everything is best effort: a refused madvise only costs speed.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

import torch

HUGE_PAGE_BYTES = 2 << 20
MIN_BYTES = 4 << 20
_MADV_HUGEPAGE = 14
_MADV_COLLAPSE = 25


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
    neighbouring allocation is affected. Returns whether the kernel accepted it.
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
    if advised and _mode() == "collapse":
        return madvise(start, length, _MADV_COLLAPSE) == 0
    return advised
