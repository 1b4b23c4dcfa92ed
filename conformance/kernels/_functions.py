"""Public functional entry points: ``coalesce`` and ``masked_mean``."""

from __future__ import annotations

import torch

from ._ops import coalesce_parts, masked_mean_op, resolve_impl
from ._validate import check_masked_pair, check_same_device, check_sparse_coo

_TRITON_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def coalesce(t: torch.Tensor, *, impl: str | None = None) -> torch.Tensor:
    """Coalesced copy of a sparse COO tensor (duplicates summed, indices sorted).

    Half-precision duplicates are summed in float32 (torch sums them in the
    tensor's dtype). All dtypes are supported by the C++ kernel, floating dtypes
    by the Triton kernel. Out-of-range indices raise ValueError.
    """
    check_sparse_coo(t, "coalesce input")
    indices, values = t._indices(), t._values()
    check_same_device(("indices", indices), ("values", values))
    chosen = resolve_impl(impl)
    if t.device.type != "cpu" or chosen == "triton":
        if values.dtype not in _TRITON_DTYPES:
            raise TypeError(f"the Triton coalesce kernel supports floating dtypes, got {values.dtype}")
    out_indices, out_values = coalesce_parts(indices, values, list(t.shape), chosen)
    return torch.sparse_coo_tensor(
        out_indices, out_values, t.shape, is_coalesced=True, check_invariants=False
    )


def masked_mean(values: torch.Tensor, mask: torch.Tensor, *, impl: str | None = None) -> torch.Tensor:
    """Mean of ``values`` where the bool ``mask`` is true, as a 0-d tensor of values' dtype.

    Differentiable with respect to ``values``: the gradient is ``grad / count``
    where mask is true and zero elsewhere. Entries outside the mask (NaN/inf
    included) influence neither the value nor the gradient. An all-false mask
    gives NaN and an all-zero gradient. Sums accumulate in float64 in the C++
    kernel and in float32 (float64 for float64 input) in the Triton kernel.
    """
    check_masked_pair(values, mask)
    mean, _count = masked_mean_op(values, mask, resolve_impl(impl))
    return mean
