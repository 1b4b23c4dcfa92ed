"""``sgd``: optimizer steps with ``torch.optim.SGD`` semantics on sparse gradients.

Contract (the SGD documentation's algorithm; torch/optim/sgd.py ``_single_tensor_sgd``): per step
``g = grad`` (negated with ``maximize``); with ``momentum`` m != 0 the buffer starts as the first
gradient and then ``b = m * b + (1 - dampening) * g``, and the step uses ``g + m * b`` (nesterov)
or ``b``; ``param -= lr * step``. A sparse gradient is added as its entries (duplicates summed):
only specified entries move, and with momentum the buffer is sparse too, so an entry moves once
some step has specified it (as dense SGD moves it) and never before. ``weight_decay != 0`` with
a sparse gradient raises RuntimeError (torch computes ``grad.add(param)``, sparse + dense), and
so does a dense gradient after a momentum buffer started sparse. Outputs: ``param``.
Candidate: a ``torch.optim.Optimizer`` subclass with SGD's constructor.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from conformance.core.compare import finite_abs_max
from conformance.core.divergences import STOCK_TORCH, ConditionalDivergence, register
from conformance.core.dtypes import OPMATH_ROUNDOFF
from conformance.core.tolerances import ErrorBound
from conformance.core.diagnosis import STEP_DOES_NOTHING
from conformance.core.types import Mistake
from conformance.ops import draw as d
from conformance.ops.coalesce import accumulation_differs
from conformance.ops.base import COMPILED, GeneratedProperty, dtype_only
from conformance.ops.optimizers.base import (FOR_LOOP_KEYWORDS, OPTIMIZER_STRATEGIES, OptimizerOp,
                                             foreach_fused_compiled, optimizer_properties)
from conformance.ops.optimizers.configurations import ConfigurationSpace
from conformance.ops.optimizers.inputs import negated, optimizer_inputs_schema, OptimizerInputs
from conformance.ops.optimizers.reference import dense_grad_and_mask, single_step_param_bounds, trajectory_bounds
from conformance.ops.optimizers.strategies import drawn_inputs, NEGATIVE, with_sparse_weight_decay
from conformance.core.tensors import CooArray, rounder, TENSOR
from conformance.ops.optimizers.sgd_models import buffer_layout, sgd_hyperparameters

def sgd_reference(inputs: OptimizerInputs, *, torch_limitations: bool = True) -> dict[str, np.ndarray]:
    """SGD in float64 NumPy: dense arrays, with a mask of the entries each sparse tensor specifies.

    ``torch_limitations=False``: the documented algorithm where torch cannot add a sparse and a dense
    momentum buffer and gradient (a dense gradient into a sparse buffer, nesterov's sparse gradient
    on a dense buffer): the buffer specifies every entry either one does (weight_decay with a sparse
    gradient still raises: the suite's contract keeps a sparse gradient's entries its own)."""
    h = sgd_hyperparameters(inputs.hyperparameters)
    m, lr = h["momentum"], h["lr"]
    param = inputs.param.astype(np.float64).copy()
    buf = buf_mask = layout = None  # the momentum buffer, the entries it specifies, whether torch's is sparse
    for grad in inputs.grads:
        if torch_limitations or (isinstance(grad, CooArray) and h["weight_decay"] != 0):
            layout = buffer_layout(h, isinstance(grad, CooArray), layout)
        g, mask = dense_grad_and_mask(negated(grad, h["maximize"]), param.shape)
        if h["weight_decay"] != 0:
            g = g + h["weight_decay"] * param
        if m != 0:
            if buf is None:
                buf, buf_mask = g.copy(), mask.copy()
            else:
                buf, buf_mask = m * buf + (1 - h["dampening"]) * g, buf_mask | mask
            if h["nesterov"]:
                g, mask = g + m * buf, mask | buf_mask
            else:
                g, mask = buf, buf_mask
        param = np.where(mask, param - lr * g, param)
    return {"param": param}


# ---------------------------------------------------------------- known mistakes (conformance.core.diagnosis)


def no_maximize_model(inputs: OptimizerInputs):
    if not inputs.hyperparameters.get("maximize"):
        return None
    return sgd_reference(OptimizerInputs(inputs.param, inputs.grads, {**inputs.hyperparameters, "maximize": False}))


def first_step_dampened_model(inputs: OptimizerInputs):
    """The momentum buffer starts as (1 - dampening) * g instead of g."""
    h = sgd_hyperparameters(inputs.hyperparameters)
    if not h["momentum"] or not h["dampening"] or h["nesterov"] or h["weight_decay"] or not inputs.grads:
        return None  # (with these the buffer is not linear in the first gradient alone)
    first = inputs.grads[0]
    scaled = CooArray(first.indices, first.values * (1 - h["dampening"]), first.size) if isinstance(first, CooArray) \
        else first * (1 - h["dampening"])
    # SGD is linear in the buffer: one dampened first gradient is the same trajectory with that gradient scaled,
    # except for the first step's own update, which uses the buffer too (so it is scaled as well)
    return sgd_reference(OptimizerInputs(inputs.param, [scaled, *inputs.grads[1:]], inputs.hyperparameters))


MISTAKES = (
    Mistake("no maximize", "maximize=True is ignored: the parameter descends instead of ascending", no_maximize_model),
    Mistake("dampened first step", "the momentum buffer starts as (1 - dampening) * g; torch starts it as the first "
            "gradient itself", first_step_dampened_model),
    STEP_DOES_NOTHING,
)


# ---------------------------------------------------------------- stock torch in half precision

def _scaled(coo: CooArray, factor: float, q) -> CooArray:
    return CooArray(coo.indices, q(factor * coo.values), coo.size)


def _joined(a: CooArray, b: CooArray) -> CooArray:
    """torch's sparse + sparse: the entries of both, uncoalesced."""
    return CooArray(np.concatenate([a.indices, b.indices], axis=1), np.concatenate([a.values, b.values]), a.size)


