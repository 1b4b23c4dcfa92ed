"""scipy.sparse as a ``coalesce`` candidate: ``coo_array.sum_duplicates()``.

    --conformance-impl coalesce=examples.candidates.scipy_sparse:coalesce

scipy.sparse holds float32/float64 and complex64/complex128 (not float16 or bfloat16), has no hybrid (dense trailing
dimensions) COO arrays and needs at least one sparse dimension: those inputs raise Unsupported.
"""

from __future__ import annotations

import numpy as np
import scipy
import scipy.sparse
import torch

from conformance import Unsupported
from examples.candidates._convert import from_numpy, to_numpy

SUPPORTED = {torch.float32, torch.float64, torch.complex64, torch.complex128}


def coalesce(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype not in SUPPORTED:
        raise Unsupported(f"scipy.sparse {scipy.__version__} has no {tensor.dtype} arrays")
    if tensor.dense_dim() != 0:
        raise Unsupported("scipy.sparse has no hybrid COO arrays (values with dense dimensions)")
    if tensor.sparse_dim() == 0:
        raise Unsupported("scipy.sparse has no 0-d COO arrays")
    indices = to_numpy(tensor._indices())
    values = to_numpy(tensor._values())
    array = scipy.sparse.coo_array((values, tuple(indices)), shape=tuple(tensor.shape))
    array.sum_duplicates()  # in place; sorts the coordinates row-major and sums duplicates
    coords = np.stack([np.asarray(c, dtype=np.int64) for c in array.coords]) if array.coords else \
        np.zeros((0, array.nnz), dtype=np.int64)
    return torch.sparse_coo_tensor(from_numpy(coords, torch.int64), from_numpy(array.data, tensor.dtype),
                                   tuple(tensor.shape), is_coalesced=bool(array.has_canonical_format),
                                   device=tensor.device)
