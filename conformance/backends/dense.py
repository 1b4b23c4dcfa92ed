"""``dense``: strided tensors and a boolean mask -- masked semantics with no sparse layout.

Each gradient is accumulated into a dense tensor (``index_put_`` with ``accumulate=True``) with a
boolean mask of its specified entries; updates are ``torch.where(mask, updated, old)``. This is
the form that runs on any device, XLA included.
"""

from __future__ import annotations

import math

import torch

from conformance.core.types import RunContext, Unsupported
from conformance.backends.base import Backend
from conformance.ops.masked_mean import MaskedMeanInputs, differentiate
from conformance.ops import optimizer_record  # the optimizer records, looked up by name (docs/architecture.md)
from conformance.ops.optimizers.inputs import OptimizerInputs
from conformance.ops.optimizers.sgd_models import buffer_layout
from conformance.ops.optimizers.sparse_adam_models import bias_corrected_step_size
from conformance.core.tensors import CooArray, to_torch


DENSE_LIMIT = 10_000_000  # elements a densified sparse tensor may have (the spec loader's ELEMENT_BUDGET)


def dense_with_mask(coo: CooArray, ctx: RunContext, role: str = "") -> tuple[torch.Tensor, torch.Tensor]:
    """(dense sum of the entries, mask over the sparse dims) on the item's device and dtype; its indices
    and values in the layouts the example gives ``<role>indices`` and ``<role>values``."""
    if math.prod(coo.size) > DENSE_LIMIT:
        raise Unsupported(f"the dense backend would allocate {math.prod(coo.size):,} elements for this sparse tensor "
                          f"(limit {DENSE_LIMIT:,})")
    device = ctx.torch_device
    index = tuple(ctx.place(f"{role}indices", torch.from_numpy(coo.indices.copy()).to(device)))
    values = ctx.place(f"{role}values", to_torch(coo.values, ctx.dtype, device))
    dense = torch.zeros(coo.size, dtype=ctx.dtype, device=device)
    mask = torch.zeros(coo.sparse_shape, dtype=torch.bool, device=device)
    written, marked = dense, mask
    if coo.sparse_dim == 0:  # every entry at the one empty index: a leading dim of 1, indexed by zeros
        index = (torch.zeros(coo.indices.shape[1], dtype=torch.int64, device=device),)
        written, marked = dense.unsqueeze(0), mask.unsqueeze(0)  # views: the puts land in dense and mask
    written.index_put_(index, values, accumulate=True)
    marked.index_put_(index, torch.ones((), dtype=torch.bool, device=device).expand(coo.indices.shape[1]))
    return dense, mask


