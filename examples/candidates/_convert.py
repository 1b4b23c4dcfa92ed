"""Tensor <-> NumPy conversions shared by the adapters (bfloat16 through ml_dtypes, which JAX and
TensorFlow both understand). Layout only: no arithmetic on values happens here."""

from __future__ import annotations

import numpy as np
import torch


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A CPU copy as NumPy; bfloat16 becomes ``ml_dtypes.bfloat16`` bit for bit."""
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return tensor.numpy().copy()


def from_numpy(array, dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
    """NumPy (or anything np.asarray takes: jax/tf arrays) -> torch; the dtype must already match."""
    array = np.asarray(array)
    if dtype == torch.bfloat16:
        import ml_dtypes

        if array.dtype != ml_dtypes.bfloat16:
            raise TypeError(f"expected a bfloat16 array, got {array.dtype}")
        return torch.from_numpy(array.copy(order="C").view(np.int16)).view(torch.bfloat16).to(device)
    result = torch.from_numpy(array.copy(order="C"))  # (np.ascontiguousarray would make 0-d 1-d)
    if result.dtype != dtype:
        raise TypeError(f"the library returned {result.dtype}, expected {dtype}")
    return result.to(device)


def linear_rows(indices: np.ndarray, sparse_sizes: tuple[int, ...]) -> np.ndarray:
    """COO index tuples (sparse_dim, nnz) -> row numbers of the tensor reshaped to
    (prod(sparse_sizes), *dense_sizes): the layout of a library that takes 1-D row indices."""
    if len(sparse_sizes) == 0:
        return np.zeros(indices.shape[1], dtype=np.int64)
    return np.ravel_multi_index(tuple(indices), sparse_sizes).astype(np.int64) if indices.shape[1] else \
        np.zeros(0, dtype=np.int64)
