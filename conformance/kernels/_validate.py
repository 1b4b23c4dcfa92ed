"""Input checks shared by the C++ and Triton paths; each raises a clear exception.

TypeError for wrong types/dtypes, ValueError for wrong shapes or index values,
RuntimeError for tensors on different devices. Non-contiguous inputs are
accepted (the callers make them contiguous).
"""

from __future__ import annotations

import torch

FLOATING_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_tensor(obj, what: str) -> None:
    if not isinstance(obj, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(obj).__name__}")


def check_same_device(*named: tuple[str, torch.Tensor]) -> None:
    first_name, first = named[0]
    for name, t in named[1:]:
        if t.device != first.device:
            raise RuntimeError(
                f"expected {name} on the same device as {first_name} ({first.device}), "
                f"got {t.device}"
            )


def check_floating(t: torch.Tensor, what: str) -> None:
    if t.dtype not in FLOATING_DTYPES:
        raise TypeError(f"{what} must be float16, bfloat16, float32 or float64, got {t.dtype}")


def check_sparse_coo(t, what: str) -> None:
    check_tensor(t, what)
    if t.layout != torch.sparse_coo:
        raise TypeError(f"{what} must be a sparse COO tensor, got layout {t.layout}")


def check_index_range(indices: torch.Tensor, sparse_size: list[int]) -> None:
    """ValueError naming the first index that is negative or >= its dimension's size.

    Reads device values (on CUDA a sync): the C++ path calls it before any C++ code touches
    memory; the CUDA optimizer steps defer it (see ``_triton``).
    """
    if indices.numel() == 0:
        return
    bad = torch.zeros(indices.shape, dtype=torch.bool, device=indices.device)
    for d, size in enumerate(sparse_size):  # Python-scalar bounds: no host-to-device copy
        bad[d] = (indices[d] < 0) | (indices[d] >= size)
    if bool(bad.any()):
        dim, pos = (int(v) for v in bad.nonzero()[0])
        raise ValueError(
            f"index {int(indices[dim, pos])} at position {pos} of sparse dimension {dim} "
            f"is out of range for size {sparse_size[dim]}"
        )


def check_sparse_grad(param: torch.Tensor, grad: torch.Tensor) -> None:
    """A sparse gradient must match its parameter in shape, dtype and device."""
    check_sparse_coo(grad, "gradient")
    check_floating(param, "param")
    if grad.dtype != param.dtype:
        raise TypeError(f"gradient dtype {grad.dtype} does not match param dtype {param.dtype}")
    if grad.shape != param.shape:
        raise ValueError(
            f"gradient shape {tuple(grad.shape)} does not match param shape {tuple(param.shape)}"
        )
    check_same_device(("param", param), ("gradient", grad))


def check_masked_pair(values, mask) -> None:
    check_tensor(values, "values")
    check_tensor(mask, "mask")
    if values.layout != torch.strided or mask.layout != torch.strided:
        raise TypeError("masked_mean expects strided (dense) values and mask")
    check_floating(values, "values")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor, got {mask.dtype}")
    if mask.shape != values.shape:
        raise ValueError(
            f"mask shape {tuple(mask.shape)} does not match values shape {tuple(values.shape)}"
        )
    check_same_device(("values", values), ("mask", mask))


def check_size(size, what: str) -> None:
    """A shape: a sequence of non-negative ints whose sparse product fits in int64."""
    try:
        # symbolic sizes (torch.compile's fake tensors) are left alone rather than specialized
        dims = [int(s) for s in size if not isinstance(s, torch.SymInt)]
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a sequence of ints, got {size!r}") from None
    if any(s < 0 for s in dims):
        raise ValueError(f"{what} must not be negative, got {tuple(dims)}")


def check_sparse_extent(sparse_size, what: str = "sparse shape") -> None:
    """ValueError when the number of sparse elements does not fit in int64 (keys would overflow)."""
    total = 1
    for s in sparse_size:
        total *= int(s)
    if total > torch.iinfo(torch.int64).max:
        raise ValueError(f"{what} {tuple(sparse_size)} has more elements than fit in int64")


def check_coo_parts(indices, values, size) -> int:
    """Checks raw COO parts against ``size``; returns the number of sparse dims."""
    check_tensor(indices, "indices")
    check_tensor(values, "values")
    if indices.dtype != torch.int64:
        raise TypeError(f"indices must be int64, got {indices.dtype}")
    if indices.dim() != 2:
        raise ValueError(f"indices must be 2-D [sparse_dim, nnz], got shape {tuple(indices.shape)}")
    sparse_dim, nnz = indices.shape
    check_size(size, "size")
    if values.dim() < 1 or values.shape[0] != nnz:
        raise ValueError(f"values must have shape [nnz={nnz}, *dense_shape], got {tuple(values.shape)}")
    if sparse_dim + values.dim() - 1 != len(size) or tuple(values.shape[1:]) != tuple(size[sparse_dim:]):
        raise ValueError(
            f"indices {tuple(indices.shape)} and values {tuple(values.shape)} do not describe "
            f"a sparse tensor of size {tuple(size)}"
        )
    check_same_device(("indices", indices), ("values", values))
    return sparse_dim


def check_sparse_step(param, targets: dict, indices, values) -> None:
    """Inputs of a fused optimizer step: state tensors like param, gradient parts fitting it."""
    check_tensor(param, "param")
    check_floating(param, "param")
    for name, t in {"param": param, **targets}.items():
        check_tensor(t, name)
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous (the optimizers stage non-contiguous ones)")
    for name, t in targets.items():
        if t.shape != param.shape:
            raise ValueError(
                f"{name} shape {tuple(t.shape)} does not match param shape {tuple(param.shape)}"
            )
        if t.dtype != param.dtype:
            raise TypeError(f"{name} dtype {t.dtype} does not match param dtype {param.dtype}")
        check_same_device(("param", param), (name, t))
    check_coo_parts(indices, values, param.shape)
    if values.dtype != param.dtype:
        raise TypeError(f"gradient dtype {values.dtype} does not match param dtype {param.dtype}")
    check_same_device(("param", param), ("gradient", values))
