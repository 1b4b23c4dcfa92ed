"""XLA device support: availability (with the reason when absent), the device,
graph sync, and counting the graph compilations a piece of work causes.

torch_xla is optional. Nothing here imports it at module import time; every
entry point degrades to a clear reason string when it is missing or broken.
Compile counts come from ``torch_xla.debug.metrics``: the number of
``CompileTime`` samples and the ``UncachedCompile`` counter, both taken as a
difference around the measured work (metrics are process-global and never
cleared here, so other measurements are not disturbed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Iterator

import torch

from conformance.core.record import COMPILES, XLA, compiles

XLA_DEVICE_NAME = "xla"


@functools.lru_cache(maxsize=None)
def xla_unavailable_reason() -> str | None:
    """None when an XLA device can run a computation here, else why not."""
    try:
        import torch_xla  # noqa: F401
    except ImportError as exc:
        return f"torch_xla is not installed ({exc})"
    except Exception as exc:  # a torch/torch_xla version mismatch raises OSError etc.
        return f"torch_xla failed to import: {type(exc).__name__}: {exc}"
    try:
        dev = _device()
        probe = (torch.ones(2, device=dev) * 2).sum()
        sync()
        if probe.cpu().item() != 4.0:
            return "XLA device returned a wrong result for a probe computation"
    except Exception as exc:
        return f"XLA device unusable: {type(exc).__name__}: {exc}"
    return None


def xla_available() -> bool:
    return xla_unavailable_reason() is None


def _device() -> torch.device:
    import torch_xla  # optional dependency

    if hasattr(torch_xla, "device"):  # torch_xla >= 2.7
        return torch_xla.device()
    import torch_xla.core.xla_model as xm  # optional dependency

    return xm.xla_device()


def xla_device() -> torch.device:
    """The default XLA device (e.g. ``xla:0``); raises with the reason if unavailable."""
    reason = xla_unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"XLA device unavailable: {reason}")
    return _device()


def xla_hardware() -> str:
    """The PJRT hardware type behind the XLA device, e.g. ``CPU`` or ``TPU``."""
    import torch_xla.runtime as xr  # optional dependency

    return xr.device_type()


def sync() -> None:
    """Cut the lazy graph and execute it (``torch_xla.sync``, formerly ``mark_step``)."""
    import torch_xla  # optional dependency

    if hasattr(torch_xla, "sync"):
        torch_xla.sync()
    else:
        import torch_xla.core.xla_model as xm  # optional dependency

        xm.mark_step()


def is_xla(device: torch.device | str) -> bool:
    return torch.device(device).type == XLA_DEVICE_NAME


@dataclasses.dataclass
class CompileCount:
    """Graph compilations observed during a measured block.

    ``compile_time_samples``: new samples of the ``CompileTime`` metric (one per
    XLA compilation); ``uncached_compile``: increase of the ``UncachedCompile``
    counter (compilations that missed the in-memory graph cache);
    ``cached_compile``: increase of ``CachedCompile`` (graph cache hits).
    """

    compile_time_samples: int = 0
    uncached_compile: int = 0
    cached_compile: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def _snapshot() -> tuple[int, int, int]:
    import torch_xla.debug.metrics as met  # optional dependency

    data = met.metric_data("CompileTime")
    samples = int(data[0]) if data else 0
    return (
        samples,
        int(met.counter_value("UncachedCompile") or 0),
        int(met.counter_value("CachedCompile") or 0),
    )


@contextlib.contextmanager
def count_compiles(sync_on_exit: bool = True) -> Iterator[CompileCount]:
    """Measure the compilations caused inside the block.

    The yielded :class:`CompileCount` is filled in when the block exits. With
    ``sync_on_exit`` (default) pending lazy work is executed before the final
    reading, so compilations of the block's graph are attributed to it.
    """
    count = CompileCount()
    before = _snapshot()
    try:
        yield count
    finally:
        if sync_on_exit:
            sync()
        after = _snapshot()
        count.compile_time_samples = after[0] - before[0]
        count.uncached_compile = after[1] - before[1]
        count.cached_compile = after[2] - before[2]


COMPILES_KEY = COMPILES  # the record's compile counts (conformance.core.record.Compiles), compiler "torch_xla"


@contextlib.contextmanager
def record_compiles(record: dict) -> Iterator[CompileCount]:
    """:func:`count_compiles`, writing the counts into ``record[COMPILES_KEY]`` on exit as torch_xla's
    (``{"compiler": "torch_xla", "counts": {...}}``; also when the block raises, so an errored run still
    shows what it compiled)."""
    count = CompileCount()
    try:
        with count_compiles() as count:
            yield count
    finally:
        record[COMPILES_KEY] = compiles(XLA, count.as_dict())
