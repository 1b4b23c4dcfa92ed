"""What ``adagrad`` and ``sparse_adam`` share: decoding a parameter and a trajectory of
gradients, and driving a ``torch.optim.Optimizer`` subclass through those steps."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from conformance.types import RunContext, Unsupported
from conformance.compare import UNIT_ROUNDOFF, Mismatch, Tolerance, at_least_default, finite_abs_max
from conformance.ops.base import COO, TENSOR, Op
from conformance.ops.coalesce import coalesce_reference
from conformance.rounding import FLOAT32_UNIT, unit_roundoff
from conformance.tensors import CooArray, decode_array, quantize, random_coo, to_torch

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
    def decode(cls, raw: dict, dtype: torch.dtype) -> "OptimizerInputs":
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


def dense_grad_and_mask(grad: CooArray | np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(summed dense gradient, mask broadcast to ``shape``) of one step, in float64 NumPy."""
    if isinstance(grad, np.ndarray):
        return grad.astype(np.float64), np.ones(shape, dtype=bool)
    coalesced = coalesce_reference(grad)
    dense = np.zeros(shape, dtype=np.float64)
    mask = np.zeros(shape, dtype=bool)
    index = tuple(coalesced["indices"])
    dense[index] = coalesced["values"]
    mask[index] = True
    return dense, mask


def grad_to_torch(grad: CooArray | np.ndarray, ctx: RunContext) -> torch.Tensor:
    if isinstance(grad, np.ndarray):
        return to_torch(grad, ctx.dtype, ctx.torch_device)
    return grad.to_torch(ctx.dtype, ctx.torch_device)


SPARSE_ONLY_ATTRIBUTE = "sparse_gradients_only"


def require_accepted_gradients(optimizer_class: Any, grads: list) -> None:
    """Unsupported when the optimizer declares ``sparse_gradients_only = True`` (a class attribute)
    and a step's gradient is dense: the harness sends dense gradients too (spec cases that write
    ``{dense: ...}``, the densified runs of adagrad-sparse-equals-dense, SparseAdam's documented
    dense-gradient error), and an optimizer made only for sparse ones says so instead of failing."""
    if getattr(optimizer_class, SPARSE_ONLY_ATTRIBUTE, False) and any(isinstance(g, np.ndarray) for g in grads):
        raise Unsupported(f"the optimizer declares {SPARSE_ONLY_ATTRIBUTE} = True and this input has a dense gradient")


def run_optimizer(optimizer_class: type, inputs: OptimizerInputs, ctx: RunContext,
                  state_outputs: dict[str, str], *, resume_after: int | None = None) -> dict[str, Any]:
    """Construct ``optimizer_class([param], **hyperparameters)``, step once per gradient, and
    read ``param`` and the state entries named in ``state_outputs`` (output name -> state key).

    With ``resume_after=k`` the run is interrupted after step k as a training job would be: the
    optimizer's ``state_dict()`` goes through ``torch.save``/``torch.load``, and a fresh
    optimizer on a fresh copy of the parameter loads it and takes the remaining steps."""
    require_accepted_gradients(optimizer_class, inputs.grads)
    param = to_torch(inputs.param, ctx.dtype, ctx.torch_device)
    optimizer = optimizer_class([param], **inputs.hyperparameters)
    for step, grad in enumerate(inputs.grads, start=1):
        param.grad = grad_to_torch(grad, ctx)
        optimizer.step()
        if step == resume_after:
            param, optimizer = _resumed(optimizer_class, optimizer, [param], inputs.hyperparameters)
            param = param[0]
    return read_state(optimizer, param, state_outputs)


def read_state(optimizer: torch.optim.Optimizer, param: torch.Tensor, state_outputs: dict[str, str]) -> dict[str, Any]:
    """``param`` and the state entries ``state_outputs`` names (output name -> state key)."""
    state = optimizer.state[param]
    outputs: dict[str, Any] = {"param": param.detach()}
    for output, key in state_outputs.items():
        if key not in state:
            raise Mismatch(f"the optimizer's state has no {key!r} entry (torch's state key for {output}); "
                           f"it has {sorted(state)}")
        outputs[output] = state[key]
    return outputs


