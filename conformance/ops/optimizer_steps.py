"""What ``adagrad`` and ``sparse_adam`` share: decoding a parameter and a trajectory of
gradients, and driving a ``torch.optim.Optimizer`` subclass through those steps."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from conformance.types import RunContext, Unsupported
from conformance.compare import Mismatch, Tolerance, at_least_default, finite_abs_max
from conformance.ops import draw as d
from conformance.ops.base import COO, TENSOR, GeneratedProperty, Op
from conformance.ops.coalesce import coalesce_reference
from conformance.dtypes import DTYPES, OPMATH_ROUNDOFF
from conformance.tensors import CooArray, decode_array, encode_array, encode_coo, quantize, random_coo, to_torch

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


def single_step_param_bounds(inputs: OptimizerInputs, reference_param: np.ndarray, dtype: str,
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
    slack = intermediates * DTYPES[dtype].unit_roundoff * update + 4 * OPMATH_ROUNDOFF * np.abs(exact)
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
    u, steps = DTYPES[dtype].unit_roundoff, max(1, inputs.steps)
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


def optimizer_benchmark_inputs(bench, rng, dtype: str) -> OptimizerInputs:
    """A benchmark's trajectory: a standard normal parameter and ``bench.steps`` random COO gradients."""
    sparse_dims = bench.sparse_dims if bench.sparse_dims is not None else 1
    param = quantize(rng.standard_normal(bench.size), dtype)
    grads = [random_coo(rng, bench.size, sparse_dims, bench.density, dtype) for _ in range(bench.steps)]
    hyper = dict(bench.hyperparameters)
    if "betas" in hyper:
        hyper["betas"] = tuple(hyper["betas"])
    return OptimizerInputs(param, grads, hyper)


# ---------------------------------------------------------------- generated inputs

@st.composite
def drawn_inputs(draw, op: "OptimizerOp", dtype: str = "float64", *, max_steps: int = 4,
                 hyperparameters: Any = None) -> OptimizerInputs:
    """A parameter (1-3 dims), a gradient trajectory and valid hyperparameters for ``op`` (drawn
    from ``hyperparameters`` when given, else from ``op.hyperparameters_strategy()``)."""
    d.check_dtype(dtype)
    size = draw(d.shapes(1, 3, 1, 4, max_numel=24))
    sparse_dim = draw(st.integers(1, len(size)))
    param = d.dense_values(draw, size, d.representable_floats(dtype, d.PARAM_MAGNITUDES[dtype]))
    hyper = draw(hyperparameters if hyperparameters is not None else op.hyperparameters_strategy())
    grads = draw(d.trajectories(dtype, size, sparse_dim, max_steps=max_steps,
                                dense_steps=op.accepts_dense_steps(hyper)))
    return OptimizerInputs(param, grads, hyper)


def empty_gradient(shape: tuple[int, ...]) -> CooArray:
    """A sparse gradient with no entries (sparse_dim 1)."""
    return CooArray(np.zeros((1, 0), dtype=np.int64), np.zeros((0, *shape[1:])), tuple(shape))


def _padded(inputs: OptimizerInputs, steps: int) -> OptimizerInputs:
    """``inputs`` with empty sparse gradients appended up to ``steps`` steps."""
    empty = empty_gradient(inputs.param.shape)
    return OptimizerInputs(inputs.param, [*inputs.grads, *[empty] * (steps - inputs.steps)], inputs.hyperparameters)


@st.composite
def param_groups(draw, op: "OptimizerOp", dtype: str = "float64", *, min_steps: int = 1) -> "ParamGroupsInputs":
    """Two param groups with their own hyperparameters: the first holds one parameter, the second
    a parameter of another shape and one that never gets a gradient (as torch's OptimizerInfo
    tests). The trajectories are padded with empty gradients to the same number of steps."""
    first, second = draw(drawn_inputs(op, dtype, max_steps=3)), draw(drawn_inputs(op, dtype, max_steps=3))
    steps = max(min_steps, first.steps, second.steps)
    idle = d.dense_values(draw, draw(d.shapes(1, 2, 1, 3)), d.representable_floats(dtype, d.PARAM_MAGNITUDES[dtype]))
    return ParamGroupsInputs([[_padded(first, steps)], [_padded(second, steps), idle]])


@st.composite
def resume_points(draw, op: "OptimizerOp", dtype: str = "float64") -> tuple["ParamGroupsInputs", int]:
    """Param groups (:func:`param_groups`, at least two steps) and the step after which the
    optimizer's state_dict is saved and loaded into a fresh optimizer."""
    inputs = draw(param_groups(op, dtype, min_steps=2))
    return inputs, draw(st.integers(1, inputs.steps - 1))


