"""optax as ``adagrad`` and ``sparse_adam`` candidates.

    --conformance-impl adagrad=examples.candidates.optax_optim:Adagrad
    --conformance-impl sparse_adam=examples.candidates.optax_optim:SparseAdam

optax transforms dense pytrees and has no sparse gradients, so each adapter picks a view:

- ``Adagrad``: the sparse gradient becomes dense (``BCOO.todense``, duplicates summed by JAX) and
  ``optax.adagrad`` updates the whole parameter; an unspecified entry has a zero gradient, which
  leaves its accumulator and parameter as they are, as torch's sparse path does.
- ``SparseAdam``: the gradient is coalesced (``BCOO.sum_duplicates``), the parameter and the moments
  are gathered at its entries and ``optax.adam`` updates that vector, with optax's own step ``count``
  (incremented on every step, as torch's); the results are scattered back (a lazy Adam).

The constructors are torch's (the classes subclass torch's), so hyperparameters are checked and
defaulted as torch does. optax has no ``lr_decay``, ``maximize`` or (sparse) ``weight_decay`` in
these transforms, and SparseAdam's dense-gradient error is torch's policy, not optax's: those
raise Unsupported. optax runs every dtype of the suite (float64 with ``jax_enable_x64``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch
from jax.experimental import sparse as jsparse

from conformance import Unsupported
from examples.candidates._convert import from_numpy, to_numpy

jax.config.update("jax_enable_x64", True)


def _bcoo(grad: torch.Tensor) -> jsparse.BCOO:
    return jsparse.BCOO((jnp.asarray(to_numpy(grad._values())), jnp.asarray(to_numpy(grad._indices()).T)),
                        shape=tuple(grad.shape))


class Adagrad(torch.optim.Adagrad):
    """torch.optim.Adagrad's constructor and state keys; ``optax.adagrad`` does the update."""

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise Unsupported("this optax adapter takes no closure")
        for group in self.param_groups:
            if group["lr_decay"] != 0:
                raise Unsupported("optax.adagrad has no lr_decay")
            if group["maximize"]:
                raise Unsupported("optax.adagrad has no maximize")
            if group["weight_decay"] != 0:
                raise Unsupported("optax.adagrad has no weight_decay (and torch rejects it for sparse gradients)")
            transform = optax.adagrad(learning_rate=float(group["lr"]),  # (a 0-d tensor lr too)
                                      initial_accumulator_value=group["initial_accumulator_value"],
                                      eps=group["eps"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "sum" not in state:  # a parameter of add_param_group: torch (>= 2.12) makes its state at its first step
                    state["step"] = torch.tensor(0.0)
                    state["sum"] = torch.full_like(p, group["initial_accumulator_value"],
                                                   memory_format=torch.preserve_format)
                param = jnp.asarray(to_numpy(p))
                grad = _bcoo(p.grad).todense() if p.grad.is_sparse else jnp.asarray(to_numpy(p.grad))
                opt_state = transform.init(param)
                opt_state = (opt_state[0]._replace(sum_of_squares=jnp.asarray(to_numpy(state["sum"]))),
                             *opt_state[1:])
                updates, opt_state = transform.update(grad, opt_state, param)
                p.copy_(from_numpy(optax.apply_updates(param, updates), p.dtype, p.device))
                state["sum"].copy_(from_numpy(opt_state[0].sum_of_squares, p.dtype, p.device))
                state["step"] += 1
        return None


class SparseAdam(torch.optim.SparseAdam):
    """torch.optim.SparseAdam's constructor and state keys; ``optax.adam`` updates the gathered entries."""

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise Unsupported("this optax adapter takes no closure")
        for group in self.param_groups:
            if group.get("maximize", False):
                raise Unsupported("optax.adam has no maximize")
            beta1, beta2 = group["betas"]
            transform = optax.adam(learning_rate=float(group["lr"]), b1=beta1, b2=beta2, eps=group["eps"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise Unsupported("optax.adam is a dense Adam: rejecting dense gradients is SparseAdam's "
                                      "policy, which optax has no counterpart of")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                grad = _bcoo(p.grad).sum_duplicates(remove_zeros=False)
                where = tuple(grad.indices.T)  # the coalesced entries: a gather, and a scatter below
                param = jnp.asarray(to_numpy(p))
                exp_avg = jnp.asarray(to_numpy(state["exp_avg"]))
                exp_avg_sq = jnp.asarray(to_numpy(state["exp_avg_sq"]))
                rows = param[where]
                opt_state = transform.init(rows)
                opt_state = (opt_state[0]._replace(count=jnp.asarray(int(state["step"].item()), dtype=jnp.int32),
                                                   mu=exp_avg[where], nu=exp_avg_sq[where]), *opt_state[1:])
                updates, opt_state = transform.update(grad.data, opt_state, rows)
                adam = opt_state[0]
                p.copy_(from_numpy(param.at[where].set(optax.apply_updates(rows, updates)), p.dtype, p.device))
                state["exp_avg"].copy_(from_numpy(exp_avg.at[where].set(adam.mu), p.dtype, p.device))
                state["exp_avg_sq"].copy_(from_numpy(exp_avg_sq.at[where].set(adam.nu), p.dtype, p.device))
                state["step"].fill_(int(adam.count))
        return None
