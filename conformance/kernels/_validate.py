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
    """ValueError naming the first index that is negative or >= its dimension's size."""
    if indices.numel() == 0:
        return
    limits = torch.tensor(sparse_size, dtype=torch.int64, device=indices.device)[:, None]
    bad = (indices < 0) | (indices >= limits)
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
