"""The optimizer ops: one record module per optimizer (``adagrad``, ``sgd``, ``sparse_adam``, each
defining ``OP``, found by :mod:`conformance.ops`' discovery) and the machinery they share:

- :mod:`.inputs`: a parameter and a trajectory of gradients, their schema and decoding, param groups;
- :mod:`.drive`: a ``torch.optim.Optimizer`` class stepped through them, its state read (and
  saved and loaded mid-trajectory);
- :mod:`.reference`: gradients as dense float64 arrays with masks, rounding bounds, trajectory tolerances;
- :mod:`.strategies`: the Hypothesis strategies of the optimizer properties;
- :mod:`.examples`: each dimension's explicit examples;
- :mod:`.base`: :class:`OptimizerOp`, the kind of record every optimizer declares.

A new optimizer is a new module here (``OP = OptimizerOp(name=..., ...)``, a declaration) and its ``specs/<op>.yaml``.
The names below are what the suite's other stages use."""

from __future__ import annotations

from conformance.ops.optimizers.base import OptimizerOp
from conformance.ops.optimizers.drive import run_optimizer, run_param_groups
from conformance.ops.optimizers.inputs import OptimizerInputs, ParamGroupsInputs, empty_gradient
from conformance.ops.optimizers.reference import dense_grad_and_mask, densified

__all__ = ["OptimizerInputs", "OptimizerOp", "ParamGroupsInputs", "dense_grad_and_mask", "densified",
           "empty_gradient", "run_optimizer", "run_param_groups"]
