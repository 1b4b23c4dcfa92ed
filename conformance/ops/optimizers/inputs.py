"""An optimizer op's inputs: a dense parameter and one gradient per step (sparse COO or dense),
their schema and decoding, several parameters in param groups, and a benchmark's trajectory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from conformance.core.types import RunContext
from conformance.core.tensors import COO, CooArray, decode_array, quantize, random_coo, TENSOR, to_torch


GRADIENT_SCHEMA = {
    "oneOf": [
        COO,
        {"type": "object", "required": ["dense"], "additionalProperties": False, "properties": {"dense": TENSOR}},
    ]
}


def optimizer_inputs_schema(hyperparameters: dict) -> dict:
    return {
        "type": "object",
        "required": ["param", "grads"],
        "additionalProperties": False,
        "properties": {
            "param": TENSOR,
            "grads": {"type": "array", "items": GRADIENT_SCHEMA,
                      "description": "one gradient per optimizer step"},
            "hyperparameters": {"type": "object", "additionalProperties": False, "properties": hyperparameters},
        },
    }


@dataclass
class OptimizerInputs:
    """A dense parameter, one gradient per step (CooArray, or ndarray for a dense gradient)."""

    param: np.ndarray
    grads: list[CooArray | np.ndarray]
    hyperparameters: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def decode(cls, raw: dict, dtype: str) -> "OptimizerInputs":
        param = quantize(decode_array(raw["param"]), dtype)
        grads: list[CooArray | np.ndarray] = []
        for step, node in enumerate(raw["grads"], start=1):
            try:
                if "dense" in node:
                    grad = quantize(decode_array(node["dense"]), dtype)
                    shape = grad.shape
                else:
                    grad = CooArray.decode(node).quantized(dtype)
                    shape = grad.size
            except ValueError as exc:
                raise ValueError(f"grads[{step - 1}]: {exc}") from None
            if tuple(shape) != param.shape:
                raise ValueError(f"grads[{step - 1}] has size {list(shape)} but param has shape {list(param.shape)}")
            grads.append(grad)
        hyper = dict(raw.get("hyperparameters") or {})
        if "betas" in hyper:
            hyper["betas"] = tuple(hyper["betas"])
        return cls(param, grads, hyper)

    @property
    def steps(self) -> int:
        return len(self.grads)


@dataclass
class ParamGroupsInputs:
    """Several parameters in one optimizer: ``groups[g]`` is a list of members, each an
    OptimizerInputs (the group's hyperparameters are its first member's) or a bare parameter that
    never gets a gradient. Every member's trajectory has the same number of steps."""

    groups: list[list[OptimizerInputs | np.ndarray]]

    @property
    def members(self) -> list[OptimizerInputs]:
        return [m for group in self.groups for m in group if isinstance(m, OptimizerInputs)]

    @property
    def idle(self) -> list[np.ndarray]:
        return [m for group in self.groups for m in group if not isinstance(m, OptimizerInputs)]

    @property
    def steps(self) -> int:
        return self.members[0].steps


GRAD_ROLES = ("grad", "grad.indices", "grad.values")  # a dense gradient; a sparse one's parts (layouts)


def grad_to_torch(grad: CooArray | np.ndarray, ctx: RunContext) -> torch.Tensor:
    """A step's gradient on the item's device and dtype, in the layout the example gives it (``grad``,
    or ``grad.indices`` and ``grad.values`` for a sparse one)."""
    if isinstance(grad, np.ndarray):
        return ctx.place("grad", to_torch(grad, ctx.dtype, ctx.torch_device))
    return grad.to_torch(ctx.dtype, ctx.torch_device, place=ctx.place, role="grad.")


def negated(grad, maximize: bool):
    """The gradient as torch's maximize=True sees it (negated)."""
    if not maximize:
        return grad
    if isinstance(grad, CooArray):
        return CooArray(grad.indices, -grad.values, grad.size)
    return -grad


def empty_gradient(shape: tuple[int, ...]) -> CooArray:
    """A sparse gradient with no entries (sparse_dim 1)."""
    return CooArray(np.zeros((1, 0), dtype=np.int64), np.zeros((0, *shape[1:])), tuple(shape))


def optimizer_benchmark_inputs(bench, rng, dtype: str) -> OptimizerInputs:
    """A benchmark's trajectory: a standard normal parameter and ``bench.steps`` random COO gradients."""
    sparse_dims = bench.sparse_dims if bench.sparse_dims is not None else 1
    param = quantize(rng.standard_normal(bench.size), dtype)
    grads = [random_coo(rng, bench.size, sparse_dims, bench.density, dtype) for _ in range(bench.steps)]
    hyper = dict(bench.hyperparameters)
    if "betas" in hyper:
        hyper["betas"] = tuple(hyper["betas"])
    return OptimizerInputs(param, grads, hyper)
