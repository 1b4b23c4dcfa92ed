"""Masked means written with ``torch.masked.MaskedTensor``, the idiom torch's MaskedTensor tutorial
teaches (issue 43, item 2). Autograd hands ``values.grad`` back as a MaskedTensor, and MaskedTensor
refuses bfloat16 with a TypeError of its own; the suite reads both at their specified entries and
judges the numbers (tests/test_masked_tensor_candidates.py, docs/candidates.md).

``masked_tensor_mean`` is right; ``masked_tensor_numel_mean`` divides by the number of entries,
not the number of valid ones, and must fail with "numel instead of count" named.
"""

from __future__ import annotations

import torch
from torch.masked import as_masked_tensor


def masked_tensor_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The tutorial's masked mean: right, as a plain tensor (``get_data()``); its gradient arrives as a
    MaskedTensor."""
    return as_masked_tensor(values, mask).mean().get_data()


def masked_tensor_mean_unwrapped(values: torch.Tensor, mask: torch.Tensor):
    """The same mean, returned as the 0-d MaskedTensor itself (no ``get_data()``)."""
    return as_masked_tensor(values, mask).mean()


def masked_tensor_numel_mean(values: torch.Tensor, mask: torch.Tensor):
    """WRONG: the masked sum divided by ``values.numel()``, the number of entries, where the mean divides
    by the number of valid ones (a 0-d MaskedTensor: the sum over no valid entry is masked out, so the
    undefined mean is still read as undefined)."""
    return as_masked_tensor(values, mask).sum() / values.numel()
