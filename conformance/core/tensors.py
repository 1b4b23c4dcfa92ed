"""Decode the tensor notation of spec files into NumPy arrays, and move them into torch.

A tensor in a spec is a nested list of numbers (YAML ``.nan``/``.inf`` allowed),
``{fill: x, shape: [...]}`` or ``{arange: n, shape: [...]}``.  A sparse COO tensor is
``{indices: ..., values: ..., size: [...]}``; a dense tensor given where a sparse one is
expected is written ``{dense: ...}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np
import numpy.typing as npt
import torch
from torch.masked import MaskedTensor

from conformance.core.dtypes import info, torch_dtype  # noqa: F401 - torch_dtype re-exported


def decode_array(node: Any, dtype=np.float64) -> np.ndarray:
    """A NumPy array from the spec notation for a tensor."""
    if isinstance(node, dict):
        shape = tuple(node.get("shape", ()))
        if "fill" in node:
            return np.full(shape, node["fill"], dtype=dtype)
        if "arange" in node:
            flat = np.arange(node["arange"], dtype=dtype)
            return flat.reshape(shape) if shape else flat
        raise ValueError(f"tensor mapping needs 'fill' or 'arange', got keys {sorted(node)}")
    array = np.array(node, dtype=dtype)
    if array.dtype == object:
        raise ValueError("ragged nested list: every row must have the same length")
    return array


def quantize(array: npt.ArrayLike, dtype: str | torch.dtype) -> np.ndarray:
    """Round float64 values to ``dtype`` (a name or a torch dtype) and back, so the reference sees
    what a backend sees."""
    array = np.asarray(array, dtype=np.float64)
    # np.ascontiguousarray would turn a 0-d array into shape (1,); reshape keeps 0-d inputs 0-d
    return torch.tensor(array).to(info(dtype).torch).double().numpy().reshape(array.shape)  # (a copy: read-only arrays too)


@dataclass
class CooArray:
    """A sparse COO tensor on the NumPy side: indices (sparse_dim, nnz), values (nnz, *dense)."""

    indices: np.ndarray
    values: np.ndarray
    size: tuple[int, ...]

    @classmethod
    def decode(cls, node: dict) -> "CooArray":
        size = tuple(int(s) for s in node["size"])
        indices = decode_array(node["indices"], dtype=np.int64)
        values = decode_array(node["values"])
        if indices.ndim == 1 and indices.size == 0:
            # `indices: []` holds no number: its shape (sparse_dim, nnz) is the one size and values
            # imply (sparse_dim = len(size) - dense dims, nnz = len(values)), so that a sparse scalar
            # (sparse_dim 0, nnz > 0) is written as plainly as an empty gradient (nnz 0)
            sparse_dim = len(size) - max(values.ndim - 1, 0)
            nnz = values.shape[0] if values.ndim else 0
            if sparse_dim < 0 or (sparse_dim and nnz):
                raise ValueError(f"indices is empty, but size {list(size)} and values of shape "
                                 f"{list(values.shape)} imply {sparse_dim} sparse dims and {nnz} entries; "
                                 "write indices as (sparse_dim, nnz) nested lists")
            indices = indices.reshape(sparse_dim, nnz)
        if indices.ndim != 2:
            raise ValueError(f"indices must be 2-D (sparse_dim, nnz), got shape {indices.shape}")
        sparse_dim, nnz = indices.shape
        if values.shape[:1] != (nnz,):
            raise ValueError(f"values has leading size {values.shape[:1]} but indices have nnz={nnz}")
        if sparse_dim + values.ndim - 1 != len(size):
            raise ValueError(
                f"size {list(size)} has {len(size)} dims but indices give {sparse_dim} sparse dims "
                f"and values {values.ndim - 1} dense dims"
            )
        if tuple(values.shape[1:]) != size[sparse_dim:]:
            raise ValueError(f"dense dims of values {values.shape[1:]} differ from size {size[sparse_dim:]}")
        for dim in range(sparse_dim):
            row = indices[dim]
            if row.size and (row.min() < 0 or row.max() >= size[dim]):
                raise ValueError(f"indices of dim {dim} must lie in [0, {size[dim]}), got {row.tolist()}")
        return cls(indices, values, size)

    @property
    def sparse_dim(self) -> int:
        return self.indices.shape[0]

    @property
    def sparse_shape(self) -> tuple[int, ...]:
        return self.size[: self.sparse_dim]

    def quantized(self, dtype: str | torch.dtype) -> "CooArray":
        return CooArray(self.indices, quantize(self.values, dtype), self.size)

    def to_torch(self, dtype: torch.dtype, device: str | torch.device = "cpu", place=None,
                 role: str = "") -> torch.Tensor:
        """An uncoalesced torch sparse COO tensor, duplicates and order as written. ``place(role,
        tensor)`` (a RunContext's): its indices and values in the layouts the example gives
        ``<role>indices`` and ``<role>values`` (torch keeps a non-contiguous indices or values tensor as given)."""
        indices = torch.from_numpy(self.indices.copy()).to(device)
        values = torch.from_numpy(self.values.copy()).to(dtype).to(device)
        if place is not None:
            indices, values = place(f"{role}indices", indices), place(f"{role}values", values)
        return torch.sparse_coo_tensor(indices, values, self.size, device=device, check_invariants=True)

    def specified_mask(self) -> np.ndarray:
        """Boolean mask over the sparse dims: True where any entry is specified."""
        mask = np.zeros(self.sparse_shape, dtype=bool)
        mask[tuple(self.indices)] = True
        return mask


def to_torch(array: np.ndarray, dtype: torch.dtype | None, device: str | torch.device = "cpu") -> torch.Tensor:
    """A strided torch tensor from a NumPy array (dtype None keeps the array's own dtype)."""
    array = np.asarray(array)
    tensor = torch.from_numpy(np.ascontiguousarray(array).copy()).reshape(array.shape)  # 0-d stays 0-d
    if dtype is not None:
        tensor = tensor.to(dtype)
    return tensor.to(device)


def to_numpy(value: Any) -> np.ndarray:
    """A float64 (or bool/int) NumPy array from a torch tensor, a number or an array."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.is_floating_point():
            value = value.double()
        return value.numpy()
    return np.asarray(value)


def rounder(dtype: str):
    """x -> x rounded to ``dtype`` (round to nearest even), as float64 arrays of x's shape."""
    torch_type = torch_dtype(dtype)

    def q(x):
        x = np.asarray(x, dtype=np.float64)
        return quantize(x, torch_type).reshape(x.shape)  # quantize makes 0-d arrays 1-d

    return q


def random_coo(rng: np.random.Generator, size: tuple[int, ...], sparse_dims: int, density: float,
               dtype: str | torch.dtype) -> CooArray:
    """A benchmark's COO tensor: indices drawn with replacement (so duplicates occur, as in
    embedding-bag gradients), standard normal values in ``dtype``."""
    sparse_shape = size[:sparse_dims]
    positions = math.prod(sparse_shape)
    nnz = max(1, int(round(density * positions)))
    indices = np.stack([rng.integers(0, n, nnz) for n in sparse_shape]).astype(np.int64)
    values = rng.standard_normal((nnz, *size[sparse_dims:]))
    return CooArray(indices, values, tuple(size)).quantized(dtype)


# the inputs schemas' references to the two encodings below (the spec schema's $defs)
TENSOR = {"$ref": "#/$defs/tensor"}
COO = {"$ref": "#/$defs/coo"}


def encode_array(array) -> Any:
    """Spec notation for an array: nested lists, or ``{fill, shape}`` for an empty multi-dim one."""
    array = np.asarray(array)
    if array.size == 0 and array.ndim > 1:
        fill = False if array.dtype == bool else 0.0
        return {"fill": fill, "shape": list(array.shape)}
    if array.dtype == bool:
        return array.tolist()
    if np.issubdtype(array.dtype, np.integer):
        return array.astype(np.int64).tolist()
    return array.astype(np.float64).tolist()


def encode_coo(coo: CooArray) -> dict:
    """Spec notation for a COO tensor: ``{indices, values, size}``."""
    return {"indices": coo.indices.astype(np.int64).tolist(), "values": encode_array(coo.values),
            "size": [int(s) for s in coo.size]}


# ---------------------------------------------------------------- what a candidate returned

def kind_of(value: Any) -> str:
    """What ``value`` is, for a contract message: ``MaskedTensor``, ``float``, ``a sparse_coo Tensor``..."""
    if isinstance(value, torch.Tensor) and type(value) is torch.Tensor or isinstance(value, torch.nn.Parameter):
        return f"a {str(value.layout).replace('torch.', '')} Tensor"
    return type(value).__name__


def not_plain_tensor(value: Any, layout: torch.layout = torch.strided) -> str | None:
    """Why ``value`` is not a plain ``torch.Tensor`` of ``layout`` ("got MaskedTensor"), or None. A
    MaskedTensor is a tensor subclass with semantics of its own: its data, mask and layout are not
    what its ``layout`` says, and NumPy cannot read it."""
    if not isinstance(value, torch.Tensor) or is_masked_tensor(value):
        return f"got {kind_of(value)}"
    if value.layout != layout:
        return f"got {kind_of(value)}"
    return None


def is_masked_tensor(value: Any) -> TypeGuard[MaskedTensor]:
    return isinstance(value, MaskedTensor)


def specified_data(value: MaskedTensor, fill: float) -> torch.Tensor:
    """A MaskedTensor read as a plain strided tensor (detached): its data at its specified (masked-in)
    entries, ``fill`` at the others -- what the data holds there is no value (a MaskedTensor gradient's
    data is 1/count at masked-out entries too)."""
    data, mask = value.get_data().detach(), value.get_mask().detach()
    if data.layout != torch.strided:
        data, mask = data.to_dense(), mask.to_dense()
    return torch.where(mask, data, torch.full((), fill, dtype=data.dtype, device=data.device))


def masked_tensor_refusal(exc: BaseException) -> str | None:
    """Why MaskedTensor itself could not run what it was given, or None for any other exception: its
    refusal of a dtype or layout (a TypeError raised in ``torch.masked``'s code: ``torch.bfloat16 is not
    supported in MaskedTensor.``), or an aten op its ``__torch_dispatch__`` has no working implementation
    of for these tensors (torch 2.13's ``new_empty_strided`` in the backward of a mean over an empty (0, 1)
    tensor raises ``args[2] expected to be the same as data.stride()``). A candidate's own misuse (a mask
    that is not bool: ``mask must have dtype bool.``) is neither."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    in_masked = [f for f in frames if f.f_globals.get("__name__", "").startswith("torch.masked")]
    if isinstance(exc, TypeError) and "not supported" in str(exc) and frames and frames[-1] in in_masked:
        return f"MaskedTensor refuses it: {exc}"
    dispatch = [f for f in in_masked if f.f_code.co_name == "__torch_dispatch__"]
    if dispatch:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return (f"MaskedTensor cannot run this input: its {dispatch[-1].f_locals.get('func', 'dispatch')} raised "
                f"{type(exc).__name__}{': ' + text if text else ''}")
    return None
