"""What ops, backends and the harness all use, kept below all of them: where an item runs
(:class:`RunContext`) and how an implementation says it cannot run it (:class:`Unsupported`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


class Unsupported(Exception):
    """Raised by a backend or candidate that does not implement an op, dtype, device or input.

    The harness reports it as the outcome ``unsupported``: never a pass, a failure,
    or a silent fallback to another backend.
    """


@dataclass
class RunContext:
    """Where and how one item runs, and a place for backends to record extra facts."""

    device: str
    dtype: torch.dtype
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def torch_device(self) -> torch.device:
        from conformance.devices import torch_device

        return torch_device(self.device)
