"""The ops under test, by name: each module of this package or of its subpackages
(``optimizers/``) that defines ``OP`` (an :class:`Op`) is one op's record -- contract, NumPy
reference, strategies, properties. A new op is a new module."""

from __future__ import annotations

import importlib
import pkgutil

from conformance.ops.base import GeneratedProperty, Op

__all__ = ["OPS", "GeneratedProperty", "Op"]


def _discover() -> dict[str, Op]:
    """Every record of the package, subpackages included, by op name (in name order)."""
    ops: dict[str, Op] = {}
    for module_info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        module = importlib.import_module(module_info.name)
        op = getattr(module, "OP", None)
        if isinstance(op, Op):
            ops[op.name] = op
    return dict(sorted(ops.items()))


OPS: dict[str, Op] = _discover()
