"""Implementations written the way users write them (issue 29, points 6, 9 and 10), each pinned by
tests/test_user_candidates.py:

- ``OwnWordsAdagrad`` refuses ``weight_decay`` with a sparse gradient, as torch does, in its own
  words (a RuntimeError of its own text): it conforms -- a refusal is judged by its kind, the text
  is the implementation's own (docs/candidates.md, "Errors");
- ``ValueErrorAdagrad`` refuses the same thing with a ValueError, which ``except RuntimeError``
  does not catch: it fails;
- ``NoEpsCheckAdagrad`` takes a negative eps where torch raises a ValueError: rejects-invalid fails,
  and names no mistake of values ("looks like" is for wrong results, not a missing refusal);
- the rest are wrong in a way users get wrong, and each failure names its mistake
  ("looks like: ..."): ``DenseUpdateAdagrad`` (NaN at entries the gradient does not specify),
  ``OutOfPlaceAdagrad`` and ``DeviceBetasSparseAdam`` (a step that does nothing),
  ``PooledStateAdagrad`` (nondeterministic), ``HalfUnsupportedAdagrad`` (a ``NotImplementedError``
  without text, shown by its type), ``NoMaximizeArgumentAdagrad`` (a constructor without one of
  torch's options: told how to decline it).
"""

from __future__ import annotations

import math

import torch

SPARSE_WEIGHT_DECAY = "Adagrad: weight decay is not supported with sparse gradients (use a dense gradient)"


def _refuses_sparse_weight_decay(optimizer: torch.optim.Optimizer, error: type[Exception]) -> None:
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None and p.grad.is_sparse and group["weight_decay"] != 0:
                raise error(SPARSE_WEIGHT_DECAY)


class OwnWordsAdagrad(torch.optim.Adagrad):
    """torch's Adagrad, but the refusal of weight_decay with a sparse gradient is checked first and
    worded its own way (a RuntimeError, as torch raises)."""

    @torch.no_grad()
    def step(self, closure=None):
        _refuses_sparse_weight_decay(self, RuntimeError)
        return super().step(closure)


class NoEpsCheckAdagrad(torch.optim.Adagrad):
    """torch's Adagrad without its check of eps: a negative eps is taken as given."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 **options):
        super().__init__(params, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                         initial_accumulator_value=initial_accumulator_value, eps=abs(eps), **options)
        for group in self.param_groups:
            group["eps"] = eps


class ValueErrorAdagrad(torch.optim.Adagrad):
    """The same refusal as a ValueError: ``except RuntimeError`` -- what code written against torch
    catches -- lets it through."""

    @torch.no_grad()
    def step(self, closure=None):
        _refuses_sparse_weight_decay(self, ValueError)
        return super().step(closure)


class DenseUpdateAdagrad(torch.optim.Adagrad):
    """Adagrad written with dense tensor ops: the accumulator is updated at the gradient's entries,
    then ``param.addcdiv_(dense gradient, sqrt(sum) + eps)`` runs over the whole tensor. Where an
    entry's accumulator is still 0 and eps is 0 -- or rounds to 0 in the dtype, as 1e-10 does in
    float16 -- that is 0/0: NaN at an entry the gradient does not specify."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                state["step"] += 1
                clr = group["lr"] / (1 + (state["step"].item() - 1) * group["lr_decay"])
                grad = -p.grad if group["maximize"] else p.grad
                if grad.is_sparse:
                    grad = grad.coalesce()
                    state["sum"].add_(torch.sparse_coo_tensor(grad._indices(), grad._values().pow(2), grad.shape))
                    grad = grad.to_dense()
                else:
                    state["sum"].addcmul_(grad, grad)
                p.addcdiv_(grad, state["sum"].sqrt().add_(group["eps"]), value=-clr)


class OutOfPlaceAdagrad(torch.optim.Adagrad):
    """The accumulator is updated in place, but the parameter update is written out of place
    (``p = p.add(...)``): it rebinds a local name and the parameter never moves."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                state["step"] += 1
                clr = group["lr"] / (1 + (state["step"].item() - 1) * group["lr_decay"])
                grad = (-p.grad if group["maximize"] else p.grad).coalesce()
                state["sum"].add_(torch.sparse_coo_tensor(grad._indices(), grad._values().pow(2), grad.shape))
                std = state["sum"].sparse_mask(grad)._values().sqrt_().add_(group["eps"])
                p = p.add(torch.sparse_coo_tensor(grad._indices(), grad._values() / std, grad.shape), alpha=-clr)  # noqa: PLW2901


class DeviceBetasSparseAdam(torch.optim.SparseAdam):
    """torch's SparseAdam arithmetic with the betas held as tensors of the parameter's dtype for
    the moment updates (as fused kernels keep hyperparameters on the device) and the bias
    corrections in Python floats. In bfloat16, beta1 = 0.999 is 1.0: 1 - beta1 = 0, exp_avg never
    leaves 0 and the parameter never moves."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.coalesce()
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                b1 = torch.tensor(beta1, dtype=p.dtype)
                b2 = torch.tensor(beta2, dtype=p.dtype)
                indices, values = grad._indices(), grad._values()
                if group["maximize"]:
                    values = -values
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                old_avg = exp_avg.sparse_mask(grad)._values()
                old_sq = exp_avg_sq.sparse_mask(grad)._values()
                avg_update = values.sub(old_avg).mul_(1 - b1)
                sq_update = values.pow(2).sub_(old_sq).mul_(1 - b2)
                exp_avg.add_(torch.sparse_coo_tensor(indices, avg_update, grad.shape))
                exp_avg_sq.add_(torch.sparse_coo_tensor(indices, sq_update, grad.shape))
                numer = avg_update.add_(old_avg)
                denom = sq_update.add_(old_sq).sqrt_().add_(group["eps"])
                step_size = group["lr"] * math.sqrt(1 - beta2 ** state["step"]) / (1 - beta1 ** state["step"])
                p.add_(torch.sparse_coo_tensor(indices, -step_size * numer.div_(denom), grad.shape))


class PooledStateAdagrad(torch.optim.Adagrad):
    """Keeps its accumulators in a pool shared by every instance, keyed by shape and dtype (a
    workspace cache meant to save allocations): a second optimizer on a parameter of the same
    shape continues from the first one's accumulator. Two runs of the same inputs differ."""

    _pool: dict = {}

    def __init__(self, params, *args, **kwargs):
        super().__init__(params, *args, **kwargs)
        for group in self.param_groups:
            for p in group["params"]:
                key = (tuple(p.shape), p.dtype, p.device.type)
                pooled = self._pool.setdefault(key, self.state[p]["sum"])
                self.state[p]["sum"] = pooled


class HalfUnsupportedAdagrad(torch.optim.Adagrad):
    """torch's Adagrad that does not do half precision yet, and says so with a bare
    ``raise NotImplementedError``: no text at all."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.dtype in (torch.float16, torch.bfloat16):
                    raise NotImplementedError
        return super().step(closure)


class NoMaximizeArgumentAdagrad(torch.optim.Adagrad):
    """torch's Adagrad behind a constructor written without ``maximize`` (nor foreach, fused...), as
    users write their own: an item that sets maximize gets a TypeError from the constructor."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
        super().__init__(params, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                         initial_accumulator_value=initial_accumulator_value, eps=eps)
