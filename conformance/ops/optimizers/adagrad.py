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

from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from conformance.core.divergences import STOCK_TORCH, ConditionalDivergence, Divergence, register
from conformance.core.compare import at_least_default
from conformance.core.dtypes import OPMATH_ROUNDOFF, is_half
from conformance.core.diagnosis import STEP_DOES_NOTHING
from conformance.core.types import Mistake
from conformance.ops import draw as d
from conformance.ops.base import COMPILED, FOR_LOOP, FOREACH, FUSED, REFUSES, GeneratedProperty, TorchPath
from conformance.ops.coalesce import accumulation_differs, coalesce_sequential, round_toward_zero
from conformance.ops.optimizers.base import OptimizerOp
from conformance.ops.optimizers.drive import optimizer_problem
from conformance.ops.optimizers.inputs import negated, optimizer_inputs_schema, OptimizerInputs, ParamGroupsInputs
from conformance.ops.optimizers.reference import dense_grad_and_mask, single_step_param_bounds, trajectory_tolerances
from conformance.ops.optimizers.strategies import drawn_inputs, NEGATIVE, with_sparse_weight_decay
from conformance.core.tensors import CooArray, quantize, rounder, TENSOR

WEIGHT_DECAY_ERROR = "weight_decay option is not compatible with sparse gradients"
DEFAULTS = {"lr": 1e-2, "lr_decay": 0.0, "weight_decay": 0.0, "initial_accumulator_value": 0.0,
            "eps": 1e-10, "maximize": False}


def adagrad_hyperparameters(hyper: dict) -> dict:
    """Torch's defaults filled in, and torch's constructor checks (ValueError, torch's messages)."""
    h = {**DEFAULTS, **hyper}
    if not 0.0 <= h["lr"]:
        raise ValueError(f"Invalid learning rate: {h['lr']}")
    if not 0.0 <= h["lr_decay"]:
        raise ValueError(f"Invalid lr_decay value: {h['lr_decay']}")
    if not 0.0 <= h["weight_decay"]:
        raise ValueError(f"Invalid weight_decay value: {h['weight_decay']}")
    if not 0.0 <= h["initial_accumulator_value"]:
        raise ValueError(f"Invalid initial_accumulator_value value: {h['initial_accumulator_value']}")
    if not 0.0 <= h["eps"]:
        raise ValueError(f"Invalid epsilon value: {h['eps']}")
    return h


def adagrad_reference(inputs: OptimizerInputs) -> dict[str, np.ndarray]:
    """Adagrad in float64 NumPy, one masked update per step."""
    h = adagrad_hyperparameters(inputs.hyperparameters)
    param = inputs.param.astype(np.float64).copy()
    state_sum = np.full_like(param, h["initial_accumulator_value"])
    std_values = np.zeros(0)
    for step, grad in enumerate(inputs.grads, start=1):
        sparse = isinstance(grad, CooArray)
        g, mask = dense_grad_and_mask(grad, param.shape)
        if h["maximize"]:
            g = -g
        if h["weight_decay"] != 0:
            if sparse:
                raise RuntimeError(WEIGHT_DECAY_ERROR)
            g = g + h["weight_decay"] * param
        clr = h["lr"] / (1 + (step - 1) * h["lr_decay"])
        state_sum = np.where(mask, state_sum + g * g, state_sum)
        std = np.sqrt(state_sum) + h["eps"]
        with np.errstate(divide="ignore", invalid="ignore"):  # 0/0 off the mask is discarded
            param = np.where(mask, param - clr * g / std, param)
        std_values = std[mask] if not sparse else std[tuple(_coalesced_indices(grad))]
    return {"param": param, "state_sum": state_sum, "step": np.float64(inputs.steps), "std": std_values}


def _coalesced_indices(grad: CooArray) -> np.ndarray:
    from conformance.ops.coalesce import coalesce_reference

    return coalesce_reference(grad)["indices"]


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