def _add_into(param: np.ndarray, update, alpha: float, q) -> np.ndarray:
    """torch's ``param.add_(update, alpha=alpha)``: a dense update rounds once; a sparse one is
    added entry by entry, each ``alpha * value`` rounded and then the running parameter rounded."""
    if not isinstance(update, CooArray):
        return q(param + alpha * update)
    param = param.copy()
    for k in range(update.indices.shape[1]):
        index = tuple(update.indices[:, k])
        param[index] = q(param[index] + q(alpha * update.values[k]))
    return param


# ---------------------------------------------------------------- generated inputs

def _three_digits(value: float) -> float:
    return round(value, 3)


_MOMENTA = st.one_of(st.just(0.0), st.sampled_from([0.9, 0.5, 0.99]), st.floats(0.0, 0.999).map(_three_digits))
_DAMPENINGS = st.one_of(st.just(0.0), st.sampled_from([0.1, 0.5, 0.9]))


@st.composite
def hyperparameters(draw, momentum: bool = True) -> dict:
    """Valid ``torch.optim.SGD`` hyperparameters for sparse gradients (weight_decay = 0): a
    learning rate, momentum with dampening or nesterov (unless ``momentum`` is False), maximize."""
    hyper = {"lr": draw(d.learning_rates())}
    m = draw(_MOMENTA) if momentum else 0.0
    if m:
        hyper["momentum"] = m
        if draw(st.booleans()):
            hyper["nesterov"] = True
        else:
            dampening = draw(_DAMPENINGS)
            if dampening:
                hyper["dampening"] = dampening
    if draw(st.booleans()):
        hyper["maximize"] = True
    return hyper


@st.composite
def invalid_inputs(draw, dtype: str = "float64") -> OptimizerInputs:
    """Inputs with exactly one documented error: an out-of-range hyperparameter or nesterov without
    momentum or with dampening (ValueError), or ``weight_decay`` with a sparse gradient (RuntimeError)."""
    inputs = draw(drawn_inputs(OP, dtype, max_steps=2))
    hyper = dict(inputs.hyperparameters)
    problem = draw(st.sampled_from(["lr", "momentum", "weight_decay", "nesterov", "sparse-weight-decay"]))
    if problem == "sparse-weight-decay":
        return with_sparse_weight_decay(draw, inputs, hyper)
    if problem == "nesterov":
        hyper.pop("nesterov", None)
        if draw(st.booleans()):
            hyper.pop("momentum", None)
            hyper.pop("dampening", None)
        else:
            hyper["momentum"] = hyper.get("momentum") or 0.9
            hyper["dampening"] = draw(st.sampled_from([0.1, 0.5]))
        hyper["nesterov"] = True
        return OptimizerInputs(inputs.param, inputs.grads, hyper)
    hyper[problem] = draw(NEGATIVE)
    return OptimizerInputs(inputs.param, inputs.grads, hyper)


def sgd_reference_beyond_torch(inputs: OptimizerInputs) -> dict[str, np.ndarray]:
    return sgd_reference(inputs, torch_limitations=False)


