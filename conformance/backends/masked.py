"""``masked``: ``torch.masked.MaskedTensor``, as the Adagrad tutorial writes it.

The gradient's specified entries become the mask (materialized zeros included); updates are
MaskedTensor arithmetic turned back into tensors with ``to_tensor(0)``.
"""

from __future__ import annotations

import warnings

import torch
from torch.masked import masked_tensor

from conformance.core.types import RunContext, Unsupported
from conformance.backends.base import Backend
from conformance.backends.dense import adagrad_steps, sgd_gradient, sparse_adam_steps
from conformance.ops.masked_mean import MaskedMeanInputs
from conformance.ops import optimizer_record  # the optimizer records, looked up by name (docs/architecture.md)
from conformance.ops.optimizers.inputs import OptimizerInputs
from conformance.core.tensors import to_torch


def masked(data: torch.Tensor, mask: torch.Tensor, requires_grad: bool = False):
    """``masked_tensor(data, mask)``; a dtype MaskedTensor rejects becomes Unsupported."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MaskedTensor's prototype warning
        try:
            return masked_tensor(data, mask, requires_grad=requires_grad)
        except TypeError as exc:
            if "not supported in MaskedTensor" in str(exc):
                raise Unsupported(str(exc)) from exc
            raise


def coalesce_masked(inputs, ctx: RunContext):
    raise Unsupported("MaskedTensor has no coalesce: it stores a dense or already-coalesced layout")


def adagrad_masked(inputs: OptimizerInputs, ctx: RunContext):
    def update(param, state_sum, g, mask, eps, clr):
        masked_grad = masked(g, mask)
        state_sum = state_sum + masked_grad.pow(2).to_tensor(0)
        std = masked(state_sum, mask).sqrt().add(eps)
        return param.add((masked_grad / std).to_tensor(0), alpha=-clr), state_sum, std.to_tensor(0)

    return adagrad_steps(inputs, ctx, update)


def sparse_adam_masked(inputs: OptimizerInputs, ctx: RunContext):
    optimizer_record("sparse_adam").hyperparameters(inputs.hyperparameters)  # torch's constructor errors come first
    param = ctx.place("param", to_torch(inputs.param, ctx.dtype, ctx.torch_device))
    masked(param, torch.ones_like(param, dtype=torch.bool))  # dtype check even with no steps

    def update(param, exp_avg, exp_avg_sq, g, mask, beta1, beta2, eps, step_size):
        masked_grad = masked(g, mask)
        exp_avg = exp_avg + ((masked_grad - masked(exp_avg, mask)) * (1 - beta1)).to_tensor(0)
        exp_avg_sq = exp_avg_sq + ((masked_grad.pow(2) - masked(exp_avg_sq, mask)) * (1 - beta2)).to_tensor(0)
        denom = masked(exp_avg_sq, mask).sqrt().add(eps)
        # step_size * update, rounded, then subtracted, as torch does; not add(alpha=-step_size), which
        # raises where the bias-corrected step size is beyond the dtype (lr 1000, betas (0.999, 0.9) in float16)
        return param - step_size * (masked(exp_avg, mask) / denom).to_tensor(0), exp_avg, exp_avg_sq

    return sparse_adam_steps(inputs, ctx, update)


def sgd_masked(inputs: OptimizerInputs, ctx: RunContext):
    """The gradient's (and the momentum buffer's) specified entries as masks; the update is
    ``param.add(masked_step.to_tensor(0), alpha=-lr)``."""
    h = optimizer_record("sgd").hyperparameters(inputs.hyperparameters)
    m, dampening = h["momentum"], h["dampening"]
    param = ctx.place("param", to_torch(inputs.param, ctx.dtype, ctx.torch_device))
    masked(param, torch.ones_like(param, dtype=torch.bool))  # dtype check even with no steps
    buf = buf_mask = layout = None
    for grad in inputs.grads:
        g, mask, layout = sgd_gradient(h, grad, param, ctx, layout)
        step = masked(g, mask)
        if m != 0:
            if buf is None:
                buf, buf_mask = g.clone(), mask.clone()
            else:
                buf_mask = buf_mask | mask
                buf = (masked(buf, buf_mask) * m + masked(g, buf_mask) * (1 - dampening)).to_tensor(0)
            if h["nesterov"]:
                both = mask | buf_mask
                step = masked(g, both) + masked(buf, both) * m
            else:
                step = masked(buf, buf_mask)
        param = param.add(step.to_tensor(0), alpha=-h["lr"])
    return {"param": param}


def masked_mean_masked(inputs: MaskedMeanInputs, ctx: RunContext):
    values = ctx.place("values", to_torch(inputs.values, ctx.dtype, ctx.torch_device))
    mask = ctx.place("mask", to_torch(inputs.mask, None, ctx.torch_device))
    leaf = masked(values, mask, requires_grad=True)
    result = leaf.mean()
    result.backward()
    value = result.get_data() if bool(result.get_mask()) else torch.tensor(float("nan"), dtype=ctx.dtype)
    return {"value": value.detach(), "grad": leaf.grad.to_tensor(0)}


class MaskedBackend(Backend):
    name = "masked"
    description = "torch.masked.MaskedTensor, as the tutorial writes it"

    def run(self, op, inputs, ctx: RunContext):
        try:
            return super().run(op, inputs, ctx)
        except TypeError as exc:
            # An aten op MaskedTensor has no handler for, e.g. the unsqueeze_copy that XLA's
            # functionalization emits in backward: MaskedTensor does not support it.
            text = str(exc)
            if "Multiple dispatch failed" in text and "MaskedTensor" in text:
                first = text.strip().splitlines()[0]
                raise Unsupported(f"MaskedTensor on {ctx.device}: {first}") from exc
            raise


BACKEND = MaskedBackend({
    "coalesce": coalesce_masked,
    "adagrad": adagrad_masked,
    "sparse_adam": sparse_adam_masked,
    "masked_mean": masked_mean_masked,
    "sgd": sgd_masked,
})
