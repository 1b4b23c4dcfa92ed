"""The devices a case can run on, whether each is available here, and why not, and what a
device measures around a run (XLA: graph compilations)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, ContextManager, Mapping

import torch


@dataclass(frozen=True)
class Device:
    """A device kind: how to tell whether it is usable, and the torch device to use."""

    name: str
    probe: Callable[[], str | None]  # None when available, else the reason it is not
    make: Callable[[], torch.device]
    # measure(record) -> context manager around a backend's run; writes its figures into record
    measure: Callable[[dict[str, Any]], ContextManager[Any]] | None = None


def _probe_cpu() -> str | None:
    return None


def _probe_cuda() -> str | None:
    if not torch.cuda.is_available():
        return "cuda not available: torch.cuda.is_available() is False"
    return None


def _probe_xla() -> str | None:
    # lazy: at module level the package would stand on 7 levels (tests/test_layout.py)
    from conformance.core.xla_support import xla_unavailable_reason

    return xla_unavailable_reason()


def _make_xla() -> torch.device:
    # lazy: at module level the package would stand on 7 levels (tests/test_layout.py)
    from conformance.core.xla_support import xla_device

    return xla_device()


def _measure_xla(record: dict[str, Any]) -> ContextManager[Any]:
    # lazy: at module level the package would stand on 7 levels (tests/test_layout.py)
    from conformance.core.xla_support import record_compiles

    return record_compiles(record)


DEVICES: Mapping[str, Device] = MappingProxyType({
    "cpu": Device("cpu", _probe_cpu, lambda: torch.device("cpu")),
    "cuda": Device("cuda", _probe_cuda, lambda: torch.device("cuda")),
    "xla": Device("xla", _probe_xla, _make_xla, _measure_xla),
})

DEFAULT_DEVICES = ("cpu", "cuda", "xla")

_unavailable_cache: dict[str, str | None] = {}


def unavailable_reason(name: str) -> str | None:
    """None when the device can be used in this process, else a sentence saying why not."""
    if name not in _unavailable_cache:
        _unavailable_cache[name] = DEVICES[name].probe()
    return _unavailable_cache[name]


def torch_device(name: str) -> torch.device:
    return DEVICES[name].make()


def measure(name: str, record: dict[str, Any]) -> ContextManager[Any]:
    """The device's measurement around one backend run (a no-op for most devices)."""
    device = DEVICES[name]
    return device.measure(record) if device.measure is not None else contextlib.nullcontext()
