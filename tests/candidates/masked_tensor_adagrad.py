"""Adagrad written with ``torch.masked.MaskedTensor``, as torch's tutorial "Efficiently writing
"sparse" semantics for Adagrad with MaskedTensor" teaches (issue 43): a sparse gradient becomes a
MaskedTensor whose mask holds the gradient's specified entries, and the step is written on it

    state_sum = state_sum + masked_grad.pow(2).to_tensor(0)
    std = masked_tensor(state_sum, masked_grad.mask()).sqrt().add(eps)
    param = param.add((masked_grad / std).to_tensor(0), alpha=-clr)

with no indices or values in sight. A dense gradient takes torch's dense path (``addcmul_``,
``sqrt().add_(eps)``, ``addcdiv_``), with weight_decay; lr_decay, eps, initial_accumulator_value and
maximize are torch.optim.Adagrad's. Pinned by tests/test_masked_tensor_candidates.py
(docs/candidates.md, "Writing a candidate with MaskedTensor").

- ``MaskedTensorAdagrad`` is right and must pass. MaskedTensor refuses bfloat16 (a TypeError raised in
  torch.masked), so a sparse gradient of a bfloat16 parameter is ``unsupported`` with that reason.
- ``EpsInsideRootMaskedTensorAdagrad`` writes the tutorial's chain the other way round,
  ``.add(eps).sqrt()``: "eps inside the root".
- ``UnmaskedStdMaskedTensorAdagrad`` takes the gradient out of its MaskedTensor before dividing
  (``masked_grad.to_tensor(0) / std``) with std from the whole accumulator: the update runs over every
  entry, 0 / (sqrt(0) + 0) = NaN where an accumulator is still 0 and eps is 0 (or rounds to 0, as 1e-10
  does in float16): "NaN at entries the gradient does not specify".
"""

from __future__ import annotations

import warnings

import torch
from torch.masked import masked_tensor


PROTOTYPE_WARNING = "The PyTorch API of MaskedTensors is in prototype stage"


def masked_gradient(grad: torch.Tensor):
    """The sparse gradient as a MaskedTensor: its (coalesced) values, masked by its specified entries.

    The mask comes from the gradient's indices, not from ``grad != 0`` as the tutorial's example
    has it: an explicit zero is a specified entry, which torch updates (0 / (sqrt(0) + 0) is NaN
    there with eps = 0). Duplicates are summed by ``coalesce()`` before anything is squared -- the
    update is non-linear, as the tutorial says."""
    grad = grad.coalesce()
    specified = torch.ones_like(grad.values(), dtype=torch.bool)
    mask = torch.sparse_coo_tensor(grad.indices(), specified, grad.shape).to_dense()
    return masked_tensor(grad.to_dense(), mask)


class MaskedTensorAdagrad(torch.optim.Optimizer):
    """torch.optim.Adagrad with its sparse path written on MaskedTensor, as the tutorial does."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                 eps=1e-10, maximize=False):
        if isinstance(lr, torch.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        for name, value in (("learning rate", lr), ("lr_decay", lr_decay), ("weight_decay", weight_decay),
                            ("initial_accumulator_value", initial_accumulator_value), ("epsilon", eps)):
            if not 0.0 <= value:
                raise ValueError(f"Invalid {name}: {value}")
        defaults = {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value, "eps": eps, "maximize": maximize}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p: torch.Tensor, group: dict) -> dict:
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0)
            state["sum"] = torch.full_like(p, group["initial_accumulator_value"], memory_format=torch.preserve_format)
        return state

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = group["lr"].item() if isinstance(group["lr"], torch.Tensor) else group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self._init_state(p, group)  # a parameter of a group added later gets its state here
                state["step"] += 1
                clr = lr / (1 + (state["step"].item() - 1) * group["lr_decay"])
                grad = -p.grad if group["maximize"] else p.grad
                if grad.is_sparse:
                    if group["weight_decay"] != 0:
                        raise RuntimeError("weight_decay option is not compatible with sparse gradients")
                    with warnings.catch_warnings():  # every MaskedTensor made warns that the API is a prototype
                        warnings.filterwarnings("ignore", message=PROTOTYPE_WARNING, category=UserWarning)
                        self._sparse_update(p, state["sum"], masked_gradient(grad), clr, group["eps"])
                else:
                    if group["weight_decay"] != 0:
                        grad = grad.add(p, alpha=group["weight_decay"])
                    state["sum"].addcmul_(grad, grad, value=1)
                    std = state["sum"].sqrt().add_(group["eps"])
                    p.addcdiv_(grad, std, value=-clr)
        return loss

    @staticmethod
    def _sparse_update(p, state_sum, masked_grad, clr, eps):
        """The tutorial's lines, written in place on the accumulator and the parameter."""
        state_sum.add_(masked_grad.pow(2).to_tensor(0))
        std = masked_tensor(state_sum, masked_grad.get_mask()).sqrt().add(eps)
        p.add_((masked_grad / std).to_tensor(0), alpha=-clr)


class EpsInsideRootMaskedTensorAdagrad(MaskedTensorAdagrad):
    """WRONG: the tutorial's ``.sqrt().add(eps)`` chained the other way round, ``.add(eps).sqrt()``:
    std = sqrt(state_sum + eps), not sqrt(state_sum) + eps."""

    @staticmethod
    def _sparse_update(p, state_sum, masked_grad, clr, eps):
        state_sum.add_(masked_grad.pow(2).to_tensor(0))
        std = masked_tensor(state_sum, masked_grad.get_mask()).add(eps).sqrt()
        p.add_((masked_grad / std).to_tensor(0), alpha=-clr)


class UnmaskedStdMaskedTensorAdagrad(MaskedTensorAdagrad):
    """WRONG: the gradient leaves its MaskedTensor (``to_tensor(0)``) before the division, and std is
    taken from the whole accumulator, so the update runs over every entry: 0 / (sqrt(0) + eps) is
    0/0 = NaN wherever an accumulator is still 0 and eps is 0 or rounds to 0 in the dtype."""

    @staticmethod
    def _sparse_update(p, state_sum, masked_grad, clr, eps):
        state_sum.add_(masked_grad.pow(2).to_tensor(0))
        std = state_sum.sqrt().add(eps)
        p.add_(masked_grad.to_tensor(0) / std, alpha=-clr)


class ValueMaskMaskedTensorAdagrad(MaskedTensorAdagrad):
    """WRONG: masks by value, ``grad.to_dense() != 0``, as the tutorial's example builds its mask: an
    explicit zero of the gradient is a specified entry, which this leaves alone (specs/adagrad.yaml's
    ``explicit-zero-is-a-specified-entry``: with eps = 0 torch writes 0 / 0 = NaN there)."""

    @staticmethod
    def _sparse_update(p, state_sum, masked_grad, clr, eps):
        dense = masked_grad.get_data()
        MaskedTensorAdagrad._sparse_update(p, state_sum, masked_tensor(dense, dense != 0), clr, eps)
