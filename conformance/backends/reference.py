"""``reference``: the independent oracle -- each op's NumPy float64 reference, no torch math.

Inputs are already rounded to the item's dtype, so the reference answers "what is exact for
these inputs"; it runs on the ``cpu`` device only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conformance.backends.base import Backend, Runner
from conformance.ops import OPS

if TYPE_CHECKING:
    from conformance.ops.base import Op

# a spec's source key for golden values this oracle computed (a written counterexample's)
GOLDEN_SOURCE = "numpy-reference"


class ReferenceBackend(Backend):
    name = "reference"
    description = "NumPy float64 oracle (no torch math)"
    devices = ("cpu",)
    is_oracle = True

    def __init__(self):
        super().__init__({name: _runner(op) for name, op in OPS.items()})


def _runner(op: Op) -> Runner:
    """The runner of one op: its NumPy reference."""
    return lambda inputs, ctx: op.reference(inputs)


BACKEND = ReferenceBackend()
