"""Optimizers that are stock torch except for one interaction of two settings (issue 50): each passes
wherever one of the two is at its default, so only a configuration that sets both shows it -- what the
configurations property's covering array draws (conformance/ops/optimizers/configurations.py). Each
class names the configuration that exposes it in ``EXPOSED_BY``."""

from __future__ import annotations


import torch


def _dense_grads(group):
    return [p for p in group["params"] if p.grad is not None and not p.grad.is_sparse]


class _DocsOrderMaximize:
    """maximize negates the decayed gradient, as the docs read (-(g + wd * p)); torch negates the gradient
    before adding the decay (-g + wd * p, pytorch#149476). Torch's own step, handed g + 2 wd p on dense
    gradients where both are set: torch then computes -(g + 2 wd p) + wd p = -g - wd p."""

    EXPOSED_BY = {"weight_decay": 0.1, "maximize": True, "steps": "dense"}

    @torch.no_grad()
    def step(self, closure=None):
        saved = {}
        for group in self.param_groups:
            if group["maximize"] and group["weight_decay"]:
                for p in _dense_grads(group):
                    saved[p] = p.grad
                    p.grad = p.grad + 2 * group["weight_decay"] * p
        loss = super().step(closure)
        for p, grad in saved.items():
            p.grad = grad
        return loss


class DocsOrderMaximizeSGD(_DocsOrderMaximize, torch.optim.SGD):
    """SGD's maximize in the documentation's order (pytorch#149476)."""


class DampenedFirstBufferSGD(torch.optim.SGD):
    """The momentum buffer's first value is dampened ((1 - dampening) * g); torch starts it at g."""

    EXPOSED_BY = {"momentum": 0.5, "dampening": 0.5}

    @torch.no_grad()
    def step(self, closure=None):
        saved = {}
        for group in self.param_groups:
            if group["momentum"] and group["dampening"]:
                for p in group["params"]:
                    if p.grad is not None and "momentum_buffer" not in self.state.get(p, {}):
                        saved[p] = p.grad
                        p.grad = p.grad * (1 - group["dampening"])
        loss = super().step(closure)
        for p, grad in saved.items():
            p.grad = grad
        return loss


class DecoupledDecayMomentumSGD(torch.optim.SGD):
    """Weight decay applied to the parameter beside the momentum step (p -= lr * wd * p), not added to the
    gradient the buffer takes: the same as torch without momentum, not with it."""

    EXPOSED_BY = {"momentum": 0.5, "weight_decay": 0.1, "steps": "dense"}

    @torch.no_grad()
    def step(self, closure=None):
        decoupled = []
        for group in self.param_groups:
            if group["momentum"] and group["weight_decay"]:
                before = [(p, p.clone()) for p in _dense_grads(group)]
                decoupled.append((group, group["weight_decay"], before))
                group["weight_decay"] = 0.0
        try:
            loss = super().step(closure)
        finally:
            for group, weight_decay, before in decoupled:
                group["weight_decay"] = weight_decay
                for p, old in before:
                    p.add_(old, alpha=-group["lr"] * weight_decay)
        return loss


class DocsOrderMaximizeAdagrad(_DocsOrderMaximize, torch.optim.Adagrad):
    """Adagrad's maximize in the documentation's order (-(g + wd * p)); torch negates g first."""


class _HandDenseAdagrad(torch.optim.Adagrad):
    """torch's Adagrad, its dense step written out by hand (sparse gradients: torch's own step)."""

    def _dense_step(self, p, group):
        state = self.state[p]
        state["step"] += 1
        step = state["step"].item()
        grad = -p.grad if group["maximize"] else p.grad
        decayed = grad.add(p, alpha=group["weight_decay"]) if group["weight_decay"] else grad
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state["sum"].addcmul_(self._accumulated(grad, decayed), self._accumulated(grad, decayed), value=1)
        p.addcdiv_(decayed, self._std(state["sum"], group["eps"]), value=-clr)

    def _accumulated(self, grad, decayed):
        return decayed

    def _std(self, state_sum, eps):
        return state_sum.sqrt().add_(eps)

    @torch.no_grad()
    def step(self, closure=None):
        hidden = {}
        for group in self.param_groups:
            for p in _dense_grads(group):
                self._dense_step(p, group)
                hidden[p], p.grad = p.grad, None  # torch's step leaves it alone
        loss = super().step(closure)
        for p, grad in hidden.items():
            p.grad = grad
        return loss


