"""Candidates that are right on the inputs the suite once drew and wrong on the ones it missed
(issue 23): NaN at a valid entry of a masked mean, and coalesce with ``sparse_dim == 0``. The
default ``conformance check`` must fail each of them (tests/test_coverage.py)."""

from __future__ import annotations

import torch


def skipna_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """pandas' ``Series.where(mask).mean()`` (skipna=True by default): a NaN at a valid entry is
    skipped and not counted, so ``[nan, 1]`` with both valid gives 1.0 where torch gives NaN.
    Right whenever no valid entry is NaN."""
    kept = mask & ~torch.isnan(values)
    return torch.nansum(torch.where(mask, values, torch.nan)) / kept.sum()


def coalesce_without_sparse_scalars(tensor: torch.Tensor) -> torch.Tensor:
    """torch's coalesce, but it refuses a tensor with no sparse dimension (a 0-d sparse scalar, or
    an all-dense hybrid ``sparse_dim=0, dense_dim>0``), as an implementation that indexes
    ``indices[0]`` would. Right on every tensor with ``sparse_dim >= 1``."""
    if tensor.sparse_dim() == 0:
        raise IndexError("coalesce: a tensor without sparse dimensions is not supported")
    return tensor.coalesce()