# ---------------------------------------------------------------- known mistakes (conformance.core.diagnosis)


def _rows(array: np.ndarray) -> np.ndarray:
    return array.reshape(array.shape[0], -1)


def adagrad_with_slip(inputs: OptimizerInputs, *, squares_each: bool = False, eps_inside_root: bool = False,
                      rowwise: bool = False, ignore_maximize: bool = False, lr_decay_shift: int = 0,
                      sparse_weight_decay: bool = False, whole_rows: bool = False,
                      truncate_to: str | None = None, per_entry: bool = False, everywhere: bool = False,
                      eps: float | None = None) -> dict[str, np.ndarray]:
    """:func:`adagrad_reference` with one slip (each keyword is one known mistake): duplicates
    squared one at a time, eps inside the root, one accumulator per row (FBGEMM's
    EXACT_ROWWISE_ADAGRAD: each touched row adds the mean of its g**2), maximize ignored, the
    decay counted from step ``1 - lr_decay_shift``, weight decay applied to a sparse gradient's
    entries, an element-sparse gradient written as whole rows, the parameter stored in
    ``truncate_to`` by truncation after each step (the state kept wide), one whole update per
    written entry of a sparse gradient (``per_entry``: duplicates applied one after another), the
    parameter's update computed over the whole tensor with g = 0 off the gradient's entries
    (``everywhere``: 0/0 = NaN where the accumulator is 0 and eps is 0), ``eps`` in place of the
    hyperparameter's (as a dtype rounds it)."""
    h = adagrad_hyperparameters(inputs.hyperparameters)
    if eps is not None:
        h["eps"] = eps
    param = inputs.param.astype(np.float64).copy()
    state_sum = np.full_like(param, h["initial_accumulator_value"])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for step, grad in enumerate(inputs.grads, start=1):
            sparse = isinstance(grad, CooArray)
            g, mask = dense_grad_and_mask(grad, param.shape)
            if whole_rows and sparse and param.ndim > 1:
                mask = np.broadcast_to(_rows(mask).any(axis=1).reshape(-1, *([1] * (param.ndim - 1))),
                                       param.shape).copy()
            if h["maximize"] and not ignore_maximize:
                g = -g
            squares = g * g
            if squares_each and sparse:
                squares = np.zeros_like(param)
                np.add.at(squares, tuple(grad.indices), grad.values.astype(np.float64) ** 2)
            if h["weight_decay"] != 0:
                if sparse and not sparse_weight_decay:
                    raise RuntimeError(WEIGHT_DECAY_ERROR)
                g = np.where(mask, g + h["weight_decay"] * param, g)
                squares = g * g
            clr = h["lr"] / (1 + (step - 1 + lr_decay_shift) * h["lr_decay"])
            if per_entry and sparse and h["weight_decay"] == 0:
                sign = -1.0 if h["maximize"] and not ignore_maximize else 1.0
                for position in range(grad.indices.shape[1]):  # one whole Adagrad update per written entry
                    index = tuple(grad.indices[:, position])
                    g_i = sign * grad.values[position].astype(np.float64)
                    state_sum[index] = state_sum[index] + g_i * g_i
                    param[index] = param[index] - clr * g_i / (np.sqrt(state_sum[index]) + h["eps"])
                continue
            if rowwise:
                touched = _rows(mask).any(axis=1)
                added = _rows(np.where(mask, squares, 0.0)).sum(axis=1) / _rows(param).shape[1]
                rows = _rows(state_sum)[:, 0] + np.where(touched, added, 0.0)
                state_sum = np.broadcast_to(rows.reshape(-1, *([1] * (param.ndim - 1))), param.shape).copy()
            else:
                state_sum = np.where(mask, state_sum + squares, state_sum)
            std = np.sqrt(state_sum + h["eps"]) if eps_inside_root else np.sqrt(state_sum) + h["eps"]
            param = param - clr * g / std if everywhere else np.where(mask, param - clr * g / std, param)
            if truncate_to is not None:
                param = round_toward_zero(param, truncate_to)
    return {"param": param, "state_sum": state_sum, "step": np.float64(inputs.steps)}


