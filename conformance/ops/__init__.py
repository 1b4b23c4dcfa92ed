"""The ops under test, by name: each module holds one op's contract and NumPy reference."""

from __future__ import annotations

from conformance.ops.base import Op
from conformance.ops import adagrad, coalesce, masked_mean, masked_mean_compiles, sparse_adam

OPS: dict[str, Op] = {module.OP.name: module.OP for module in (coalesce, adagrad, sparse_adam, masked_mean,
                                                      masked_mean_compiles)}

