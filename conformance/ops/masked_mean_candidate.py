"""How a masked mean is driven and read (``masked_mean`` and ``masked_mean_compiles``): the function
called on leaf tensors and differentiated (:func:`differentiate`, every backend's and a candidate's),
and the candidate contract's clauses on each call (:func:`watch_masked_mean`).

A candidate may be written with ``torch.masked.MaskedTensor``, as torch's tutorial teaches
(``as_masked_tensor(values, mask).mean()``, with or without ``.get_data()``): the result may be a 0-d
MaskedTensor and the gradient autograd delivers to ``values.grad`` a MaskedTensor. Both are read at
their specified (masked-in) entries (:func:`conformance.core.tensors.specified_data`): a result with
its mask False is no value (NaN, the contract's undefined mean), a gradient entry masked out is 0 (no
gradient). What the data holds at masked-out entries is no value and is never read. The numbers are
then judged as any candidate's.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from conformance.core.tensors import is_masked_tensor, not_plain_tensor, specified_data, to_torch
from conformance.core.types import Mismatch, RunContext
from conformance.ops.contract import changed, check_like, snapshot, violation

GRADIENT_CLAUSE = ("the gradient values.grad is a plain (strided) torch.Tensor or a MaskedTensor of values' shape, "
                   "dtype and device")


def differentiate(function, inputs, ctx: RunContext) -> dict[str, Any]:
    """Call ``function(values, mask)`` on leaf tensors and backpropagate a gradient of one (``inputs``:
    a ``MaskedMeanInputs``). A MaskedTensor result or gradient is read at its specified entries."""
    values = ctx.place("values", to_torch(inputs.values, ctx.dtype, ctx.torch_device)).requires_grad_(True)
    mask = ctx.place("mask", to_torch(inputs.mask, None, ctx.torch_device))
    result = function(values, mask)
    if not isinstance(result, torch.Tensor):
        raise Mismatch(f"masked_mean must return a tensor, got {type(result).__name__}")
    if result.numel() != 1:
        raise Mismatch(f"masked_mean must return a 0-d tensor, got shape {list(result.shape)}")
    if not result.requires_grad:
        raise Mismatch("masked_mean's result does not require grad: autograd cannot differentiate it")
    result.reshape(()).backward()
    value = specified_data(result, math.nan) if is_masked_tensor(result) else result.detach()
    return {"value": value.reshape(()), "grad": read_gradient(values)}


def read_gradient(values: torch.Tensor) -> torch.Tensor:
    """``values.grad`` as a plain tensor (none: zeros; a MaskedTensor: its data at its specified entries,
    0 at the others), or the contract's violation (a sparse gradient, one of another shape)."""
    grad = values.grad
    if grad is None:
        return torch.zeros_like(values)
    problem = not_plain_tensor(grad) if not is_masked_tensor(grad) else None
    if problem is None:
        grad = specified_data(grad, 0.0) if is_masked_tensor(grad) else grad
        if (grad.shape, grad.dtype, grad.device) != (values.shape, values.dtype, values.device):
            problem = (f"got {grad.dtype} of shape {list(grad.shape)} on {grad.device}, values are {values.dtype} "
                       f"of shape {list(values.shape)} on {values.device}")
    if problem:
        raise violation("masked_mean", GRADIENT_CLAUSE, problem)
    return grad


def watch_masked_mean(op_name: str, candidate: Any):
    """``candidate`` wrapped in the clauses of the masked mean's contract (``watch_candidate`` of
    masked_mean and masked_mean_compiles): the inputs are left unchanged; the result is a 0-d plain
    (strided) tensor or a 0-d MaskedTensor, of ``values.dtype`` on ``values.device``."""
    def watched(values: torch.Tensor, mask: torch.Tensor):
        before = {"values": snapshot(values), "mask": snapshot(mask)}
        result = candidate(values, mask)
        for name, tensor in (("values", values), ("mask", mask)):
            change = changed(tensor, before[name])
            if change:
                raise violation(op_name, f"the input {name} is left unchanged", change)
        masked = is_masked_tensor(result)
        problem = None if masked else not_plain_tensor(result)
        if problem:
            raise violation(op_name, "the result is a plain (strided) 0-d torch.Tensor or a 0-d MaskedTensor", problem)
        if result.dim() != 0:
            kind = "a MaskedTensor of shape" if masked else "shape"
            raise violation(op_name, "the result is a 0-d tensor", f"got {kind} {list(result.shape)}")
        check_like(op_name, result.get_data() if masked else result, values, subject="the result", owner="values'",
                   owner_is="values are", clauses=("dtype", "device"))
        return result

    return watched