def _resumed(optimizer_class: type, optimizer: torch.optim.Optimizer, params: list[torch.Tensor],
             constructor: Any) -> tuple[list[torch.Tensor], torch.optim.Optimizer]:
    """A fresh copy of ``params`` and a fresh optimizer that loaded ``optimizer``'s state_dict
    after a round trip through ``torch.save``/``torch.load`` (``constructor``: the keyword
    arguments, or the param groups with their params replaced in order)."""
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=False)  # a candidate's state may hold objects of its own
    fresh = [p.detach().clone() for p in params]
    if isinstance(constructor, dict):
        new = optimizer_class(fresh, **constructor)
    else:
        remaining = iter(fresh)
        new = optimizer_class([{**group, "params": [next(remaining) for _ in group["params"]]}
                               for group in constructor])
    new.load_state_dict(saved)
    return fresh, new


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


def run_param_groups(optimizer_class: type, inputs: ParamGroupsInputs, ctx: RunContext,
                     state_outputs: dict[str, str], *, resume_after: int | None = None
                     ) -> tuple[list[dict[str, Any]], list[torch.Tensor]]:
    """One optimizer over every parameter of ``inputs`` (one param group per group, with its first
    member's hyperparameters), stepped ``inputs.steps`` times: (the outputs of each member with a
    trajectory, in order, as :func:`run_optimizer` reads them; the idle parameters after the steps)."""
    for member in inputs.members:
        require_accepted_gradients(optimizer_class, member.grads)
    params, groups = [], []
    for group in inputs.groups:
        hyper = next(m.hyperparameters for m in group if isinstance(m, OptimizerInputs))
        tensors = [to_torch(m.param if isinstance(m, OptimizerInputs) else m, ctx.dtype, ctx.torch_device)
                   for m in group]
        params += tensors
        groups.append({"params": tensors, **hyper})
    flat = [m for group in inputs.groups for m in group]
    optimizer = optimizer_class(groups)
    for step in range(1, inputs.steps + 1):
        for member, param in zip(flat, params):
            if isinstance(member, OptimizerInputs):
                param.grad = grad_to_torch(member.grads[step - 1], ctx)
        optimizer.step()
        if step == resume_after:
            params, optimizer = _resumed(optimizer_class, optimizer, params, groups)
    outputs = [read_state(optimizer, p, state_outputs) for m, p in zip(flat, params) if isinstance(m, OptimizerInputs)]
    return outputs, [p.detach() for m, p in zip(flat, params) if not isinstance(m, OptimizerInputs)]


def single_step_param_bounds(inputs: OptimizerInputs, reference_param: np.ndarray, dtype: torch.dtype,
                             intermediates: int) -> dict[str, tuple]:
    """The parameter after one sparse step without duplicate indices: its exact value, widened by
    the rounding of the ``intermediates`` values the update is computed from (each off by at most
    one unit roundoff of ``dtype``, torch stores them in the parameter's dtype) and by float32
    arithmetic. Empty for other inputs (trajectories compound their roundings)."""
    if inputs.steps != 1 or not isinstance(inputs.grads[0], CooArray):
        return {}
    grad = inputs.grads[0]
    if grad.indices.shape[1] != np.unique(grad.indices.T, axis=0).shape[0]:
        return {}  # duplicates: torch sums them in half precision (a known divergence of its own)
    exact = np.asarray(reference_param, dtype=np.float64)
    update = np.abs(exact - inputs.param)
    slack = intermediates * unit_roundoff(dtype) * update + 4 * FLOAT32_UNIT * np.abs(exact)
    return {"param": (exact, exact - slack, exact + slack)}


def optimizer_problem(candidate: Any) -> str | None:
    if not (isinstance(candidate, type) and issubclass(candidate, torch.optim.Optimizer)):
        return f"{candidate!r} is not a torch.optim.Optimizer subclass"
    return None