def _slip(condition, **slip):
    """A model of one slip, None where ``condition(inputs)`` says it changes nothing here."""
    def model(inputs: OptimizerInputs):
        return adagrad_with_slip(inputs, **slip) if condition(inputs) else None
    return model


def _has_duplicates(inputs: OptimizerInputs) -> bool:
    return any(isinstance(g, CooArray) and len({tuple(c) for c in g.indices.T.tolist()}) < g.indices.shape[1]
               for g in inputs.grads)


def _element_sparse(inputs: OptimizerInputs) -> bool:
    return inputs.param.ndim > 1 and any(isinstance(g, CooArray) and g.indices.shape[1] for g in inputs.grads)


def _hyper(name: str):
    return lambda inputs: bool(inputs.hyperparameters.get(name))


def truncating_model(inputs: OptimizerInputs, dtype: str):
    """The parameter of a float16/bfloat16 run stored by truncation after every step (the update
    computed wide, as a fused kernel does); only the parameter is modelled."""
    if not is_half(dtype):
        return None
    return {"param": adagrad_with_slip(inputs, truncate_to=dtype)["param"]}


def nan_off_the_gradient_model(inputs: OptimizerInputs, dtype: str):
    """The parameter's update computed over the whole tensor (a dense ``addcdiv_`` with the sparse
    gradient densified, g = 0 elsewhere) and eps as the dtype holds it: where an entry's accumulator
    is still 0 and eps rounds to 0 (1e-10 in float16) or is 0, 0/0 writes NaN at an entry the
    gradient does not specify. None where that writes no NaN (then it changes nothing)."""
    eps = float(quantize(np.float64(inputs.hyperparameters.get("eps", DEFAULTS["eps"])), dtype))
    if not any(isinstance(g, CooArray) for g in inputs.grads):
        return None
    modelled = adagrad_with_slip(inputs, everywhere=True, eps=eps)
    if not np.isnan(modelled["param"]).any():
        return None
    return modelled


def rejects_uncoalesced(inputs: OptimizerInputs, error: BaseException) -> bool:
    """An error about coalescing on a trajectory with a sparse gradient: ``nn.Embedding(sparse=True)``
    and every sparse gradient the harness passes is uncoalesced, as the sparse optimizers accept."""
    return "coalesc" in str(error).lower() and any(isinstance(g, CooArray) for g in inputs.grads)


