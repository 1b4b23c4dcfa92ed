"""SparseAdam's documented rules that its record, its NumPy reference and the backends' runners all follow
(torch/optim/sparse_adam.py): torch's defaults and constructor checks, its error on a dense gradient, and the
bias-corrected step size; beside the record, whose module the backends do not import."""

from __future__ import annotations

import math
from types import MappingProxyType

DENSE_GRADIENT_ERROR = "SparseAdam does not support dense gradients, please consider Adam instead"
DEFAULTS = MappingProxyType({"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "maximize": False})


def sparse_adam_hyperparameters(hyper: dict) -> dict:
    """Torch's defaults filled in, and torch's constructor checks (ValueError, torch's messages)."""
    h = {**DEFAULTS, **hyper}
    if not 0.0 < h["lr"]:
        raise ValueError(f"Invalid learning rate: {h['lr']}")
    if not 0.0 < h["eps"]:
        raise ValueError(f"Invalid epsilon value: {h['eps']}")
    beta1, beta2 = h["betas"]
    if not 0.0 <= beta1 < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {beta1}")
    if not 0.0 <= beta2 < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {beta2}")
    return h


def bias_corrected_step_size(lr: float, beta1: float, beta2: float, step: int) -> float:
    """torch's ``lr * sqrt(1 - beta2**step) / (1 - beta1**step)``, step counted globally."""
    return lr * math.sqrt(1 - beta2**step) / (1 - beta1**step)
