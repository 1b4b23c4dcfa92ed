"""``adagrad``: optimizer steps with ``torch.optim.Adagrad`` semantics on sparse gradients.

Contract (torch/optim/adagrad.py, sparse path): per step, ``clr = lr / (1 + (step - 1) * lr_decay)``;
the gradient is coalesced (duplicates summed *before* squaring); at specified entries only,
``state_sum += g**2``, ``std = sqrt(state_sum) + eps`` (eps after the square root) and
``param -= clr * g / std``. ``maximize`` negates the gradient. A sparse gradient with
``weight_decay != 0`` raises RuntimeError. Outputs: ``param``, ``state_sum``, ``step``, and
``std`` -- the values of ``sqrt(state_sum) + eps`` at the last gradient's coalesced indices, as
the tutorial prints it. Candidate: a ``torch.optim.Optimizer`` subclass with Adagrad's constructor.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from conformance.core.divergences import STOCK_TORCH, ConditionalDivergence, Divergence, register
from conformance.core.tolerances import ErrorBound
from conformance.core.dtypes import OPMATH_ROUNDOFF
from conformance.ops import draw as d
from conformance.ops.base import FOR_LOOP, GeneratedProperty, dtype_only
from conformance.ops.coalesce import accumulation_differs, coalesce_sequential
# the NumPy models: torch's defaults and checks, the reference, the known mistakes (names importers take from here)
from conformance.ops.optimizers.adagrad_models import (DEFAULTS, MISTAKES, WEIGHT_DECAY_ERROR,  # noqa: F401
                                                       adagrad_hyperparameters, adagrad_reference)
from conformance.ops.optimizers.base import (FOR_LOOP_KEYWORDS, OPTIMIZER_STRATEGIES, OptimizerOp,
                                             foreach_fused_compiled, optimizer_properties)
from conformance.ops.optimizers.configurations import ConfigurationSpace
from conformance.ops.optimizers.inputs import (has_sparse_step, negated, optimizer_inputs_schema, OptimizerInputs,
                                              ParamGroupsInputs)
from conformance.ops.optimizers.reference import single_step_param_bounds, trajectory_bounds
from conformance.ops.optimizers.strategies import drawn_inputs, NEGATIVE, with_sparse_weight_decay
from conformance.core.tensors import CooArray, rounder, TENSOR


# ---------------------------------------------------------------- torch's behaviour with several param groups

def constructor_initial_accumulator(inputs: ParamGroupsInputs) -> ParamGroupsInputs:
    """The param groups as torch runs them: every parameter's accumulator starts at the constructor's value."""
    def default(member):
        if not isinstance(member, OptimizerInputs):
            return member
        hyper = {k: v for k, v in member.hyperparameters.items() if k != "initial_accumulator_value"}
        return OptimizerInputs(member.param, member.grads, hyper)

    return ParamGroupsInputs([[default(m) for m in group] for group in inputs.groups])


# each parameter run alone on the model's inputs gives what torch's grouped run gives
GROUP_INITIAL_ACCUMULATOR = register(Divergence(
    "adagrad-group-initial-accumulator-ignored",
    "torch.optim.Adagrad fills every parameter's state_sum with the constructor's initial_accumulator_value "
    "(torch/optim/adagrad.py, __init__), so a param group's own initial_accumulator_value is kept in "
    "param_groups but never used; param groups are documented to override the constructor's defaults",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/torch/optim/adagrad.py",
    ops=("adagrad",), properties=("param-groups",), behaviour=STOCK_TORCH, model=constructor_initial_accumulator,
))



# ---------------------------------------------------------------- generated inputs

_LR_DECAYS = st.one_of(st.just(0.0), st.sampled_from([0.5, 1.0, 0.1]), d.positive((0.01,), 1e-3, 2.0))
_INITIAL_ACCUMULATORS = st.one_of(st.just(0.0), st.sampled_from([0.1, 1.0, 0.5]), d.positive((0.01,), 1e-4, 4.0))


@st.composite
def hyperparameters(draw) -> dict:
    """Valid ``torch.optim.Adagrad`` hyperparameters for sparse gradients (weight_decay = 0)."""
    hyper = {"lr": draw(d.learning_rates()), "eps": draw(d.eps_values(zero=True))}
    lr_decay = draw(_LR_DECAYS)
    if lr_decay:
        hyper["lr_decay"] = lr_decay
    initial = draw(_INITIAL_ACCUMULATORS)
    if initial:
        hyper["initial_accumulator_value"] = initial
    if draw(st.booleans()):
        hyper["maximize"] = True
    return hyper


@st.composite
def invalid_inputs(draw, dtype: str = "float64") -> OptimizerInputs:
    """Inputs with exactly one documented error: an out-of-range hyperparameter (ValueError), or
    ``weight_decay`` with a sparse gradient (RuntimeError)."""
    inputs = draw(drawn_inputs(OP, dtype, max_steps=2))
    hyper = dict(inputs.hyperparameters)
    problem = draw(st.sampled_from(["lr", "eps", "lr_decay", "weight_decay", "initial_accumulator_value",
                                    "sparse-weight-decay"]))
    if problem == "sparse-weight-decay":
        return with_sparse_weight_decay(draw, inputs, hyper)
    hyper[problem] = draw(NEGATIVE)
    return OptimizerInputs(inputs.param, inputs.grads, hyper)


def adagrad_rounding_bounds(op: "OptimizerOp", inputs: OptimizerInputs, dtype: str,
                            accumulation_unit: float = OPMATH_ROUNDOFF) -> dict[str, tuple]:
    # g/std from g**2, state + g**2, sqrt, + eps, the quotient and clr * quotient: six roundings
    return single_step_param_bounds(inputs, op.reference(inputs)["param"], dtype, intermediates=8)


def adagrad_reference_error_bound(inputs: OptimizerInputs) -> ErrorBound:
    return ErrorBound.times_default(4.0 * max(1, inputs.steps))


def adagrad_replay_in_dtype(inputs: OptimizerInputs, dtype: str, flags: set, accumulate: str) -> dict[str, np.ndarray]:
    q = rounder(dtype)
    h = adagrad_hyperparameters(inputs.hyperparameters)
    eps = h["eps"]
    param = inputs.param.astype(np.float64).copy()
    state = q(np.full(param.shape, h["initial_accumulator_value"]))
    std_out = np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for step, grad in enumerate(inputs.grads, start=1):
            grad = negated(grad, h["maximize"])
            clr = h["lr"] / (1 + (step - 1) * h["lr_decay"])
            if isinstance(grad, CooArray):
                if accumulation_differs(grad, dtype):
                    flags.add("accumulation")
                coalesced = coalesce_sequential(grad, accumulate, round_to=dtype)
                index = tuple(coalesced.indices)
                g = coalesced.values
                square = q(g * g)
                if np.any((square == 0) & (g != 0)):
                    flags.add("underflow")
                state[index] = q(state[index] + square)
                std = q(q(np.sqrt(state[index])) + eps)
                if np.any(std == 0):
                    flags.add("underflow")
                param[index] = q(param[index] - clr * q(g / std))
                std_out = std
            else:
                g = grad.astype(np.float64)
                if h["weight_decay"]:
                    g = q(g + h["weight_decay"] * param)
                state = q(state + g * g)
                std = q(q(np.sqrt(state)) + eps)
                if np.any(std == 0):
                    flags.add("underflow")
                param = q(param - clr * g / std)
                std_out = std.reshape(-1)
    return {"param": param, "state_sum": state, "step": np.float64(inputs.steps), "std": std_out}


def adagrad_accepts_dense_steps(hyperparameters: dict) -> bool:
    return True


def adagrad_rounding_hyperparameters(draw) -> dict:
    return {"initial_accumulator_value": draw(st.sampled_from([0.0, 0.1, 1.0]))}


def adagrad_initial_state(inputs: OptimizerInputs) -> dict[str, np.ndarray]:
    """The documented accumulator before the first step: initial_accumulator_value everywhere
    (used only where an optimizer creates its state lazily; torch's is created in the
    constructor and read from there, in whatever dtype the implementation keeps it)."""
    init = np.full(inputs.param.shape, float(inputs.hyperparameters.get("initial_accumulator_value", 0.0)))
    return {"param": inputs.param, "state_sum": init}


def adagrad_properties(op: "OptimizerOp") -> tuple[GeneratedProperty, ...]:
    return (*optimizer_properties(op), GeneratedProperty(
        "sparse-equals-dense", "Adagrad on sparse gradients equals dense Adagrad at every entry the gradients "
        "specify", op.drawing(op.strategies.inputs)))


def adagrad_error_bounds(op: "OptimizerOp", inputs: OptimizerInputs, dtype: str, sensitivity) -> dict[str, Any]:
    bounds, b = trajectory_bounds(op.reference, inputs, dtype, sensitivity)
    eps = inputs.hyperparameters.get("eps", 1e-10)
    init = inputs.hyperparameters.get("initial_accumulator_value", 0.0)
    bounds["state_sum"] = ErrorBound(b.growth, b.u * init + 4 * b.sensitivity.get("state_sum", 0.0))
    bounds["std"] = ErrorBound(b.growth, b.u * eps + 4 * b.sensitivity.get("std", 0.0))
    return bounds


OP = OptimizerOp(
    name="adagrad",
    strategies=replace(OPTIMIZER_STRATEGIES, hyperparameters=hyperparameters, invalid=dtype_only(invalid_inputs)),
    lifecycle_hyperparameters={"lr": 0.5, "lr_decay": 0.5},  # lr_decay reads each parameter's own step count
    title="Adagrad",
    invalid_summary="invalid hyperparameters and weight_decay with sparse gradients raise torch's documented errors",
    # a large eps (inside or outside the root) with torch's other defaults, which a candidate that
    # supports only those runs too; then lr_decay, a starting accumulator and maximize
    explicit_hyperparameters=({"lr": 0.5, "eps": 0.25},
                              {"lr": 0.5, "eps": 0.25, "lr_decay": 0.25, "initial_accumulator_value": 0.5,
                               "maximize": True}),
    configuration_space=ConfigurationSpace({
        "lr": (1e-2, 0.5), "lr_decay": (0.0, 0.25), "weight_decay": (0.0, 0.1), "initial_accumulator_value": (0.0, 0.5),
        "eps": (1e-10, 0.25), "maximize": (False, True)}),
    long_trajectory_hyperparameters=({"lr": 0.1, "lr_decay": 0.01},),
    # past 300 steps: a step counter or lr / (1 + (step - 1) * lr_decay) kept in low precision drifts there
    long_trajectory_steps=320,
    stock_backend="coo",
    # torch's own implementations of the step beside its default (the for-loop, _single_tensor_adagrad on
    # cpu), each selected by constructor keywords. On a sparse gradient (torch 2.13, torch/optim/adagrad.py)
    # _multi_tensor_adagrad hands a device's tensors to _single_tensor_adagrad (FOR_LOOP) and _fused_adagrad
    # raises RuntimeError (REFUSES). COMPILED: torch's for-loop step under torch.compile, against the same
    # step run eagerly; Dynamo does not trace a sparse gradient (a graph break: the step runs eagerly)
    sparse_weight_decay_error=WEIGHT_DECAY_ERROR,
    torch_paths=foreach_fused_compiled(foreach_on_sparse=FOR_LOOP),
    torch_for_loop=FOR_LOOP_KEYWORDS,  # the keywords of the for-loop step, the twins' other half
    summary="torch.optim.Adagrad steps on sparse (masked) gradients",
    candidate_contract="a torch.optim.Optimizer subclass with torch.optim.Adagrad's constructor",
    mistakes=MISTAKES,
    torch_sums_duplicates_in_half=True,
    state_outputs={"state_sum": "sum", "step": "step"},  # output name -> torch's state key
    root_outputs={"std": ("state_sum", "eps", DEFAULTS["eps"])},  # sqrt(state_sum) + eps, as the tutorial prints it
    inputs_schema=optimizer_inputs_schema({
        "lr": {"type": "number"},
        "lr_decay": {"type": "number"},
        "weight_decay": {"type": "number"},
        "initial_accumulator_value": {"type": "number"},
        "eps": {"type": "number"},
        "maximize": {"type": "boolean"},
    }),
    expected_schema={
        "type": "object", "additionalProperties": False, "minProperties": 1,
        "properties": {"param": TENSOR, "state_sum": TENSOR, "std": TENSOR, "step": {"type": "number"}},
    },
    torch_implementation=torch.optim.Adagrad,
    rounding_bounds=adagrad_rounding_bounds,
    reference_error_bound=adagrad_reference_error_bound,
    replay_in_dtype=adagrad_replay_in_dtype,
    accepts_dense_steps=adagrad_accepts_dense_steps,
    rounding_hyperparameters=adagrad_rounding_hyperparameters,
    initial_state=adagrad_initial_state,
    properties=adagrad_properties,
    error_bounds=adagrad_error_bounds,
    hyperparameters=adagrad_hyperparameters,
    reference=adagrad_reference,
)


SPARSE_COMPLEX = register(ConditionalDivergence(
    "torch-adagrad-sparse-complex",
    "torch's Adagrad takes a complex parameter as the pairs of reals torch.view_as_real shows on its dense path, "
    "but its sparse path (_single_tensor_adagrad's is_sparse branch: grad.pow(2), std.sqrt_(), no _view_as_real) "
    "squares the complex gradient values: Adagrad(lr=1, eps=1e-10) on 1+1j with the sparse gradient 1+1j gives "
    "-0.7071+1j after two steps where the same dense gradient gives -0.7071-0.7071j: the imaginary part is not "
    "updated like the real one. Shown by torch 2.9.0 (nox), 2.13.0 and 2.14.1 on cpu, and by torch 2.11.0+cu130 "
    "on cuda (an NVIDIA "
    "H200, 2026-11-28: 1+1j with the sparse gradient 1+1j gives 0+1j after one step, the real pairs give 0+0j)",
    "https://github.com/pytorch/pytorch/blob/v2.13.0/torch/optim/adagrad.py",
    ops=("adagrad",), devices=("cpu", "cuda"), properties=("complex-agrees",), behaviour=STOCK_TORCH,
    triggered=has_sparse_step,
))


def _a_group_added_steps(inputs) -> bool:
    """A parameter joins by add_param_group (after the first step) and then has a gradient."""
    return any(m.start > 0 and not m.frozen and any(g is not None for g in m.grads[m.start:])
               for m in getattr(inputs, "members", ()))


ADD_PARAM_GROUP_KEYERROR = register(ConditionalDivergence(
    "torch-adagrad-add-param-group-keyerror",
    "torch's Adagrad before 2.12 makes each parameter's state ('step', 'sum') in __init__ only (its _init_group "
    "reads state['sum'] without making it), so a parameter added by add_param_group raises KeyError: 'sum' at the "
    "next step (pytorch#53712). Shown by torch 2.11.0+cu130 on cuda (an NVIDIA H200, 2026-11-28, adagrad-lifecycle "
    "on coo, foreach and kernel) and by torch 2.9.0 on cpu (nox, the same day: coo, foreach, fused, kernel); "
    "torch 2.9.0's and 2.11's adagrad.py have no lazy state, 2.12.0's has",
    "https://github.com/pytorch/pytorch/issues/53712",
    ops=("adagrad",), properties=("lifecycle",), behaviour=STOCK_TORCH, kind="error", raises="KeyError", match="sum", torch="<2.12",
    triggered=_a_group_added_steps,
))