def broadcast_mask(mask: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """A mask over the sparse dims, expanded over the dense (hybrid) dims."""
    return mask.reshape(*mask.shape, *([1] * (len(shape) - mask.dim()))).expand(shape)


def coalesce_dense(inputs: CooArray, ctx: RunContext):
    dense, mask = dense_with_mask(inputs, ctx)
    indices = mask.nonzero().T  # row-major order is lexicographic order
    # no sparse dim: indices (0, nnz) select nothing to stack, so the one entry is the whole tensor
    values = dense[tuple(indices)] if inputs.sparse_dim else dense.unsqueeze(0)[: indices.shape[1]]
    return {"indices": indices, "values": values, "nnz": indices.shape[1],
            "size": list(inputs.size), "is_coalesced": True}


def step_gradient(grad, param: torch.Tensor, ctx: RunContext):
    """(dense gradient, mask over the parameter's shape, mask over the sparse dims or None if dense)."""
    if isinstance(grad, CooArray):
        dense, sparse_mask = dense_with_mask(grad, ctx, "grad.")
        return dense, broadcast_mask(sparse_mask, param.shape), sparse_mask
    return ctx.place("grad", to_torch(grad, ctx.dtype, ctx.torch_device)), torch.ones_like(param, dtype=torch.bool), None


def adagrad_steps(inputs: OptimizerInputs, ctx: RunContext, update) -> dict:
    """Adagrad's documented loop (maximize, weight decay, the decayed lr) around one formulation's
    ``update(param, state_sum, g, mask, eps, clr) -> (param, state_sum, std)``: the dense and
    masked backends differ only there."""
    adagrad = optimizer_record("adagrad")
    h = adagrad.hyperparameters(inputs.hyperparameters)
    param = ctx.place("param", to_torch(inputs.param, ctx.dtype, ctx.torch_device))
    state_sum = torch.full_like(param, h["initial_accumulator_value"])
    std_values = None
    for step, grad in enumerate(inputs.grads, start=1):
        g, mask, sparse_mask = step_gradient(grad, param, ctx)
        if h["maximize"]:
            g = -g
        if h["weight_decay"] != 0:
            if sparse_mask is not None:
                raise RuntimeError(str(adagrad.sparse_weight_decay_error))
            g = g + h["weight_decay"] * param
        clr = h["lr"] / (1 + (step - 1) * h["lr_decay"])
        param, state_sum, std = update(param, state_sum, g, mask, h["eps"], clr)
        std_values = specified_values(std, sparse_mask)
    return adagrad_outputs(param, state_sum, std_values, inputs.steps)


def adagrad_dense(inputs: OptimizerInputs, ctx: RunContext):
    def update(param, state_sum, g, mask, eps, clr):
        state_sum = torch.where(mask, state_sum + g * g, state_sum)
        std = state_sum.sqrt() + eps
        return torch.where(mask, param - clr * (g / std), param), state_sum, std

    return adagrad_steps(inputs, ctx, update)


def specified_values(dense: torch.Tensor, sparse_mask: torch.Tensor | None) -> torch.Tensor:
    """The entries a step's gradient specified, in coalesced order (all of them for a dense gradient)."""
    return dense[tuple(sparse_mask.nonzero().T)] if sparse_mask is not None else dense.flatten()


def adagrad_outputs(param: torch.Tensor, state_sum: torch.Tensor, std_values: torch.Tensor | None,
                    steps: int) -> dict:
    """The adagrad op's outputs; ``std`` only when a step ran."""
    outputs = {"param": param, "state_sum": state_sum, "step": float(steps)}
    if std_values is not None:
        outputs["std"] = std_values
    return outputs


def sparse_adam_steps(inputs: OptimizerInputs, ctx: RunContext, update) -> dict:
    """SparseAdam's documented loop (sparse gradients only, maximize, a step with no entries skipped,
    the bias-corrected step size) around one formulation's
    ``update(param, exp_avg, exp_avg_sq, g, mask, beta1, beta2, eps, step_size) -> (param, exp_avg, exp_avg_sq)``:
    the dense and masked backends differ only there."""
    sparse_adam = optimizer_record("sparse_adam")
    h = sparse_adam.hyperparameters(inputs.hyperparameters)
    beta1, beta2 = h["betas"]
    param = ctx.place("param", to_torch(inputs.param, ctx.dtype, ctx.torch_device))
    exp_avg = torch.zeros_like(param)
    exp_avg_sq = torch.zeros_like(param)
    for step, grad in enumerate(inputs.grads, start=1):
        if not isinstance(grad, CooArray):
            raise RuntimeError(str(sparse_adam.dense_gradient_error))
        g, mask, _ = step_gradient(grad, param, ctx)
        if h["maximize"]:
            g = -g
        if grad.indices.shape[1] == 0:
            continue
        step_size = bias_corrected_step_size(h["lr"], beta1, beta2, step)
        param, exp_avg, exp_avg_sq = update(param, exp_avg, exp_avg_sq, g, mask, beta1, beta2, h["eps"], step_size)
    return {"param": param, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq, "step": float(inputs.steps)}


def sparse_adam_dense(inputs: OptimizerInputs, ctx: RunContext):
    def update(param, exp_avg, exp_avg_sq, g, mask, beta1, beta2, eps, step_size):
        exp_avg = torch.where(mask, exp_avg + (g - exp_avg) * (1 - beta1), exp_avg)
        exp_avg_sq = torch.where(mask, exp_avg_sq + (g * g - exp_avg_sq) * (1 - beta2), exp_avg_sq)
        param = torch.where(mask, param - step_size * (exp_avg / (exp_avg_sq.sqrt() + eps)), param)
        return param, exp_avg, exp_avg_sq

    return sparse_adam_steps(inputs, ctx, update)


def sgd_gradient(h: dict, grad, param: torch.Tensor, ctx: RunContext, layout: bool | None):
    """One SGD step's gradient as the dense and masked backends prepare it: torch's sparse/dense add
    errors and the buffer's layout after the step (:func:`conformance.ops.optimizers.sgd_models.buffer_layout`), then the
    dense gradient with maximize and weight_decay applied, and its mask: ``(g, mask, layout)``."""
    layout = buffer_layout(h, isinstance(grad, CooArray), layout)
    g, mask, _ = step_gradient(grad, param, ctx)
    if h["maximize"]:
        g = -g
    if h["weight_decay"] != 0:
        g = g + h["weight_decay"] * param
    return g, mask, layout


def sgd_dense(inputs: OptimizerInputs, ctx: RunContext):
    h = optimizer_record("sgd").hyperparameters(inputs.hyperparameters)
    m = h["momentum"]
    param = ctx.place("param", to_torch(inputs.param, ctx.dtype, ctx.torch_device))
    buf = buf_mask = layout = None
    for grad in inputs.grads:
        g, mask, layout = sgd_gradient(h, grad, param, ctx, layout)
        if m != 0:
            if buf is None:
                buf, buf_mask = g.clone(), mask.clone()
            else:
                buf, buf_mask = buf * m + g * (1 - h["dampening"]), buf_mask | mask
            if h["nesterov"]:
                g, mask = g + buf * m, mask | buf_mask
            else:
                g, mask = buf, buf_mask
        param = torch.where(mask, param - h["lr"] * g, param)
    return {"param": param}


def where_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Static-shape masked mean: ``where`` keeps NaN/inf under the mask out of value and gradient."""
    return torch.where(mask, values, torch.zeros((), dtype=values.dtype, device=values.device)).sum() / mask.sum()


def masked_mean_dense(inputs: MaskedMeanInputs, ctx: RunContext):
    return differentiate(where_masked_mean, inputs, ctx)


class DenseBackend(Backend):
    name = "dense"
    description = "strided tensors and a boolean mask (torch.where)"


BACKEND = DenseBackend({
    "coalesce": coalesce_dense,
    "adagrad": adagrad_dense,
    "sparse_adam": sparse_adam_dense,
    "masked_mean": masked_mean_dense,
    "sgd": sgd_dense,
})