MISTAKES = (
    Mistake("squares before summing", "duplicate indices are squared one at a time (state_sum += sum of g_i**2), "
            "not summed first ((sum of g_i)**2)", _slip(_has_duplicates, squares_each=True)),
    Mistake("one update per duplicate entry", "each written entry of a sparse gradient is applied as an Adagrad "
            "update of its own, duplicates one after another (TensorFlow's ResourceSparseApplyAdagradV2); torch sums "
            "the duplicates first and updates once", _slip(_has_duplicates, per_entry=True)),
    Mistake("eps inside the root", "std = sqrt(state_sum + eps) instead of sqrt(state_sum) + eps",
            _slip(lambda inputs: True, eps_inside_root=True)),
    Mistake("one accumulator per row", "a single accumulator per row, adding the mean of the row's g**2 (row-wise "
            "Adagrad, FBGEMM's EXACT_ROWWISE_ADAGRAD), not one per entry", _slip(lambda i: i.param.ndim > 1, rowwise=True)),
    Mistake("no maximize", "maximize=True is ignored: the parameter descends instead of ascending",
            _slip(_hyper("maximize"), ignore_maximize=True)),
    Mistake("lr_decay off by one", "clr = lr / (1 + step * lr_decay): the first step is already decayed "
            "(torch: (step - 1) * lr_decay)", _slip(_hyper("lr_decay"), lr_decay_shift=1)),
    Mistake("weight decay on sparse gradients", "weight_decay is applied at a sparse gradient's entries, where "
            "torch raises \"weight_decay option is not compatible with sparse gradients\"",
            _slip(_hyper("weight_decay"), sparse_weight_decay=True)),
    Mistake("whole-row writes of element-sparse updates", "an element-sparse gradient is applied to the whole rows it "
            "touches (the other entries of those rows are written too)",
            _slip(_element_sparse, whole_rows=True, sparse_weight_decay=True)),
    Mistake("rejected uncoalesced gradients", "raises on an uncoalesced sparse gradient (duplicate or unsorted "
            "indices, what nn.Embedding(sparse=True) produces); torch's sparse optimizers coalesce it",
            raises=rejects_uncoalesced),
    Mistake("truncating stores", "the updated float16/bfloat16 parameter is stored by truncation (round toward "
            "zero), not rounded to nearest even", truncating_model, tight=True),
    Mistake("NaN at entries the gradient does not specify", "the update is computed over the whole tensor (g = 0 "
            "off the gradient's entries), so where the accumulator is still 0 and eps is 0 -- or rounds to 0 in the "
            "dtype: 1e-10 in float16 -- it writes 0/0 = NaN; torch updates only the entries the gradient specifies",
            nan_off_the_gradient_model, takes_dtype=True),
    STEP_DOES_NOTHING,
)


