"""``reference``: the independent oracle -- each op's NumPy float64 reference, no torch math.

Inputs are already rounded to the item's dtype, so the reference answers "what is exact for
these inputs"; it runs on the ``cpu`` device only.
"""

from __future__ import annotations

from conformance.backends.base import Backend
from conformance.ops import OPS

# a spec's source key for golden values this oracle computed (a written counterexample's)
GOLDEN_SOURCE = "numpy-reference"


class ReferenceBackend(Backend):
    name = "reference"
    description = "NumPy float64 oracle (no torch math)"
    devices = ("cpu",)
    is_oracle = True

    def __init__(self):
        super().__init__({name: (lambda inputs, ctx, op=op: op.reference(inputs)) for name, op in OPS.items()})


BACKEND = ReferenceBackend()
