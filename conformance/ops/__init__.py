"""The ops under test, by name: each module of this package or of its subpackages
(``optimizers/``) that defines ``OP`` (an :class:`conformance.ops.base.Op`) is one op's record --
contract, NumPy reference, strategies, properties. A new op is a new module.

:data:`OPS` is a registry: the stages above find a record by its name here, and the backends'
runners look up what they need of a record (an optimizer's defaults, torch's error messages) the
same way, so nothing outside ``ops/`` imports a record module (docs/architecture.md)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from conformance.ops.base import Op
    from conformance.ops.optimizers.base import OptimizerOp

__all__ = ["OPS", "optimizer_record"]


def _discover() -> dict[str, Op]:
    """Every record of the package, subpackages included, by op name (in name order). A module's
    ``OP`` must be an ``Op``: anything else there is a mistake in the record, said at import."""
    ops: dict[str, Op] = {}
    for module_info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        module = importlib.import_module(module_info.name)
        if not hasattr(module, "OP"):
            continue
        op = module.OP
        if not all(callable(getattr(op, method, None)) for method in ("reference", "decode_inputs", "properties")):
            raise TypeError(f"{module_info.name}.OP is a {type(op).__name__}, not an op record (an Op)")
        ops[op.name] = op
    return dict(sorted(ops.items()))


OPS: dict[str, Op] = _discover()


def optimizer_record(name: str) -> OptimizerOp:
    """``OPS[name]``, an optimizer record, as one: what a backend's runner reads of it (torch's defaults,
    ``hyperparameters``; its for-loop keywords) is OptimizerOp's."""
    return cast("OptimizerOp", OPS[name])