class Adagrad(OptimizerOp):
    name = "adagrad"
    lifecycle_hyperparameters = {"lr": 0.5, "lr_decay": 0.5}  # lr_decay reads each parameter's own step count
    title = "Adagrad"
    sparse_weight_decay_error = WEIGHT_DECAY_ERROR  # torch's RuntimeError, raised by the torch backends too
    invalid_summary = "invalid hyperparameters and weight_decay with sparse gradients raise torch's documented errors"
    # a large eps (inside or outside the root) with torch's other defaults, which a candidate that
    # supports only those runs too; then lr_decay, a starting accumulator and maximize
    explicit_hyperparameters = ({"lr": 0.5, "eps": 0.25},
                                {"lr": 0.5, "eps": 0.25, "lr_decay": 0.25, "initial_accumulator_value": 0.5,
                                 "maximize": True})
    long_trajectory_hyperparameters = ({"lr": 0.1, "lr_decay": 0.01},)
    # past 300 steps: a step counter or lr / (1 + (step - 1) * lr_decay) kept in low precision drifts there
    long_trajectory_steps = 320
    stock_backend = "coo"
    # torch's own implementations of the step beside its default (the for-loop, _single_tensor_adagrad on
    # cpu), each selected by constructor keywords. On a sparse gradient (torch 2.13, torch/optim/adagrad.py)
    # _multi_tensor_adagrad hands a device's tensors to _single_tensor_adagrad (FOR_LOOP) and _fused_adagrad
    # raises RuntimeError (REFUSES). COMPILED: torch's for-loop step under torch.compile, against the same
    # step run eagerly; Dynamo does not trace a sparse gradient (a graph break: the step runs eagerly)
    torch_paths = (TorchPath(FOREACH, {"foreach": True}, on_sparse=FOR_LOOP),
                   TorchPath(FUSED, {"fused": True}, on_sparse=REFUSES),
                   TorchPath(COMPILED, {"foreach": False}))
    torch_for_loop = {"foreach": False, "fused": False}  # the keywords of the for-loop step, the twins' other half

    summary = "torch.optim.Adagrad steps on sparse (masked) gradients"
    candidate_contract = "a torch.optim.Optimizer subclass with torch.optim.Adagrad's constructor"
    mistakes = MISTAKES
    torch_sums_duplicates_in_half = True
    state_outputs = {"state_sum": "sum", "step": "step"}  # output name -> torch's state key
    root_outputs = {"std": ("state_sum", "eps", DEFAULTS["eps"])}  # sqrt(state_sum) + eps, as the tutorial prints it
    inputs_schema = optimizer_inputs_schema({
        "lr": {"type": "number"},
        "lr_decay": {"type": "number"},
        "weight_decay": {"type": "number"},
        "initial_accumulator_value": {"type": "number"},
        "eps": {"type": "number"},
        "maximize": {"type": "boolean"},
    })
    expected_schema = {
        "type": "object", "additionalProperties": False, "minProperties": 1,
        "properties": {"param": TENSOR, "state_sum": TENSOR, "std": TENSOR, "step": {"type": "number"}},
    }

    @property
    def torch_implementation(self) -> type:
        return torch.optim.Adagrad

    def hyperparameters(self, given: dict) -> dict:
        return adagrad_hyperparameters(given)

    def reference(self, inputs: OptimizerInputs) -> dict[str, np.ndarray]:
        return adagrad_reference(inputs)

    def candidate_problem(self, candidate: Any) -> str | None:
        return optimizer_problem(candidate)

    def rounding_bounds(self, inputs: OptimizerInputs, dtype: str,
                        accumulation_unit: float = OPMATH_ROUNDOFF) -> dict[str, tuple]:
        # g/std from g**2, state + g**2, sqrt, + eps, the quotient and clr * quotient: six roundings
        return single_step_param_bounds(inputs, self.reference(inputs)["param"], dtype, intermediates=8)

    def reference_tolerance_scale(self, inputs: OptimizerInputs) -> float:
        return 4.0 * max(1, inputs.steps)

    def replay_in_dtype(self, inputs: OptimizerInputs, dtype: str, flags: set, accumulate: str) -> dict[str, np.ndarray]:
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

    def hyperparameters_strategy(self) -> Any:
        return hyperparameters()

    def accepts_dense_steps(self, hyperparameters: dict) -> bool:
        return True

    def rounding_hyperparameters(self, draw) -> dict:
        return {"initial_accumulator_value": draw(st.sampled_from([0.0, 0.1, 1.0]))}

    def invalid_inputs_strategy(self, dtype: str) -> Any:
        return invalid_inputs(dtype)

    def initial_state(self, inputs: OptimizerInputs) -> dict[str, np.ndarray]:
        """The documented accumulator before the first step: initial_accumulator_value everywhere
        (used only where an optimizer creates its state lazily; torch's is created in the
        constructor and read from there, in whatever dtype the implementation keeps it)."""
        init = np.full(inputs.param.shape, float(inputs.hyperparameters.get("initial_accumulator_value", 0.0)))
        return {"param": inputs.param, "state_sum": init}

    def properties(self) -> tuple[GeneratedProperty, ...]:
        return (*super().properties(), GeneratedProperty(
            "sparse-equals-dense", "Adagrad on sparse gradients equals dense Adagrad at every entry the gradients "
            "specify", self.inputs_strategy))

    def generated_tolerances(self, inputs: OptimizerInputs, dtype: str, sensitivity) -> dict[str, Any]:
        tolerances, b = trajectory_tolerances(self.reference, inputs, dtype, sensitivity())
        eps = inputs.hyperparameters.get("eps", 1e-10)
        init = inputs.hyperparameters.get("initial_accumulator_value", 0.0)
        tolerances["state_sum"] = at_least_default(dtype, b.growth, b.u * init + 4 * b.sensitivity.get("state_sum", 0.0))
        tolerances["std"] = at_least_default(dtype, b.growth, b.u * eps + 4 * b.sensitivity.get("std", 0.0))
        return tolerances


OP = Adagrad()


def _has_sparse_step(inputs) -> bool:
    return any(isinstance(grad, CooArray) for grad in getattr(inputs, "grads", ()))


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
    triggered=_has_sparse_step,
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
    ops=("adagrad",), properties=("lifecycle",), behaviour=STOCK_TORCH, kind="error", torch="<2.12",
    triggered=_a_group_added_steps,
))
