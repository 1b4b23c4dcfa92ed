"""Stock torch's float16/bfloat16 arithmetic, modelled in NumPy: the known divergences.

The float64 NumPy references say what is *exact* for the inputs. Stock torch, in half
precision, departs from that in documented ways that are not bugs of the code under test:

* it sums the duplicates of a COO tensor in the tensor's own dtype, in input order, with no
  float32 accumulator (https://github.com/pytorch/pytorch/issues/84471) -- also inside the
  optimizers, which coalesce each gradient;
* its optimizers store their state in the parameter's dtype: in float16, ``sqrt(0) + eps`` is 0
  for any eps below the smallest subnormal (~6e-8) and ``g**2`` underflows to 0 for |g| < ~2.4e-4,
  so a specified zero (or tiny) gradient entry gives ``0/0 = NaN`` or ``g/0 = inf``.

:func:`emulate` replays torch's algorithm (torch/optim/adagrad.py and
torch/optim/_functional.py ``sparse_adam``, sparse branches) rounding to the dtype where torch
stores a tensor. A backend output that misses the reference but matches this model is reported
as the :class:`Divergence` :func:`explain` names (xfail with reason), not as a failure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance.ops.optimizer_steps import OptimizerInputs
from conformance.tensors import CooArray, quantize, torch_dtype

HALF_DTYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class Divergence:
    key: str
    reason: str
    link: str | None = None


HALF_ACCUMULATION = Divergence(
    "half-precision-accumulation",
    "torch sums duplicate entries of a float16/bfloat16 COO tensor in half precision (no float32 "
    "accumulator), so a sum of three or more duplicates can differ from the correctly rounded sum",
    "https://github.com/pytorch/pytorch/issues/84471",
)
FLOAT16_UNDERFLOW = Divergence(
    "float16-eps-underflow",
    "in float16, sqrt(state) + eps rounds to 0 when eps is below the smallest subnormal (~6e-8), and g**2 "
    "underflows for |g| < ~2.4e-4, so a specified zero or tiny gradient entry gives 0/0 = NaN or g/0 = inf "
    "where the float64 reference stays finite",
    "https://github.com/pytorch/pytorch/blob/main/torch/optim/adagrad.py",
)
HALF_PRECISION_STATE = Divergence(
    "half-precision-state",
    "the optimizer stores its state in float16/bfloat16 and rounds it at every step, which carries through "
    "the trajectory beyond the work-scaled tolerance (the result matches torch's algorithm replayed in that "
    "dtype)",
    None,
)


def _rounder(dtype: str):
    torch_type = torch_dtype(dtype)

    def q(x):
        x = np.asarray(x, dtype=np.float64)
        return quantize(x, torch_type).reshape(x.shape)  # quantize makes 0-d arrays 1-d

    return q


def coalesce_sequential(coo: CooArray, accumulate: str, round_to: str | None = None) -> CooArray:
    """Coalesce as torch's CPU kernel does: the indices flattened to one linear index and sorted
    with ``torch.sort`` (not stable: from 17 entries on, duplicates leave the sort in another order
    than the input's), duplicates added one after another in that order, each partial sum rounded
    to ``accumulate``; the sums are then rounded to ``round_to`` (default: ``accumulate``)."""
    acc, final = _rounder(accumulate), _rounder(round_to or accumulate)
    sparse_dim, nnz = coo.indices.shape
    if nnz == 0:
        return CooArray(coo.indices.copy(), coo.values.copy(), coo.size)
    order = _torch_coalesce_order(coo) if sparse_dim else np.arange(nnz)
    indices = coo.indices[:, order]
    values = coo.values[order]
    unique: list[np.ndarray] = []
    sums: list[np.ndarray] = []
    for position in range(nnz):
        if unique and np.array_equal(unique[-1], indices[:, position]):
            sums[-1] = acc(sums[-1] + values[position])
        else:
            unique.append(indices[:, position])
            sums.append(acc(values[position]))
    return CooArray(np.stack(unique, axis=1), final(np.stack(sums)), coo.size)


def _torch_coalesce_order(coo: CooArray) -> np.ndarray:
    """The permutation torch's coalesce visits the entries in: its unstable sort of the linear index."""
    import torch

    linear = np.ravel_multi_index(tuple(coo.indices), coo.sparse_shape) if coo.indices.shape[1] else \
        np.zeros(0, dtype=np.int64)
    return torch.sort(torch.from_numpy(np.asarray(linear, dtype=np.int64)), stable=False).indices.numpy()


def _accumulation_differs(coo: CooArray, dtype: str) -> bool:
    in_dtype = coalesce_sequential(coo, dtype).values
    rounded_once = coalesce_sequential(coo, "float64", round_to=dtype).values
    return not np.array_equal(in_dtype, rounded_once)


def _negated(grad, maximize: bool):
    if not maximize:
        return grad
    if isinstance(grad, CooArray):
        return CooArray(grad.indices, -grad.values, grad.size)
    return -grad


def _emulate_adagrad(inputs: OptimizerInputs, dtype: str, flags: set, accumulate: str) -> dict[str, np.ndarray]:
    from conformance.ops.adagrad import adagrad_hyperparameters

    q = _rounder(dtype)
    h = adagrad_hyperparameters(inputs.hyperparameters)
    eps = h["eps"]
    param = inputs.param.astype(np.float64).copy()
    state = q(np.full(param.shape, h["initial_accumulator_value"]))
    std_out = np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for step, grad in enumerate(inputs.grads, start=1):
            grad = _negated(grad, h["maximize"])
            clr = h["lr"] / (1 + (step - 1) * h["lr_decay"])
            if isinstance(grad, CooArray):
                if _accumulation_differs(grad, dtype):
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


def _emulate_sparse_adam(inputs: OptimizerInputs, dtype: str, flags: set, accumulate: str) -> dict[str, np.ndarray]:
    from conformance.ops.sparse_adam import sparse_adam_hyperparameters

    q = _rounder(dtype)
    h = sparse_adam_hyperparameters(inputs.hyperparameters)
    beta1, beta2 = h["betas"]
    param = inputs.param.astype(np.float64).copy()
    exp_avg = np.zeros_like(param)
    exp_avg_sq = np.zeros_like(param)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for step, grad in enumerate(inputs.grads, start=1):
            if not isinstance(grad, CooArray):
                raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
            grad = _negated(grad, h["maximize"])
            if _accumulation_differs(grad, dtype):
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


def _emulate(op: str, inputs: Any, dtype: str, accumulate: str | None = None) -> tuple[dict[str, np.ndarray], set]:
    flags: set = set()
    accumulate = accumulate or dtype
    if op == "coalesce":
        if _accumulation_differs(inputs, dtype):
            flags.add("accumulation")
        result = coalesce_sequential(inputs, accumulate, round_to=dtype)
        outputs = {"indices": result.indices, "values": result.values, "nnz": np.int64(result.indices.shape[1]),
                   "size": np.array(inputs.size, dtype=np.int64)}
    elif op == "adagrad":
        outputs = _emulate_adagrad(inputs, dtype, flags, accumulate)
    elif op == "sparse_adam":
        outputs = _emulate_sparse_adam(inputs, dtype, flags, accumulate)
    else:
        raise ValueError(f"no low-precision model of {op!r}")
    return outputs, flags


def emulate(op: str, inputs: Any, dtype: str, accumulate: str | None = None) -> dict[str, np.ndarray]:
    """Stock torch's result for ``op`` computed the way torch rounds in ``dtype``; with
    ``accumulate`` ("float32" for a half dtype), duplicates are summed in that precision instead
    -- what a correct implementation of the same formulas in ``dtype`` computes."""
    return _emulate(op, inputs, dtype, accumulate)[0]


def explain(op: str, inputs: Any, dtype: str) -> Divergence | None:
    """The known divergence that may explain a departure from the reference on these inputs,
    or None when none can (then a departure is a failure)."""
    if dtype not in HALF_DTYPES or op not in ("coalesce", "adagrad", "sparse_adam"):
        return None
    outputs, flags = _emulate(op, inputs, dtype)
    if op == "coalesce":
        return HALF_ACCUMULATION if "accumulation" in flags else None
    nonfinite = any(not np.all(np.isfinite(np.asarray(v, dtype=np.float64))) for v in outputs.values())
    if "underflow" in flags and nonfinite and dtype == "float16":
        return FLOAT16_UNDERFLOW
    if "accumulation" in flags:
        return HALF_ACCUMULATION
    return HALF_PRECISION_STATE
