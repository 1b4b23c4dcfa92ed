"""``masked_mean``: the mean over the valid entries of a tensor, and its gradient.

Contract: ``value = mean(values[mask])`` and ``grad = d value / d values = mask / mask.sum()``:
zero at every invalid entry; values under the mask (NaN and inf included) affect neither the value
nor the gradient. With no valid entry the value is NaN (undefined) and the gradient all zero.
Candidate: a callable ``(values, bool_mask) -> 0-d tensor`` that autograd can differentiate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from conformance.types import RunContext
from conformance.compare import ACCUMULATION_ROUNDOFF, UNIT_ROUNDOFF, Mismatch, at_least_default, finite_abs_max
from conformance.ops.base import TENSOR, Op
from conformance.rounding import FLOAT32_UNIT, rounded
from conformance.tensors import decode_array, quantize, to_torch


@dataclass
class MaskedMeanInputs:
    values: np.ndarray
    mask: np.ndarray


def masked_mean_reference(inputs: MaskedMeanInputs) -> dict[str, np.ndarray]:
    count = int(inputs.mask.sum())
    if count == 0:
        return {"value": np.float64("nan"), "grad": np.zeros_like(inputs.values)}
    value = inputs.values[inputs.mask].sum() / count
    grad = np.where(inputs.mask, 1.0 / count, 0.0)
    return {"value": np.float64(value), "grad": grad}


def torch_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Stock torch's masked mean: ``torch.masked.mean`` (the documented masked reduction)."""
    return torch.masked.mean(values, mask=mask)


def differentiate(function, inputs: MaskedMeanInputs, ctx: RunContext) -> dict[str, Any]:
    """Call ``function(values, mask)`` on leaf tensors and backpropagate a gradient of one."""
    values = to_torch(inputs.values, ctx.dtype, ctx.torch_device).requires_grad_(True)
    mask = to_torch(inputs.mask, None, ctx.torch_device)
    result = function(values, mask)
    if not isinstance(result, torch.Tensor):
        raise Mismatch(f"masked_mean must return a tensor, got {type(result).__name__}")
    if result.numel() != 1:
        raise Mismatch(f"masked_mean must return a 0-d tensor, got shape {list(result.shape)}")
    if not result.requires_grad:
        raise Mismatch("masked_mean's result does not require grad: autograd cannot differentiate it")
    result.reshape(()).backward()
    grad = values.grad if values.grad is not None else torch.zeros_like(values)
    return {"value": result.detach().reshape(()), "grad": grad}


class MaskedMean(Op):
    name = "masked_mean"
    stock_backend = "masked"
    repro_run = "masked_mean"
    summary = "mean over mask==True entries, and its gradient (zero where the mask is False)"
    candidate_contract = "a callable (values, bool_mask) -> 0-d tensor that autograd can differentiate"
    inputs_schema = {
        "type": "object", "required": ["values", "mask"], "additionalProperties": False,
        "properties": {"values": TENSOR, "mask": {"$ref": "#/$defs/bool_tensor"}},
    }
    expected_schema = {
        "type": "object", "additionalProperties": False, "minProperties": 1,
        "properties": {"value": {"type": "number"}, "grad": TENSOR},
    }

    def decode_inputs(self, raw: dict, dtype: torch.dtype) -> MaskedMeanInputs:
        values = quantize(decode_array(raw["values"]), dtype)
        mask = decode_array(raw["mask"], dtype=bool)
        if mask.shape != values.shape:
            raise ValueError(f"mask has shape {list(mask.shape)} but values have shape {list(values.shape)}")
        return MaskedMeanInputs(values, mask)

    def reference(self, inputs: MaskedMeanInputs) -> dict[str, np.ndarray]:
        return masked_mean_reference(inputs)

    @property
    def torch_implementation(self):
        return torch_masked_mean

    def run_candidate(self, candidate, inputs: MaskedMeanInputs, ctx: RunContext) -> dict[str, Any]:
        return differentiate(candidate, inputs, ctx)

    def rounding_bounds(self, inputs: MaskedMeanInputs, dtype: torch.dtype,
                        accumulation_unit: float = FLOAT32_UNIT) -> dict[str, tuple[Any, Any, Any]]:
        """The value: the valid entries summed in float32 (any order), then divided by the count --
        with the sum rounded to ``dtype`` first (as torch's ``sum() / count`` does) or not."""
        valid = inputs.values[inputs.mask]
        count = valid.size
        if count == 0 or not np.all(np.isfinite(valid)):
            return {}
        total = float(valid.sum())
        error = (count - 1) * accumulation_unit * float(np.abs(valid).sum())
        ends = [total - error, total + error]
        means = np.array([s / count for s in ends] + [float(rounded(s, dtype)) / count for s in ends])
        if not np.all(np.isfinite(means)):
            return {}
        slack = np.abs(means) * 2 * FLOAT32_UNIT  # the float32 division
        return {"value": (total / count, float((means - slack).min()), float((means + slack).max()))}

    def generated_tolerances(self, inputs: MaskedMeanInputs, dtype: str, sensitivity) -> dict[str, Any]:
        """The value: a float32-accumulated sum of the valid entries over their count; the grad
        (mask / count): one rounding."""
        u, acc = UNIT_ROUNDOFF[dtype], ACCUMULATION_ROUNDOFF[dtype]
        valid = inputs.values[inputs.mask]
        total = float(np.abs(valid[np.isfinite(valid)]).sum()) if valid.size else 0.0
        return {"value": at_least_default(dtype, 4 * u, 2 * acc * total + 2 * u * finite_abs_max(valid)),
                "grad": at_least_default(dtype, 2 * u, 0.0)}

    def benchmark_inputs(self, bench, rng, dtype: torch.dtype) -> MaskedMeanInputs:
        values = quantize(rng.standard_normal(bench.size), dtype)
        return MaskedMeanInputs(values, rng.random(bench.size) < bench.density)

    def reference_tolerance_scale(self, inputs: MaskedMeanInputs) -> float:
        return 1.0 + math.sqrt(max(1, int(inputs.mask.sum())))


OP = MaskedMean()