def sgd_rounding_bounds(op: "OptimizerOp", inputs: OptimizerInputs, dtype: str,
                        accumulation_unit: float = OPMATH_ROUNDOFF) -> dict[str, tuple]:
    # lr * g, rounded before it is added
    return single_step_param_bounds(inputs, op.reference(inputs)["param"], dtype, intermediates=2)


def sgd_reference_error_bound(inputs: OptimizerInputs) -> ErrorBound:
    return ErrorBound.times_default(4.0 * max(1, inputs.steps))


def sgd_accepts_dense_steps(hyperparameters: dict) -> bool:
    return not hyperparameters.get("momentum")  # a sparse buffer cannot take a dense gradient


def sgd_properties(op: "OptimizerOp") -> tuple[GeneratedProperty, ...]:
    without_momentum = GeneratedProperty(
        "unspecified-unchanged", "without momentum, entries a step's gradient does not specify keep param "
        "bit-for-bit", lambda dtype: drawn_inputs(op, dtype, hyperparameters=hyperparameters(momentum=False)))
    return (*(p if p.name != "unspecified-unchanged" else without_momentum for p in optimizer_properties(op)),
            GeneratedProperty("sparse-equals-dense", "SGD on sparse gradients equals dense SGD at every entry "
                              "the gradients specify", op.drawing(op.strategies.inputs)))


def sgd_replay_in_dtype(inputs: OptimizerInputs, dtype: str, flags: set, accumulate: str) -> dict[str, np.ndarray]:
    """torch's steps with its sparse tensors kept uncoalesced, as torch keeps them: the buffer's
    entries are scaled one by one and the gradient's appended; the parameter takes each entry
    in turn (``accumulate`` narrower than float64 is the parameter's own dtype here)."""
    q = rounder(dtype)
    h = sgd_hyperparameters(inputs.hyperparameters)
    m, lr = h["momentum"], h["lr"]
    param = inputs.param.astype(np.float64).copy()
    buf = None
    with np.errstate(over="ignore", invalid="ignore"):
        for grad in inputs.grads:
            grad = negated(grad, h["maximize"])
            if isinstance(grad, CooArray) and accumulation_differs(grad, dtype):
                flags.add("accumulation")
            if not isinstance(grad, CooArray) and h["weight_decay"]:
                grad = q(grad + h["weight_decay"] * param)
            step = grad
            if m != 0:
                if buf is None:
                    buf = grad
                elif isinstance(buf, CooArray) and isinstance(grad, CooArray):
                    buf = _joined(_scaled(buf, m, q), _scaled(grad, 1 - h["dampening"], q))
                else:
                    buf = _add_into(q(m * buf), grad, 1 - h["dampening"], q)
                if h["nesterov"]:
                    step = (_joined(grad, _scaled(buf, m, q)) if isinstance(buf, CooArray)
                            else _add_into(q(m * buf), grad, 1.0, q))
                else:
                    step = buf
            param = _add_into(param, step, -lr, q)
    return {"param": param}


def sgd_error_bounds(op: "OptimizerOp", inputs: OptimizerInputs, dtype: str, sensitivity) -> dict[str, Any]:
    bounds, b = trajectory_bounds(op.reference, inputs, dtype, sensitivity)
    # Sums that cancel: the momentum buffer's entries and the gradient's (torch's sparse buffer
    # keeps duplicates apart, and merges a new gradient into them in its own order) are summed
    # in the dtype in some order, each sum off by up to u * the sum of its terms' magnitudes
    # (Higham, Accuracy and Stability of Numerical Algorithms, 4.2) -- [-512.011, 512.011] then
    # 1 at one index: -0.900024 in float32 where the exact value is -0.9. An error on top of whatever
    # the dtype's floor allows (ErrorBound.atol_beyond_floor).
    param = bounds["param"]
    bounds["param"] = ErrorBound(param.rtol, param.atol, param.atol_beyond_floor + 4 * b.u * (b.steps + 1)
                                 * _update_magnitude(op, inputs))
    return bounds


def _update_magnitude(op: "OptimizerOp", inputs: OptimizerInputs) -> float:
    """The sum of the magnitudes of every term the parameter's updates are made of: the
    reference on |param| and |gradients| (every coefficient of SGD's updates is >= 0), as far
    as the parameter moves."""
    absolute = OptimizerInputs(np.abs(inputs.param),
                               [CooArray(g.indices, np.abs(g.values), g.size) if isinstance(g, CooArray)
                                else np.abs(g) for g in inputs.grads],
                               {**inputs.hyperparameters, "maximize": False})
    try:
        with np.errstate(all="ignore"):
            moved = np.abs(op.reference(absolute)["param"] - absolute.param)
    except Exception:  # noqa: BLE001 - inputs the reference rejects have no trajectory to widen
        return 0.0
    return finite_abs_max(moved)


