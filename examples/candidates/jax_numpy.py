"""JAX as a ``masked_mean`` candidate: ``jax.numpy.mean(values, where=mask)``, whose gradient JAX
itself computes (``jax.vjp``); a ``torch.autograd.Function`` hands both to torch's autograd.

    --conformance-impl masked_mean=examples.candidates.jax_numpy:masked_mean
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from examples.candidates._convert import from_numpy, to_numpy

jax.config.update("jax_enable_x64", True)


class _JaxMaskedMean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = jnp.asarray(to_numpy(values))
        where = jnp.asarray(to_numpy(mask))
        value, vjp = jax.vjp(lambda v: jnp.mean(v, where=where), x)
        ctx.vjp = vjp
        return from_numpy(value, values.dtype, values.device)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (grad,) = ctx.vjp(jnp.asarray(to_numpy(grad_output)))
        return from_numpy(grad, grad_output.dtype, grad_output.device), None


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return _JaxMaskedMean.apply(values, mask)
