"""SGD's documented rules that its record, its NumPy reference and the backends' runners all follow
(torch/optim/sgd.py): torch's defaults and constructor checks, and the momentum buffer's layout with the
sparse/dense errors of torch's adds; beside the record, whose module the backends do not import."""

from __future__ import annotations

from types import MappingProxyType

SPARSE_DENSE_ADD_ERROR = "add(sparse, dense) is not supported. Use add(dense, sparse) instead."
NESTEROV_ERROR = "Nesterov momentum requires a momentum and zero dampening"
DEFAULTS = MappingProxyType({"lr": 1e-3, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False,
                             "maximize": False})


def sgd_hyperparameters(hyper: dict) -> dict:
    """Torch's defaults filled in, and torch's constructor checks (ValueError, torch's messages)."""
    h = {**DEFAULTS, **hyper}
    if h["lr"] < 0.0:
        raise ValueError(f"Invalid learning rate: {h['lr']}")
    if h["momentum"] < 0.0:
        raise ValueError(f"Invalid momentum value: {h['momentum']}")
    if h["weight_decay"] < 0.0:
        raise ValueError(f"Invalid weight_decay value: {h['weight_decay']}")
    if h["nesterov"] and (h["momentum"] <= 0 or h["dampening"] != 0):
        raise ValueError(NESTEROV_ERROR)
    return h


def buffer_layout(h: dict, sparse: bool, buffer_sparse: bool | None) -> bool | None:
    """Whether the momentum buffer is a sparse tensor after a step with a ``sparse`` (or dense)
    gradient (None: no buffer, ``buffer_sparse`` as before the step), raising torch's RuntimeError
    where the step adds a sparse and a dense tensor: weight_decay with a sparse gradient
    (``grad.add(param)``), a dense gradient into a sparse buffer (``buf.add_(grad)``), nesterov with
    a sparse gradient on a dense buffer (``grad.add(buf)``). Every implementation asks it."""
    if sparse and h["weight_decay"] != 0:
        raise RuntimeError(SPARSE_DENSE_ADD_ERROR)
    if h["momentum"] == 0:
        return None
    if buffer_sparse is None:
        return sparse  # the first step's buffer is the gradient itself
    if sparse != buffer_sparse and (buffer_sparse or h["nesterov"]):
        raise RuntimeError(SPARSE_DENSE_ADD_ERROR)
    return buffer_sparse
