"""An optimizer op's inputs: a dense parameter and one gradient per step (sparse COO or dense),
their schema and decoding, several parameters in param groups, and a benchmark's trajectory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

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
    grads: Sequence[CooArray | np.ndarray]  # (a list, typed read-only: a list of CooArrays alone is one too)
    hyperparameters: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def decode(cls, raw: dict, dtype: str) -> "OptimizerInputs":
        param = quantize(decode_array(raw["param"]), dtype)
        grads: list[CooArray | np.ndarray] = []
        for step, node in enumerate(raw["grads"], start=1):
            grad: CooArray | np.ndarray
            shape: tuple[int, ...]
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


def has_sparse_step(inputs: Any) -> bool:
    """Some step's gradient is sparse: a trajectory's (``grads``), or a lifecycle member's (``members``)."""
    grads = list(getattr(inputs, "grads", ())) + [g for m in getattr(inputs, "members", ()) for g in m.grads]
    return any(isinstance(grad, CooArray) for grad in grads)


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
    return np.asarray(-grad)  # (a 0-d array stays an array: NumPy negates it to a scalar)


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


@dataclass
class Member:
    """One parameter of a lifecycle: its starting value, its gradient at each step of the run (None: no
    gradient that step), the step before which ``add_param_group`` brings it in (0: in the constructor),
    whether it is frozen (in the optimizer, never given a gradient), and its dtype where it is not the item's
    (one optimizer over parameters of mixed dtypes, torch's test_mixed_device_dtype)."""

    param: np.ndarray
    grads: list[CooArray | np.ndarray | None]
    start: int = 0
    frozen: bool = False
    dtype: str | None = None  # None: the item's dtype


@dataclass
class LifecycleInputs:
    """A parameter's life in an optimizer as training jobs live it: several parameters of different shapes
    (0-d and zero-size too), gradients missing on some steps, frozen parameters, a group added mid-run, the
    learning rate changed between steps (``lr_scales[s]``: the constructor's lr times it before step s, as a
    scheduler sets it), ``lr`` given as a 0-d tensor (a new one set before each step), or as a 0-d tensor that
    ``group["lr"].fill_`` changes in place (``lr_in_place``: a scheduler on a tensor lr, DeepSpeed), and the
    state_dict saved after step ``resume_after``, through ``torch.save``/``torch.load(weights_only=True)``, into a
    fresh optimizer."""

    members: list[Member]
    hyperparameters: dict[str, Any]
    lr_scales: list[float]
    tensor_lr: bool = False
    resume_after: int | None = None
    lr_in_place: bool = False  # lr a 0-d tensor, each group's own, changed with fill_ (implies a tensor lr)

    @property
    def steps(self) -> int:
        return len(self.lr_scales)

    def events(self) -> str:
        """The lifecycle events this example holds, in words (what a failure names)."""
        said = []
        for index, member in enumerate(self.members):
            shape = f"shape {list(member.param.shape)}"
            if member.dtype is not None:
                said.append(f"parameter {index} ({shape}) in {member.dtype} beside parameters of the item's dtype")
            if member.frozen:
                said.append(f"parameter {index} ({shape}) frozen: never a gradient")
                continue
            missing = [s + 1 for s, g in enumerate(member.grads) if g is None and s >= member.start]
            if member.start:
                said.append(f"parameter {index} ({shape}) added by add_param_group before step {member.start + 1}")
            if missing:
                said.append(f"parameter {index} ({shape}) gets no gradient at step{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(map(str, missing))}")
            if not member.param.size or not member.param.ndim:
                said.append(f"parameter {index} is {'zero-size' if not member.param.size else '0-d'}"
                            + (" and last in its group" if index == len(self.members) - 1 else ""))
        if any(scale != 1.0 for scale in self.lr_scales):
            said.append(f"lr changed between steps (x {', '.join(f'{s:g}' for s in self.lr_scales)})")
        if self.lr_in_place:
            said.append("lr a 0-d tensor changed in place (group['lr'].fill_) before each step")
        elif self.tensor_lr:
            said.append("lr a 0-d tensor")
        if self.resume_after is not None:
            said.append(f"state_dict saved after step {self.resume_after} and loaded with "
                        "torch.load(weights_only=True) into a fresh optimizer")
        return "; ".join(said) or "no lifecycle event"
