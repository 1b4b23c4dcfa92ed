"""``sparse_adam``: optimizer steps with ``torch.optim.SparseAdam`` semantics.

Contract (torch/optim/_functional.py ``sparse_adam`` and the SparseAdam docs): one step count per
parameter, incremented on every ``step()`` even when the gradient has no entries (then nothing
else changes); the gradient is coalesced; at specified entries only (materialized zeros count as
specified) ``exp_avg += (g - exp_avg) * (1 - beta1)``, ``exp_avg_sq += (g**2 - exp_avg_sq) * (1 - beta2)``,
``param -= lr * sqrt(1 - beta2**step) / (1 - beta1**step) * exp_avg / (sqrt(exp_avg_sq) + eps)``
(eps added to the *uncorrected* root). ``maximize`` negates the gradient; a dense gradient raises
RuntimeError. Candidate: a ``torch.optim.Optimizer`` subclass with SparseAdam's constructor.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from conformance.core.divergences import STOCK_TORCH, ConditionalDivergence, register
from conformance.core.dtypes import OPMATH_ROUNDOFF
from conformance.core.tolerances import ErrorBound
from conformance.core.diagnosis import STEP_DOES_NOTHING
from conformance.core.types import Mistake
from conformance.ops import draw as d
from conformance.core.tensors import CooArray, rounder, TENSOR
from conformance.ops.base import dtype_only
from conformance.ops.coalesce import accumulation_differs, coalesce_sequential
from conformance.ops.optimizers.base import OPTIMIZER_STRATEGIES, OptimizerOp
from conformance.ops.optimizers.configurations import ConfigurationSpace
from conformance.ops.optimizers.inputs import negated, optimizer_inputs_schema, OptimizerInputs
from conformance.ops.optimizers.reference import dense_grad_and_mask, single_step_param_bounds, trajectory_bounds
from conformance.ops.optimizers.strategies import drawn_inputs, NEGATIVE
from conformance.ops.optimizers.sparse_adam_models import (DENSE_GRADIENT_ERROR, bias_corrected_step_size,
                                                           sparse_adam_hyperparameters)

def sparse_adam_reference(inputs: OptimizerInputs) -> dict[str, Any]:  # (step: a NumPy scalar)
    """SparseAdam in float64 NumPy, one masked update per step."""
    h = sparse_adam_hyperparameters(inputs.hyperparameters)
    beta1, beta2 = h["betas"]
    param = inputs.param.astype(np.float64).copy()
    exp_avg = np.zeros_like(param)
    exp_avg_sq = np.zeros_like(param)
    for step, grad in enumerate(inputs.grads, start=1):
        if isinstance(grad, np.ndarray):
            raise RuntimeError(DENSE_GRADIENT_ERROR)
        g, mask = dense_grad_and_mask(grad, param.shape)
        if h["maximize"]:
            g = -g
        if not mask.any():
            continue
        exp_avg = np.where(mask, exp_avg + (g - exp_avg) * (1 - beta1), exp_avg)
        exp_avg_sq = np.where(mask, exp_avg_sq + (g * g - exp_avg_sq) * (1 - beta2), exp_avg_sq)
        step_size = bias_corrected_step_size(h["lr"], beta1, beta2, step)
        param = np.where(mask, param - step_size * exp_avg / (np.sqrt(exp_avg_sq) + h["eps"]), param)
    return {"param": param, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq, "step": np.float64(inputs.steps)}


# ---------------------------------------------------------------- generated inputs

@st.composite
def hyperparameters(draw) -> dict:
    """Valid ``torch.optim.SparseAdam`` hyperparameters."""
    hyper = {"lr": draw(d.learning_rates()), "eps": draw(d.eps_values()), "betas": draw(d.betas())}
    if draw(st.booleans()):
        hyper["maximize"] = True
    return hyper


@st.composite
def invalid_inputs(draw, dtype: str = "float64") -> OptimizerInputs:
    """Inputs with exactly one documented error: an out-of-range hyperparameter (ValueError) or a
    dense gradient (RuntimeError)."""
    inputs = draw(drawn_inputs(OP, dtype, max_steps=2))
    hyper = dict(inputs.hyperparameters)
    problem = draw(st.sampled_from(["lr", "eps", "beta1", "beta2", "dense-gradient"]))
    if problem == "dense-gradient":
        grads = list(inputs.grads)
        step = draw(st.integers(0, len(grads) - 1))
        grads[step] = np.zeros(inputs.param.shape) if draw(st.booleans()) else inputs.param.copy()
        return OptimizerInputs(inputs.param, grads, hyper)
    if problem in ("lr", "eps"):
        hyper[problem] = draw(st.one_of(st.just(0.0), NEGATIVE))
    else:
        beta1, beta2 = hyper["betas"]
        bad = draw(st.sampled_from([1.0, 1.5, -0.1, -1.0]))
        hyper["betas"] = (bad, beta2) if problem == "beta1" else (beta1, bad)
    return OptimizerInputs(inputs.param, inputs.grads, hyper)


# ---------------------------------------------------------------- known mistakes (conformance.core.diagnosis)


def sparse_adam_with_slip(inputs: OptimizerInputs, *, ignore_maximize: bool = False, dense_moments: bool = False,
                          per_row_steps: bool = False, nonempty_steps: bool = False, step_shift: int = 0,
                          adam_eps: bool = False, whole_rows: bool = False) -> dict[str, Any]:  # (step: a NumPy scalar)
    """:func:`sparse_adam_reference` with one slip (each keyword is one known mistake): maximize
    ignored; dense Adam's moments (every entry decays and moves, every step); bias correction
    with a step count per entry (how often it was hit), with steps counted only on non-empty
    gradients, or with the next step's count; Adam's eps (after bias correction); an
    element-sparse gradient written as whole rows."""
    h = sparse_adam_hyperparameters(inputs.hyperparameters)
    beta1, beta2 = h["betas"]
    param = inputs.param.astype(np.float64).copy()
    exp_avg = np.zeros_like(param)
    exp_avg_sq = np.zeros_like(param)
    hits = np.zeros_like(param)
    counted = 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for step, grad in enumerate(inputs.grads, start=1):
            if isinstance(grad, np.ndarray):
                raise RuntimeError(DENSE_GRADIENT_ERROR)
            g, mask = dense_grad_and_mask(grad, param.shape)
            if h["maximize"] and not ignore_maximize:
                g = -g
            if dense_moments:
                mask = np.ones(param.shape, dtype=bool)
            elif not mask.any():
                continue
            if whole_rows and param.ndim > 1:
                rows = mask.reshape(mask.shape[0], -1).any(axis=1)
                mask = np.broadcast_to(rows.reshape(-1, *([1] * (param.ndim - 1))), param.shape).copy()
            counted += 1
            hits += mask
            exp_avg = np.where(mask, exp_avg + (g - exp_avg) * (1 - beta1), exp_avg)
            exp_avg_sq = np.where(mask, exp_avg_sq + (g * g - exp_avg_sq) * (1 - beta2), exp_avg_sq)
            t = hits if per_row_steps else (counted if nonempty_steps else step) + step_shift
            if adam_eps:
                update = h["lr"] / (1 - beta1**t) * exp_avg / (np.sqrt(exp_avg_sq) / np.sqrt(1 - beta2**t) + h["eps"])
            else:
                update = h["lr"] * np.sqrt(1 - beta2**t) / (1 - beta1**t) * exp_avg / (np.sqrt(exp_avg_sq) + h["eps"])
            param = np.where(mask, param - update, param)
    steps = counted if nonempty_steps else inputs.steps
    return {"param": param, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq, "step": np.float64(steps)}


def _slip(condition, **slip):
    def model(inputs: OptimizerInputs):
        return sparse_adam_with_slip(inputs, **slip) if condition(inputs) else None
    return model


def _has_empty_step(inputs: OptimizerInputs) -> bool:
    return any(isinstance(g, CooArray) and g.indices.shape[1] == 0 for g in inputs.grads)


def _always(inputs: OptimizerInputs) -> bool:
    return True


def _rejects_uncoalesced(inputs: OptimizerInputs, error: BaseException) -> bool:
    return "coalesc" in str(error).lower() and any(isinstance(g, CooArray) for g in inputs.grads)


MISTAKES = (
    Mistake("non-lazy moments", "dense Adam on the densified gradient: the moments of entries the gradient does not "
            "specify decay and those entries move (SparseAdam is lazy: only specified entries change)",
            _slip(_always, dense_moments=True)),
    Mistake("per-row step counts", "bias correction uses how often each entry was hit, not the optimizer's step "
            "count", _slip(_always, per_row_steps=True)),
    Mistake("empty steps not counted", "a step with an empty gradient does not advance the step count (torch's does), "
            "so later bias corrections use a smaller step", _slip(_has_empty_step, nonempty_steps=True)),
    Mistake("the next step's bias correction", "bias correction with step + 1 instead of step",
            _slip(_always, step_shift=1)),
    Mistake("no maximize", "maximize=True is ignored: the parameter descends instead of ascending",
            _slip(lambda inputs: bool(inputs.hyperparameters.get("maximize")), ignore_maximize=True)),
    Mistake("eps after bias correction", "Adam's placement: eps added to sqrt(exp_avg_sq / (1 - beta2**step)); "
            "SparseAdam adds it to the uncorrected root", _slip(_always, adam_eps=True)),
    Mistake("whole-row writes of element-sparse updates", "an element-sparse gradient is applied to the whole rows it "
            "touches: the other entries' moments decay", _slip(lambda i: i.param.ndim > 1, whole_rows=True)),
    Mistake("rejected uncoalesced gradients", "raises on an uncoalesced sparse gradient (duplicate or unsorted "
            "indices, what nn.Embedding(sparse=True) produces); torch's SparseAdam coalesces it",
            raises=_rejects_uncoalesced),
    STEP_DOES_NOTHING,
)


def sparse_adam_rounding_bounds(op: "OptimizerOp", inputs: OptimizerInputs, dtype: str,
                                accumulation_unit: float = OPMATH_ROUNDOFF) -> dict[str, tuple]:
    # both moments (two roundings each), sqrt, + eps, the quotient and the scaled step: eight
    return single_step_param_bounds(inputs, op.reference(inputs)["param"], dtype, intermediates=12)


def sparse_adam_reference_error_bound(inputs: OptimizerInputs) -> ErrorBound:
    return ErrorBound.times_default(8.0 * max(1, inputs.steps))


def sparse_adam_replay_in_dtype(inputs: OptimizerInputs, dtype: str, flags: set, accumulate: str) -> dict[str, Any]:
    q = rounder(dtype)
    h = sparse_adam_hyperparameters(inputs.hyperparameters)
    beta1, beta2 = h["betas"]
    param = inputs.param.astype(np.float64).copy()
    exp_avg = np.zeros_like(param)
    exp_avg_sq = np.zeros_like(param)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for step, grad in enumerate(inputs.grads, start=1):
            if not isinstance(grad, CooArray):
                raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
            grad = negated(grad, h["maximize"])
            if accumulation_differs(grad, dtype):
                flags.add("accumulation")
            coalesced = coalesce_sequential(grad, accumulate, round_to=dtype)
            if coalesced.indices.shape[1] == 0:
                continue
            index = tuple(coalesced.indices)
            g = coalesced.values
            old_avg, old_sq = exp_avg[index], exp_avg_sq[index]
            avg_update = q(q(g - old_avg) * (1 - beta1))
            exp_avg[index] = q(old_avg + avg_update)
            square = q(g * g)
            if np.any((square == 0) & (g != 0)):
                flags.add("underflow")
            sq_update = q(q(square - old_sq) * (1 - beta2))
            exp_avg_sq[index] = q(old_sq + sq_update)
            numer = q(avg_update + old_avg)
            denom = q(q(np.sqrt(q(sq_update + old_sq))) + h["eps"])
            if np.any(denom == 0):
                flags.add("underflow")
            step_size = h["lr"] * math.sqrt(1 - beta2**step) / (1 - beta1**step)
            param[index] = q(param[index] + q(-step_size * q(numer / denom)))
    return {"param": param, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq, "step": np.float64(inputs.steps)}


def sparse_adam_error_bounds(op: "OptimizerOp", inputs: OptimizerInputs, dtype: str, sensitivity) -> dict[str, Any]:
    bounds, b = trajectory_bounds(op.reference, inputs, dtype, sensitivity)
    bounds["exp_avg"] = ErrorBound(b.growth, 4 * b.u * b.steps * b.g_max + 4 * b.sensitivity.get("exp_avg", 0.0))
    # v + (g*g - v) * (1 - beta2) cancels when g*g << v: an absolute error of u * max(v, g*g)
    bounds["exp_avg_sq"] = ErrorBound(
        b.growth, 4 * b.u * b.steps * b.g_max**2 + 4 * b.sensitivity.get("exp_avg_sq", 0.0))
    return bounds


OP = OptimizerOp(
    name="sparse_adam",
    strategies=replace(OPTIMIZER_STRATEGIES, hyperparameters=hyperparameters, invalid=dtype_only(invalid_inputs)),
    layout_hyperparameters={"lr": 0.5, "eps": 0.25, "betas": (0.5, 0.75)},
    lifecycle_hyperparameters={"lr": 0.5, "eps": 0.25, "betas": (0.5, 0.75)},
    title="SparseAdam",
    dense_gradient_error=DENSE_GRADIENT_ERROR,
    invalid_summary="invalid hyperparameters and dense gradients raise torch's documented errors",
    # a large eps (added to the root before or after bias correction), uneven betas; then maximize
    explicit_hyperparameters=({"lr": 0.5, "eps": 0.25, "betas": (0.5, 0.75)},
                              {"lr": 0.5, "eps": 0.25, "betas": (0.5, 0.75), "maximize": True}),
    # dense and mixed steps are refused (DENSE_GRADIENT_ERROR, judged by rejects-invalid): not among its step kinds
    configuration_space=ConfigurationSpace({
        "lr": (1e-3, 0.5), "betas": ((0.9, 0.999), (0.5, 0.75)), "eps": (1e-8, 0.25), "maximize": (False, True)},
        step_kinds=("sparse", "empty")),
    long_trajectory_hyperparameters=({"lr": 0.01, "betas": (0.9, 0.9999)},),
    stock_backend="coo",
    # torch's implementations beside the for-loop step: none (torch 2.13's SparseAdam takes neither foreach
    # nor fused: TypeError), so the torch_paths backends have no sparse_adam items
    torch_paths=(),
    summary="torch.optim.SparseAdam steps: moments and parameter updated only at specified entries",
    candidate_contract="a torch.optim.Optimizer subclass with torch.optim.SparseAdam's constructor",
    mistakes=MISTAKES,
    torch_sums_duplicates_in_half=True,
    state_outputs={"exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq", "step": "step"},  # output -> state key
    inputs_schema=optimizer_inputs_schema({
        "lr": {"type": "number"},
        "betas": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
        "eps": {"type": "number"},
        "maximize": {"type": "boolean"},
    }),
    expected_schema={
        "type": "object", "additionalProperties": False, "minProperties": 1,
        "properties": {"param": TENSOR, "exp_avg": TENSOR, "exp_avg_sq": TENSOR, "step": {"type": "number"}},
    },
    torch_implementation=torch.optim.SparseAdam,
    rounding_bounds=sparse_adam_rounding_bounds,
    reference_error_bound=sparse_adam_reference_error_bound,
    replay_in_dtype=sparse_adam_replay_in_dtype,
    error_bounds=sparse_adam_error_bounds,
    hyperparameters=sparse_adam_hyperparameters,
    reference=sparse_adam_reference,
)


ACCEPTS_COMPLEX = register(ConditionalDivergence(
    "torch-sparse-adam-accepts-complex",
    "torch 2.1's and 2.2's SparseAdam accept a complex parameter and step it with complex arithmetic (exp_avg_sq of g * g, "
    "not |g|^2 per real pair), so it differs from the same steps on its torch.view_as_real; later releases refuse "
    "complex parameters (ValueError: SparseAdam does not support complex parameters); dated by its reproducer",
    "https://github.com/pytorch/pytorch/blob/v2.1.2/torch/optim/sparse_adam.py",
    ops=("sparse_adam",), properties=("complex-agrees",), behaviour=STOCK_TORCH, torch="<2.3",
    triggered=lambda inputs: True,
))