OP = OptimizerOp(
    name="sgd",
    strategies=replace(OPTIMIZER_STRATEGIES, hyperparameters=hyperparameters, invalid=dtype_only(invalid_inputs)),
    # every setting people train with, in combination (torch's OptimizerInfo for SGD: momentum, dampening,
    # nesterov, weight_decay, maximize); weight_decay meets dense steps only (torch refuses it on sparse ones)
    configuration_space=ConfigurationSpace({
        "lr": (1e-3, 0.5), "momentum": (0.0, 0.5, 0.9), "dampening": (0.0, 0.5), "nesterov": (False, True),
        "weight_decay": (0.0, 0.1), "maximize": (False, True)}),
    layout_hyperparameters={"lr": 0.5, "momentum": 0.5},
    lifecycle_hyperparameters={"lr": 0.5, "momentum": 0.5},  # the momentum buffer is where fused SGD went wrong
    title="SGD",
    long_trajectory_hyperparameters=({"lr": 0.1, "momentum": 0.9},),
    stock_backend="coo",
    # torch's own implementations of the step beside its default (the for-loop, _single_tensor_sgd on cpu),
    # each selected by constructor keywords. On a sparse gradient (torch 2.13, torch/optim/sgd.py)
    # _multi_tensor_sgd runs: its foreach ops take the sparse tensors (their per-tensor fallback) and it adds
    # the update into the parameter tensor by tensor; _fused_sgd raises RuntimeError (REFUSES). COMPILED:
    # torch's for-loop step under torch.compile, against the same step run eagerly; Dynamo does not trace a
    # sparse gradient (a graph break: the step runs eagerly)
    torch_paths=foreach_fused_compiled(),
    torch_for_loop=FOR_LOOP_KEYWORDS,  # the keywords of the for-loop step, the twins' other half
    summary="torch.optim.SGD steps on sparse gradients (momentum, dampening, nesterov, maximize)",
    candidate_contract="a torch.optim.Optimizer subclass with torch.optim.SGD's constructor",
    mistakes=MISTAKES,
    invalid_summary="invalid hyperparameters, nesterov without momentum or with dampening, and weight_decay with "
                    "sparse gradients raise torch's documented errors",
    torch_sums_duplicates_in_half=True,  # each duplicate is added into the float16/bfloat16 parameter in turn
    state_outputs={},  # the momentum buffer shows in the parameter's trajectory
    inputs_schema=optimizer_inputs_schema({
        "lr": {"type": "number"},
        "momentum": {"type": "number"},
        "dampening": {"type": "number"},
        "weight_decay": {"type": "number"},
        "nesterov": {"type": "boolean"},
        "maximize": {"type": "boolean"},
    }),
    expected_schema={"type": "object", "additionalProperties": False, "required": ["param"],
                     "properties": {"param": TENSOR}},
    torch_implementation=torch.optim.SGD,
    reference_beyond_torch=sgd_reference_beyond_torch,
    rounding_bounds=sgd_rounding_bounds,
    reference_error_bound=sgd_reference_error_bound,
    accepts_dense_steps=sgd_accepts_dense_steps,
    properties=sgd_properties,
    replay_in_dtype=sgd_replay_in_dtype,
    error_bounds=sgd_error_bounds,
    hyperparameters=sgd_hyperparameters,
    reference=sgd_reference,
)


COMPILED_MOMENTUM_DYNAMO_INDEX = register(ConditionalDivergence(
    "torch-compiled-sgd-momentum-dynamo-index-error",
    "torch.compile of SGD's step with momentum fails in Dynamo in torch 2.1 and 2.2 while tracing _single_tensor_sgd "
    "(buf = momentum_buffer_list[i]): InternalTorchDynamoError \"list index out of range\", where the eager step runs "
    "as documented; dated by its reproducer",
    "https://github.com/pytorch/pytorch/blob/v2.2.2/torch/optim/sgd.py",
    ops=("sgd",), backends=(COMPILED,), properties=("compiled-agrees",), behaviour=STOCK_TORCH, kind="error",
    raises="InternalTorchDynamoError", match="list index out of range", torch="<2.3",
    triggered=lambda inputs: float(getattr(inputs, "hyperparameters", {}).get("momentum") or 0) != 0,
))