class EpsInsideRootOnDenseAdagrad(_HandDenseAdagrad):
    """On dense steps, eps inside the square root (sqrt(sum + eps)); sparse steps are torch's: a layout's
    own code path with its own formula, visible where eps is not negligible."""

    EXPOSED_BY = {"eps": 0.25, "steps": "dense"}

    def _std(self, state_sum, eps):
        return (state_sum + eps).sqrt()


class UndecayedSumAdagrad(_HandDenseAdagrad):
    """Weight decay in the update but not in the accumulated square (sum += g * g, with g before decay)."""

    EXPOSED_BY = {"weight_decay": 0.1, "steps": "dense"}

    def _accumulated(self, grad, decayed):
        return grad


class NonEmptyStepsDecayAdagrad(torch.optim.Adagrad):
    """lr_decay counts only the steps whose gradient specifies an entry (an empty sparse gradient still
    increments torch's step, and torch's decay counts it)."""

    EXPOSED_BY = {"lr_decay": 0.25, "steps": "empty"}

    @torch.no_grad()
    def step(self, closure=None):
        restore = []
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                empty = p.grad.is_sparse and p.grad._nnz() == 0
                state["steps_with_entries"] = state.get("steps_with_entries", 0) + (0 if empty else 1)
                if group["lr_decay"] and not empty:
                    torch_step = state["step"].item() + 1  # what torch's decay will count
                    ours = state["steps_with_entries"]
                    factor = (1 + (torch_step - 1) * group["lr_decay"]) / (1 + (ours - 1) * group["lr_decay"])
                    restore.append((group, group["lr"]))
                    group["lr"] = group["lr"] * factor  # one parameter per group in the configurations
        loss = super().step(closure)
        for group, lr in reversed(restore):
            group["lr"] = lr
        return loss


class BiasCorrectedDenominatorSparseAdam(torch.optim.SparseAdam):
    """SparseAdam with Adam's other eps placement: sqrt(v / bc2) + eps and a step of lr / bc1; torch's is
    lr * sqrt(bc2) / bc1 over sqrt(v) + eps. The same where eps is negligible beside sqrt(v)."""

    EXPOSED_BY = {"eps": 0.25}

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                grad = (-p.grad if group["maximize"] else p.grad).coalesce()
                indices, values = grad._indices(), grad._values()

                def sparse(v):
                    return torch.sparse_coo_tensor(indices, v, grad.size())

                old_m = state["exp_avg"].sparse_mask(grad)._values()
                m_update = values.sub(old_m).mul_(1 - beta1)
                state["exp_avg"].add_(sparse(m_update))
                old_v = state["exp_avg_sq"].sparse_mask(grad)._values()
                v_update = values.pow(2).sub_(old_v).mul_(1 - beta2)
                state["exp_avg_sq"].add_(sparse(v_update))
                bc1, bc2 = 1 - beta1 ** state["step"], 1 - beta2 ** state["step"]
                denom = (v_update + old_v).div(bc2).sqrt_().add_(group["eps"])
                p.add_(sparse(-(group["lr"] / bc1) * (m_update + old_m).div(denom)))
        return None


PLANTED = (DocsOrderMaximizeSGD, DampenedFirstBufferSGD, DecoupledDecayMomentumSGD, DocsOrderMaximizeAdagrad,
           EpsInsideRootOnDenseAdagrad, UndecayedSumAdagrad, NonEmptyStepsDecayAdagrad,
           BiasCorrectedDenominatorSparseAdam)
OP_OF = {torch.optim.SGD: "sgd", torch.optim.Adagrad: "adagrad", torch.optim.SparseAdam: "sparse_adam"}


def op_of(candidate: type) -> str:
    return next(op for base, op in OP_OF.items() if issubclass(candidate, base))


def real_accumulator_coalesce(t: torch.Tensor) -> torch.Tensor:
    """coalesce with an accumulator of the real dtype: right on real values, the imaginary parts of complex ones
    lost (coalesce x complex values: torch's test_coalesce runs cdouble)."""
    result = t.coalesce()
    if not result.is_complex():
        return result
    return torch.sparse_coo_tensor(result._indices(), result._values().real.to(result.dtype), result.size()).coalesce()
