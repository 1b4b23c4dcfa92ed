"""Coalesce in NumPy, shared by the coalesce record (:mod:`conformance.ops.coalesce`), the sparse
optimizers' records and their low-precision models: the float64 reference, stock torch's
half-precision coalesce modelled (its sort order, duplicates summed one rounding at a time), a
value stored by truncation (round toward zero), and the known mistakes of implementing coalesce, each by what
it computes (``MISTAKES``: what a failing output "looks like")."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from conformance.core.tensors import CooArray, rounder
from conformance.core.types import Mistake


def coalesce_reference(coo: CooArray) -> dict[str, Any]:  # arrays, and nnz a NumPy scalar
    """Sort unique index tuples lexicographically and sum values of duplicates in float64."""
    sparse_dim, nnz = coo.indices.shape
    dense_shape = coo.values.shape[1:]
    if nnz == 0:
        return {"indices": coo.indices.copy(), "values": coo.values.copy(), "nnz": np.int64(0),
                "size": np.array(coo.size, dtype=np.int64)}
    unique, inverse = np.unique(coo.indices.T, axis=0, return_inverse=True)
    values = np.zeros((len(unique), *dense_shape), dtype=np.float64)
    np.add.at(values, inverse.reshape(-1), coo.values)
    return {"indices": unique.T.copy(), "values": values, "nnz": np.int64(len(unique)),
            "size": np.array(coo.size, dtype=np.int64)}


def round_toward_zero(exact: np.ndarray, dtype: str) -> np.ndarray | None:
    """``exact`` (float64) stored in ``dtype`` by truncation instead of round-to-nearest-even."""
    bits = {"float16": torch.int16, "bfloat16": torch.int16, "float32": torch.int32}.get(dtype)
    if bits is None:
        return None
    exact = np.asarray(exact, dtype=np.float64)
    nearest = torch.from_numpy(exact.copy()).to(getattr(torch, dtype))
    over = torch.from_numpy(np.abs(nearest.double().numpy()) > np.abs(exact))
    stepped = torch.where(over, nearest.view(bits) - 1, nearest.view(bits)).view(nearest.dtype)
    return stepped.double().numpy().reshape(exact.shape)


# ---- stock torch's half-precision coalesce, modelled (conformance/cases/lowprec.py uses it)


def coalesce_sequential(coo: CooArray, accumulate: str, round_to: str | None = None,
                        order: np.ndarray | None = None) -> CooArray:
    """Coalesce as torch's CPU kernel does: the indices flattened to one linear index and sorted
    with ``torch.sort`` (not stable: from 17 entries on, duplicates leave the sort in another order
    than the input's), duplicates added one after another in that order, each partial sum rounded
    to ``accumulate``; the sums are then rounded to ``round_to`` (default: ``accumulate``). ``order``:
    the entries visited in another order (a permutation of the input's positions)."""
    acc, final = rounder(accumulate), rounder(round_to or accumulate)
    sparse_dim, nnz = coo.indices.shape
    if nnz == 0:
        return CooArray(coo.indices.copy(), coo.values.copy(), coo.size)
    if order is None:
        order = torch_coalesce_order(coo) if sparse_dim else np.arange(nnz)
    order = np.asarray(order)[np.argsort(_linear_index(coo)[order], kind="stable")]  # each index's run together
    indices = coo.indices[:, order]
    values = coo.values[order]
    unique: list[np.ndarray] = []
    sums: list[np.ndarray] = []
    for position in range(nnz):
        if unique and np.array_equal(unique[-1], indices[:, position]):
            sums[-1] = acc(sums[-1] + values[position])
        else:
            unique.append(indices[:, position])
            sums.append(acc(values[position]))
    return CooArray(np.stack(unique, axis=1), final(np.stack(sums)), coo.size)


def _linear_index(coo: CooArray) -> np.ndarray:
    if not coo.indices.shape[1] or not coo.indices.shape[0]:
        return np.zeros(coo.indices.shape[1], dtype=np.int64)
    return np.asarray(np.ravel_multi_index(tuple(coo.indices), coo.sparse_shape), dtype=np.int64)


def torch_coalesce_order(coo: CooArray) -> np.ndarray:
    """The permutation torch's coalesce visits the entries in: its unstable sort of the linear index."""
    return torch.sort(torch.from_numpy(_linear_index(coo)), stable=False).indices.numpy()


def half_accumulation_orders(coo: CooArray) -> dict[str, np.ndarray]:
    """The orders a sequential sum of duplicates is commonly written in: torch's own (its unstable
    sort), the input's (``index_add_``, ``scatter_add_``, ``torch.unique`` + ``index_add_``), and
    the input's reversed."""
    nnz = coo.indices.shape[1]
    return {"torch's sort order": torch_coalesce_order(coo), "input order": np.arange(nnz),
            "reversed input order": np.arange(nnz)[::-1]}


def accumulation_differs(coo: CooArray, dtype: str) -> bool:
    """Whether summing the duplicates in ``dtype`` (as torch does) differs from rounding the exact sums."""
    in_dtype = coalesce_sequential(coo, dtype).values
    rounded_once = coalesce_sequential(coo, "float64", round_to=dtype).values
    return not np.array_equal(in_dtype, rounded_once)


# ---------------------------------------------------------------- known mistakes (conformance.core.diagnosis)


def _outputs(indices: np.ndarray, values: np.ndarray, coo: CooArray) -> dict[str, Any]:  # (nnz: a NumPy scalar)
    return {"indices": indices, "values": values, "nnz": np.int64(indices.shape[1]),
            "size": np.array(coo.size, dtype=np.int64)}


def dropping_zeros_model(coo: CooArray):
    result = coalesce_reference(coo)
    values = result["values"]
    keep = (values != 0).reshape(len(values), -1).any(axis=1) if values.size else np.ones(len(values), dtype=bool)
    if keep.all():
        return None
    return _outputs(result["indices"][:, keep], values[keep], coo)


def last_write_wins_model(coo: CooArray):
    if coo.indices.shape[1] < 2:
        return None
    last: dict[tuple, int] = {}
    for position in range(coo.indices.shape[1]):
        last[tuple(coo.indices[:, position].tolist())] = position
    if len(last) == coo.indices.shape[1]:
        return None  # no duplicates: nothing to tell
    chosen = [last[key] for key in sorted(last)]
    return _outputs(coo.indices[:, chosen], coo.values[chosen].astype(np.float64), coo)


def column_major_model(coo: CooArray):
    result = coalesce_reference(coo)
    indices = result["indices"]
    if indices.shape[0] < 2 or indices.shape[1] < 2:
        return None
    order = sorted(range(indices.shape[1]), key=lambda i: tuple(reversed(indices[:, i].tolist())))
    return _outputs(indices[:, order], result["values"][order], coo)


def truncating_model(coo: CooArray, dtype: str):
    result = coalesce_reference(coo)
    values = round_toward_zero(result["values"], dtype)
    if values is None:
        return None
    return _outputs(result["indices"], values, coo)


def half_sum_model(coo: CooArray, dtype: str):
    """The duplicates added one after another in the dtype, in input order (``index_add_``)."""
    if dtype not in ("float16", "bfloat16") or not coo.indices.shape[1]:
        return None
    result = coalesce_sequential(coo, dtype, order=np.arange(coo.indices.shape[1]))
    return _outputs(result.indices, result.values, coo)


def with_a_sparse_dim(coo: CooArray) -> CooArray | None:
    """The same entries with one sparse dim of size 1 in front (what a raise on sparse_dim == 0 is told
    apart from raising on everything by)."""
    if coo.indices.shape[0] != 0:
        return None
    return CooArray(np.zeros((1, coo.indices.shape[1]), dtype=np.int64), coo.values, (1, *coo.size))


MISTAKES = (
    Mistake("dropping explicit zeros", "entries whose duplicates sum to zero (or were written as zero) are removed; "
            "coalesce keeps them", dropping_zeros_model),
    Mistake("last-write-wins duplicates", "the last value written at an index is kept (index_put_ without "
            "accumulate) instead of the sum of the duplicates", last_write_wins_model),
    Mistake("column-major order", "entries are ordered by the last sparse dim first; coalesce orders indices "
            "lexicographically (row-major)", column_major_model),
    Mistake("truncating stores", "the sums are stored in the dtype by truncation (round toward zero), not rounded "
            "to nearest even", truncating_model, tight=True),
    Mistake("half-precision accumulation", "the duplicates are summed in float16/bfloat16, one rounding per "
            "addition (as stock torch does, pytorch#84471), where a float32 accumulator rounds once", half_sum_model,
            tight=True),
    Mistake("rejects a tensor without sparse dims", "raises on sparse_dim == 0 (a sparse scalar or an all-dense "
            "hybrid), which coalesce accepts", raises=lambda coo, error: coo.indices.shape[0] == 0,
            control=with_a_sparse_dim),
)
