"""Candidates that cannot do everything torch's constructor accepts, written as users write them."""

from __future__ import annotations

import sys
from pathlib import Path

from conformance import Unsupported

sys.path.insert(0, str(Path(__file__).parent))
from coverage import DenseBufferSGD  # noqa: E402 - beside this file


class NoDampeningSGD(DenseBufferSGD):
    """The documented SGD (beyond torch's sparse-buffer limitation, as DenseBufferSGD) without
    ``dampening``, which it refuses with ``conformance.Unsupported``."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False):
        if dampening != 0:
            raise Unsupported("dampening is not implemented")
        super().__init__(params, lr, momentum, dampening, weight_decay, nesterov, maximize=maximize)