@dataclass
class TrajectoryBounds:
    """What an optimizer's per-output tolerances are made of (see :func:`trajectory_tolerances`)."""

    u: float  # the dtype's unit roundoff
    steps: int
    growth: float  # relative error grown over the trajectory
    g_max: float  # largest |gradient| entry
    sensitivity: dict[str, float]


def _trajectory_scale(reference, inputs: OptimizerInputs) -> tuple[float, float]:
    """(largest |param| along the reference trajectory, largest single-step |update|)."""
    param = inputs.param
    biggest, update = finite_abs_max(param), 0.0
    for steps in range(1, inputs.steps + 1):
        try:
            new = reference(OptimizerInputs(inputs.param, inputs.grads[:steps], inputs.hyperparameters))["param"]
        except Exception:
            break
        biggest = max(biggest, finite_abs_max(new))
        with np.errstate(invalid="ignore"):
            update = max(update, finite_abs_max(np.asarray(new) - np.asarray(param)))
        param = new
    return biggest, update


def trajectory_tolerances(reference, inputs: OptimizerInputs, dtype: str,
                          sensitivity: dict[str, float]) -> tuple[dict[str, Tolerance], TrajectoryBounds]:
    """The parameter's and step's tolerances along an optimizer trajectory (``reference``: the
    op's float64 reference), and the bounds the op's own state tolerances are made from."""
    u, steps = UNIT_ROUNDOFF[dtype], max(1, inputs.steps)
    biggest, update = _trajectory_scale(reference, inputs)
    grads = [dense_grad_and_mask(g, inputs.param.shape)[0] for g in inputs.grads]
    g_max = max((finite_abs_max(g) for g in grads), default=0.0)
    growth = 4 * u * (steps + 1)
    return {
        "param": at_least_default(dtype, growth, 4 * u * steps * (biggest + (steps + 4) * update)
                                  + 4 * sensitivity.get("param", 0.0)),
        "step": at_least_default(dtype, 0.0, 0.0),
    }, TrajectoryBounds(u, steps, growth, g_max, sensitivity)


def negated(grad, maximize: bool):
    """The gradient as torch's maximize=True sees it (negated)."""
    if not maximize:
        return grad
    if isinstance(grad, CooArray):
        return CooArray(grad.indices, -grad.values, grad.size)
    return -grad


def optimizer_benchmark_inputs(bench, rng, dtype: torch.dtype) -> OptimizerInputs:
    """A benchmark's trajectory: a standard normal parameter and ``bench.steps`` random COO gradients."""
    sparse_dims = bench.sparse_dims if bench.sparse_dims is not None else 1
    param = quantize(rng.standard_normal(bench.size), dtype)
    grads = [random_coo(rng, bench.size, sparse_dims, bench.density, dtype) for _ in range(bench.steps)]
    hyper = dict(bench.hyperparameters)
    if "betas" in hyper:
        hyper["betas"] = tuple(hyper["betas"])
    return OptimizerInputs(param, grads, hyper)


class OptimizerOp(Op):
    """What the optimizer records share: benchmark trajectories and the half-precision model's
    frame; each optimizer gives its replay of torch's steps (:meth:`replay_in_dtype`)."""

    def benchmark_inputs(self, bench, rng, dtype: torch.dtype) -> OptimizerInputs:
        return optimizer_benchmark_inputs(bench, rng, dtype)

    def half_precision_model(self, inputs: OptimizerInputs, dtype: str, accumulate: str):
        """torch's sparse (and dense) branch replayed, rounding to ``dtype`` where torch stores a tensor."""
        flags: set = set()
        return self.replay_in_dtype(inputs, dtype, flags, accumulate), flags

    def replay_in_dtype(self, inputs: OptimizerInputs, dtype: str, flags: set, accumulate: str) -> dict[str, np.ndarray]:
        """torch's steps on ``inputs`` with every stored tensor rounded to ``dtype`` (duplicates
        summed at ``accumulate``), adding "accumulation"/"underflow" to ``flags`` where they occur."""
        raise NotImplementedError
