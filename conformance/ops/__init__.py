"""The ops under test, by name: each module of this package that defines ``OP`` (an :class:`Op`)
is one op's record -- contract, NumPy reference, strategies, properties. A new op is a new module."""

from __future__ import annotations

import importlib
import pkgutil

from conformance.ops.base import GeneratedProperty, Op

__all__ = ["OPS", "GeneratedProperty", "Op"]


def _discover() -> dict[str, Op]:
    ops: dict[str, Op] = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        op = getattr(module, "OP", None)
        if isinstance(op, Op):
            ops[op.name] = op
    return ops


OPS: dict[str, Op] = _discover()
