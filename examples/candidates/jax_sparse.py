"""JAX as a ``coalesce`` candidate: ``jax.experimental.sparse.BCOO.sum_duplicates``.

    --conformance-impl coalesce=examples.candidates.jax_sparse:coalesce

BCOO has batch, sparse and dense dimensions, so hybrid tensors map onto ``n_dense``; every dtype of
the suite exists in JAX (float64 with ``jax_enable_x64``, which importing this module turns on).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax.experimental import sparse as jsparse

from conformance import Unsupported
from examples.candidates._convert import from_numpy, to_numpy

jax.config.update("jax_enable_x64", True)


def coalesce(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.sparse_dim() == 0:
        raise Unsupported("jax.experimental.sparse.BCOO cannot be built with no sparse dimension here")
    indices = to_numpy(tensor._indices()).T  # BCOO: (nse, n_sparse)
    values = to_numpy(tensor._values())
    matrix = jsparse.BCOO((jnp.asarray(values), jnp.asarray(indices)), shape=tuple(tensor.shape))
    # remove_zeros=False: the contract keeps explicit zeros (torch's coalesce does)
    result = matrix.sum_duplicates(remove_zeros=False)
    coalesced = bool(result.indices_sorted and result.unique_indices)
    return torch.sparse_coo_tensor(from_numpy(np.asarray(result.indices, dtype=np.int64).T, torch.int64),
                                   from_numpy(result.data, tensor.dtype), tuple(tensor.shape),
                                   is_coalesced=coalesced, device=tensor.device)