@st.composite
def rounding_inputs(draw, op: "OptimizerOp", dtype: str) -> OptimizerInputs:
    """One sparse step without duplicate indices on a parameter of magnitude 1..8, with a learning
    rate that moves it by 0.05 to 20 ulps: there rounding, not arithmetic, decides the result."""
    d.check_dtype(dtype)
    length = draw(st.integers(1, 16))
    param = d.dense_values(draw, (length,), d.representable_floats(dtype, d.Magnitudes(0, 2), zero=False))
    touched = sorted(draw(st.lists(st.integers(0, length - 1), min_size=1, max_size=length, unique=True)))
    grad_values = draw(d.fixed_lists(d.representable_floats(dtype, d.Magnitudes(-3, 2), zero=False), len(touched)))
    ulp_at_4 = 2.0 ** (2 - DTYPES[dtype].mantissa_bits)
    lr = ulp_at_4 * draw(st.sampled_from([0.05, 0.3, 0.5, 0.7, 1.0, 1.5, 2.5, 7.0, 20.0]))
    hyper = {"lr": lr, **op.rounding_hyperparameters(draw)}
    grad = CooArray(np.array([touched], dtype=np.int64), np.array(grad_values, dtype=np.float64), (length,))
    return OptimizerInputs(param, [grad], hyper)


NEGATIVE = st.sampled_from([-1.0, -0.5, -1e-3, -10.0])  # what an out-of-range hyperparameter is drawn from


def with_sparse_weight_decay(draw, inputs: OptimizerInputs, hyper: dict) -> OptimizerInputs:
    """``inputs`` with a weight_decay drawn into ``hyper`` and at least one sparse gradient: torch
    rejects the two together (RuntimeError) in Adagrad and SGD."""
    hyper["weight_decay"] = draw(st.sampled_from([0.1, 1.0, 1e-4]))
    grads = list(inputs.grads)
    if not any(isinstance(g, CooArray) for g in grads):
        grads[0] = empty_gradient(inputs.param.shape)
    return OptimizerInputs(inputs.param, grads, hyper)


def densified(inputs: OptimizerInputs, dtype: str) -> OptimizerInputs:
    """The same trajectory with every sparse gradient summed (float64, rounded once) into a dense one."""
    grads = [quantize(dense_grad_and_mask(g, inputs.param.shape)[0], dtype) if isinstance(g, CooArray)
             else g for g in inputs.grads]
    return OptimizerInputs(inputs.param, grads, inputs.hyperparameters)


