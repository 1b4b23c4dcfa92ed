"""The devices a case can run on, whether each is available here, and why not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class Device:
    """A device kind: how to tell whether it is usable, and the torch device to use."""

    name: str
    probe: Callable[[], str | None]  # None when available, else the reason it is not
    make: Callable[[], torch.device]


def _probe_cpu() -> str | None:
    return None


def _probe_cuda() -> str | None:
    if not torch.cuda.is_available():
        return "cuda not available: torch.cuda.is_available() is False"
    return None


DEVICES: dict[str, Device] = {
    "cpu": Device("cpu", _probe_cpu, lambda: torch.device("cpu")),
    "cuda": Device("cuda", _probe_cuda, lambda: torch.device("cuda")),
}

DEFAULT_DEVICES = ("cpu", "cuda")

_unavailable_cache: dict[str, str | None] = {}


def unavailable_reason(name: str) -> str | None:
    """None when the device can be used in this process, else a sentence saying why not."""
    if name not in _unavailable_cache:
        _unavailable_cache[name] = DEVICES[name].probe()
    return _unavailable_cache[name]


def torch_device(name: str) -> torch.device:
    return DEVICES[name].make()
