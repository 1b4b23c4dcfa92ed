"""Adagrad's NumPy models (the record, :mod:`conformance.ops.optimizers.adagrad`, declares them): torch's
hyperparameter defaults and constructor checks, the float64 reference step, and the catalogue of
known mistakes, each modelled as the reference with one slip (:func:`adagrad_with_slip`), that
:mod:`conformance.core.diagnosis` names when a failing run looks like one."""

from __future__ import annotations

from typing import Any

import numpy as np
from types import MappingProxyType

from conformance.core.diagnosis import STEP_DOES_NOTHING
from conformance.core.dtypes import is_half
from conformance.core.tensors import CooArray, quantize
from conformance.core.types import Mistake
from conformance.ops.coalesce import coalesce_reference, round_toward_zero
from conformance.ops.optimizers.inputs import OptimizerInputs
from conformance.ops.optimizers.reference import dense_grad_and_mask

# torch's RuntimeError for weight_decay with a sparse gradient, and torch.optim.Adagrad's defaults
WEIGHT_DECAY_ERROR = "weight_decay option is not compatible with sparse gradients"
DEFAULTS = MappingProxyType({"lr": 1e-2, "lr_decay": 0.0, "weight_decay": 0.0, "initial_accumulator_value": 0.0,
                             "eps": 1e-10, "maximize": False})


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


def adagrad_reference(inputs: OptimizerInputs) -> dict[str, Any]:  # (step: a NumPy scalar)
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
        std_values = std[tuple(_coalesced_indices(grad))] if isinstance(grad, CooArray) else std[mask]
    return {"param": param, "state_sum": state_sum, "step": np.float64(inputs.steps), "std": std_values}


def _coalesced_indices(grad: CooArray) -> np.ndarray:
    return coalesce_reference(grad)["indices"]


# ---------------------------------------------------------------- known mistakes (conformance.core.diagnosis)

def _rows(array: np.ndarray) -> np.ndarray:
    return array.reshape(array.shape[0], -1)


def adagrad_with_slip(inputs: OptimizerInputs, *, squares_each: bool = False, eps_inside_root: bool = False,
                      rowwise: bool = False, ignore_maximize: bool = False, lr_decay_shift: int = 0,
                      sparse_weight_decay: bool = False, whole_rows: bool = False,
                      truncate_to: str | None = None, per_entry: bool = False, everywhere: bool = False,
                      eps: float | None = None) -> dict[str, Any]:  # (step: a NumPy scalar)
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
            if squares_each and isinstance(grad, CooArray):
                squares = np.zeros_like(param)
                np.add.at(squares, tuple(grad.indices), grad.values.astype(np.float64) ** 2)
            if h["weight_decay"] != 0:
                if sparse and not sparse_weight_decay:
                    raise RuntimeError(WEIGHT_DECAY_ERROR)
                g = np.where(mask, g + h["weight_decay"] * param, g)
                squares = g * g
            clr = h["lr"] / (1 + (step - 1 + lr_decay_shift) * h["lr_decay"])
            if per_entry and isinstance(grad, CooArray) and h["weight_decay"] == 0:
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
                truncated = round_toward_zero(param, truncate_to)
                assert truncated is not None  # (a half dtype: truncating_model models no other)
                param = truncated
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
