"""Optimizers with an error made once per step, small enough to pass any short trajectory: each
keeps a hyperparameter in float32 while the parameter is float64 (a common slip when a constant is
built with ``torch.tensor(momentum)`` and its default dtype)."""

from __future__ import annotations

import torch


class Float32MomentumSGD(torch.optim.SGD):
    """torch's SGD with its momentum rounded to float32 (0.9 becomes 0.8999999761581421)."""

    def __init__(self, params, lr=1e-3, momentum=0.0, *args, **kwargs):
        super().__init__(params, lr, float(torch.tensor(momentum, dtype=torch.float32)), *args, **kwargs)


class Float32BetasSparseAdam(torch.optim.SparseAdam):
    """torch's SparseAdam with its betas rounded to float32: at beta2 = 0.9999 the second moment's
    ``1 - beta2`` is off by about 8e-5 of itself."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), *args, **kwargs):
        rounded = tuple(float(torch.tensor(b, dtype=torch.float32)) for b in betas)
        super().__init__(params, lr, rounded, *args, **kwargs)


class LrSlipAdagrad(torch.optim.Adagrad):
    """torch's Adagrad with a learning rate 1% too large: every step moves 1% too far."""

    def __init__(self, params, lr=1e-2, *args, **kwargs):
        super().__init__(params, lr * 1.01, *args, **kwargs)
