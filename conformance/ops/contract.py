"""What the op records' candidate contract checks share (``Op.watch_candidate``): the one form of a
violation -- a :class:`~conformance.core.compare.Mismatch` ``contract violated (<op>: <clause>): <detail>``,
outcome ``failed`` -- and the bit-for-bit comparison of a tensor handed to a candidate with a copy
taken before the call."""

from __future__ import annotations

import torch

from conformance.core.types import Mismatch


def violation(op_name: str, clause: str, detail: str) -> Mismatch:
    return Mismatch(f"contract violated ({op_name}: {clause}): {detail}")


def same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def check_like(op_name: str, got: torch.Tensor, like: torch.Tensor, *, subject: str, owner: str, owner_is: str,
               clauses: tuple[str, ...] = ("dtype", "device", "shape")) -> None:
    """The clauses "<subject> has <owner> dtype", "<subject> is on <owner> device" and "<subject> has
    <owner> shape", checked in that order (those named in ``clauses``): raises the first violated, e.g.
    ``check_like("coalesce", result, tensor, subject="the result", owner="the input's", owner_is="the input is")``."""
    if "dtype" in clauses and got.dtype != like.dtype:
        raise violation(op_name, f"{subject} has {owner} dtype", f"got {got.dtype}, {owner_is} {like.dtype}")
    if "device" in clauses and not same_device(got.device, like.device):
        raise violation(op_name, f"{subject} is on {owner} device", f"got {got.device}, {owner_is} on {like.device}")
    if "shape" in clauses and tuple(got.shape) != tuple(like.shape):
        raise violation(op_name, f"{subject} has {owner} shape", f"got {list(got.shape)}, {owner_is} {list(like.shape)}")


def snapshot(tensor: torch.Tensor) -> torch.Tensor:
    # compared on the CPU: on XLA a device-side copy and comparison would add graphs of their own
    # to the compile counts measured around the candidate (masked_mean_compiles)
    return tensor.detach().to("cpu", copy=True)


def changed(tensor: torch.Tensor, before: torch.Tensor) -> str | None:
    """How ``tensor`` differs from the copy ``before`` (bit for bit, NaN equal to NaN), or None."""
    now = tensor.detach().cpu()
    if now.layout != before.layout or now.dtype != before.dtype or now.shape != before.shape:
        return (f"it became {now.layout}/{now.dtype}/{list(now.shape)}, was "
                f"{before.layout}/{before.dtype}/{list(before.shape)}")
    if now.layout == torch.sparse_coo:
        if now.is_coalesced() != before.is_coalesced():
            return f"is_coalesced() became {now.is_coalesced()}"
        if not torch.equal(now._indices(), before._indices()):
            return "its indices were changed"
        return None if _equal(now._values(), before._values()) else "its values were changed"
    return None if _equal(now, before) else "its values were changed"


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape:
        return False
    if a.is_floating_point():
        same = (a == b) | (torch.isnan(a) & torch.isnan(b))
        return bool(same.all())
    return torch.equal(a, b)