class OptimizerOp(Op):
    """What the optimizer records share: generated inputs and properties, benchmark trajectories
    and the half-precision model's frame; each optimizer gives its hyperparameters
    (:meth:`hyperparameters_strategy`), its documented errors (:meth:`invalid_inputs_strategy`)
    and its replay of torch's steps (:meth:`replay_in_dtype`)."""

    title: str = ""  # the optimizer's class name, as summaries write it
    invalid_summary: str = ""  # what the rejects-invalid property draws

    @property
    def is_optimizer(self) -> bool:
        return True

    def decode_inputs(self, raw: dict, dtype: str) -> "OptimizerInputs":
        return OptimizerInputs.decode(raw, dtype)

    def run_candidate(self, candidate, inputs: "OptimizerInputs", ctx: RunContext) -> dict[str, Any]:
        """The candidate optimizer stepped through the trajectory; the outputs are the parameter
        and the state keys the record names (``state_outputs``)."""
        return run_optimizer(candidate, inputs, ctx, self.state_outputs)

    def hyperparameters_strategy(self) -> Any:
        """A Hypothesis strategy of valid hyperparameters for sparse gradients."""
        raise NotImplementedError

    def accepts_dense_steps(self, hyperparameters: dict) -> bool:
        """Whether a trajectory with these hyperparameters may mix dense gradients in."""
        return False

    def rounding_hyperparameters(self, draw) -> dict:
        """Hyperparameters besides ``lr`` for the rounds-correctly inputs."""
        return {}

    def inputs_strategy(self, dtype: str, **options) -> Any:
        return drawn_inputs(self, dtype, **options)

    def param_groups_strategy(self, dtype: str) -> Any:
        return param_groups(self, dtype)

    def resume_points_strategy(self, dtype: str) -> Any:
        return resume_points(self, dtype)

    def rounding_inputs_strategy(self, dtype: str) -> Any:
        return rounding_inputs(self, dtype)

    def encode_inputs(self, inputs: OptimizerInputs) -> dict:
        hyper = {}
        for key, value in inputs.hyperparameters.items():
            hyper[key] = [float(v) for v in value] if isinstance(value, (tuple, list)) else (
                bool(value) if isinstance(value, (bool, np.bool_)) else float(value))
        raw = {"param": encode_array(inputs.param),
               "grads": [encode_coo(g) if isinstance(g, CooArray) else {"dense": encode_array(g)}
                         for g in inputs.grads]}
        if hyper:
            raw["hyperparameters"] = hyper
        return raw

    def option_names(self) -> tuple[str, ...]:
        """The hyperparameters of the inputs schema."""
        return tuple(self.inputs_schema.get("properties", {}).get("hyperparameters", {}).get("properties", {}))

    def at_torch_defaults(self, example: Any, options: frozenset[str]) -> Any:
        """``example`` without the hyperparameters ``options`` names: the optimizer's constructor
        (and the reference) then use torch's defaults. Walks OptimizerInputs, ParamGroupsInputs and
        tuples of them (state-dict-resume's (inputs, step))."""
        if isinstance(example, OptimizerInputs):
            if not options & set(example.hyperparameters):
                return example
            return OptimizerInputs(example.param, example.grads,
                                   {k: v for k, v in example.hyperparameters.items() if k not in options})
        if isinstance(example, ParamGroupsInputs):
            return ParamGroupsInputs([[self.at_torch_defaults(m, options) for m in group] for group in example.groups])
        if isinstance(example, tuple):
            return tuple(self.at_torch_defaults(part, options) for part in example)
        return example

    def state_before_steps(self, run, inputs: OptimizerInputs) -> dict[str, Any]:
        """The parameter and each state tensor before the first step, *read* from the
        implementation: ``run`` (a backend's or candidate's run of this op) on the same parameter
        and hyperparameters with no step at all, which constructs the optimizer and reads its
        state as :func:`read_state` reads it after steps. A state entry the optimizer creates
        only at its first step (torch's SparseAdam: lazily) cannot be read before it; for those
        :meth:`initial_state` gives the documented starting value."""
        try:
            before = run(OptimizerInputs(inputs.param, [], inputs.hyperparameters))
        except Unsupported:
            raise
        except Exception:  # noqa: BLE001 - lazily created state (Mismatch: no such entry yet), or no zero-step run
            before = {}
        documented = None
        state = {}
        for name in ("param", *self.state_tensors):
            if name in before:
                state[name] = before[name]
            else:
                documented = documented or self.initial_state(inputs)
                state[name] = documented[name]
        return state

    def initial_state(self, inputs: OptimizerInputs) -> dict[str, np.ndarray]:
        """The documented parameter and state tensors before the first step (float64), for state
        an optimizer creates only at its first step (see :meth:`state_before_steps`)."""
        return {"param": inputs.param, **{name: np.zeros(inputs.param.shape) for name in self.state_tensors}}

    def properties(self) -> tuple[GeneratedProperty, ...]:
        names = ["param", *self.state_tensors]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        return (
            GeneratedProperty("agrees-with-reference", f"{self.title} trajectories match the NumPy reference",
                              self.inputs_strategy),
            GeneratedProperty("unspecified-unchanged", f"entries a step's gradient does not specify keep {listed} "
                              "bit-for-bit", self.inputs_strategy),
            GeneratedProperty("rejects-invalid", self.invalid_summary, self.invalid_inputs_strategy),
            GeneratedProperty("param-groups", "one optimizer over two param groups (different shapes and "
                              "hyperparameters, a parameter without a gradient) moves each parameter as an optimizer "
                              "of its own would", self.param_groups_strategy),
            GeneratedProperty("state-dict-resume", "state_dict() saved mid-trajectory (torch.save/torch.load) and "
                              "loaded into a fresh optimizer continues exactly as the uninterrupted run",
                              self.resume_points_strategy),
            GeneratedProperty("rounds-correctly", "a float16/bfloat16 parameter moved by a fraction of an ulp to a "
                              "few ulps is correctly rounded", self.rounding_inputs_strategy),
        )

    def benchmark_inputs(self, bench, rng, dtype: str) -> OptimizerInputs:
        return optimizer_benchmark_inputs(bench, rng, dtype)

    def half_precision_model(self, inputs: OptimizerInputs, dtype: str, accumulate: str):
        """torch's sparse (and dense) branch replayed, rounding to ``dtype`` where torch stores a tensor."""
        flags: set = set()
        return self.replay_in_dtype(inputs, dtype, flags, accumulate), flags

    def replay_in_dtype(self, inputs: OptimizerInputs, dtype: str, flags: set, accumulate: str) -> dict[str, np.ndarray]:
        """torch's steps on ``inputs`` with every stored tensor rounded to ``dtype`` (duplicates
        summed at ``accumulate``), adding "accumulation"/"underflow" to ``flags`` where they occur."""
        raise NotImplementedError
