"""The one item pipeline that spec cases, generated properties and benchmarks share.

:func:`placements` is the one expansion of a thing to run into backend x device x dtype under the
command line's selection. :class:`ConformanceItem` is the one base of the three item kinds: it
carries its kind and identity as data (``item.record``, which every outcome and results record is
built from), skips an unavailable device with the reason, and maps ``Unsupported`` to the outcome
unsupported. A kind only says what it runs (``run``) and how its failure reads.
:func:`warmed_up_last` starts the backends' slow one-time setup and runs their items last;
:func:`first_calls_made` makes each backend's first call of each op before any item's timer starts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterable, Iterator

import pytest

from conformance.backends.base import Backend
from conformance.core.devices import unavailable_reason
from conformance.core.record import ItemRecord
from conformance.run import outcomes
from conformance.core.types import Unsupported


@dataclass(frozen=True)
class Placement:
    """Where one item runs."""

    backend: Backend
    device: str
    dtype: str

    @property
    def id(self) -> str:
        return f"{self.backend.name}-{self.device}-{self.dtype}"


def placements(selection: Any, op: str, dtypes: Iterable[str], *, backends: Collection[str] | None = None,
               devices: Collection[str] | None = None, skip_backends: Collection[str] = (),
               accepts: Callable[[Backend], bool] | None = None) -> Iterator[Placement]:
    """Each selected backend (one that lacks ``op`` only if it lists its unimplemented ops, as
    unsupported), device it runs on and selected dtype, narrowed by what the thing itself allows:
    ``backends``/``devices`` (None: any), ``skip_backends``, ``accepts(backend)``."""
    dtypes = list(dtypes)
    for backend in selection.backends.values():
        if not backend.implements(op) and not backend.lists_unimplemented_ops:
            continue
        if (backends is not None and backend.name not in backends) or backend.name in skip_backends:
            continue
        if accepts is not None and not accepts(backend):
            continue
        for device in selection.devices:
            if not backend.runs_on(device) or (devices is not None and device not in devices):
                continue
            for dtype in dtypes:
                if selection.dtypes is None or dtype in selection.dtypes:
                    yield Placement(backend, device, dtype)


class ConformanceItem(pytest.Item):
    """One thing run on one placement; ``kind`` and ``identity`` (spec, case, op, ...) are its record."""

    kind: str = "case"

    def __init__(self, *, placement: Placement, identity: ItemRecord, **kwargs: Any):
        super().__init__(**kwargs)
        self.placement = placement
        self.backend, self.device, self.dtype = placement.backend, placement.device, placement.dtype
        self.add_marker(pytest.mark.conformance)
        self.record: ItemRecord = {"kind": self.kind, **identity, "backend": self.backend.name,
                                   "device": self.device, "dtype": self.dtype}
        reason = unavailable_reason(self.device)
        if reason:
            self.add_marker(pytest.mark.skip(reason=reason))

    @classmethod
    def placed(cls, parent: pytest.Collector, name: str, placement: Placement, **kwargs: Any) -> "ConformanceItem":
        """The item ``name[backend-device-dtype]`` under ``parent``."""
        return cls.from_parent(parent, name=f"{name}[{placement.id}]", placement=placement, **kwargs)

    def runtest(self) -> None:
        try:
            self.run()
        except Unsupported as exc:
            raise outcomes.UnsupportedSkip(f"unsupported: {exc}") from None

    def run(self) -> None:
        raise NotImplementedError


def warmed_up_last(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with those of the backends that have slow one-time setup (``Backend.warm_up``,
    started here for the devices they run on) moved after the others, in their order."""
    devices: dict[str, tuple[Backend, set[str]]] = {}
    for item in items:
        if isinstance(item, ConformanceItem) and item.get_closest_marker("skip") is None:
            devices.setdefault(item.backend.name, (item.backend, set()))[1].add(item.device)
    warming = {name for name, (backend, on) in devices.items() if backend.warm_up(on)}
    return sorted(items, key=lambda item: isinstance(item, ConformanceItem) and item.backend.name in warming)


def first_calls_made(items: list[pytest.Item], seconds: float) -> str | None:
    """Each selected backend's first call of each op, made once before any item runs (per process:
    each xdist worker makes its own), so that what a first call costs -- a candidate's library
    imported lazily, torch's modules imported on first use -- is not counted against the first item's
    timeout. Uses the op's first explicit example in float32 on cpu; what it raises is left to the
    items to report. Returns a one-line error when the calls took longer than ``seconds`` (0: no limit)."""
    from conformance.ops import OPS
    from conformance.core.types import RunContext

    firsts: dict[tuple[str, str], Backend] = {}
    for item in items:
        op = getattr(item, "record", {}).get("op")
        backend = getattr(item, "backend", None)
        if isinstance(item, ConformanceItem) and op in OPS and backend is not None and not backend.is_oracle \
                and item.device == "cpu" and backend.warm_up.__func__ is Backend.warm_up \
                and item.get_closest_marker("skip") is None:
            firsts.setdefault((backend.name, op), backend)
    if not firsts:
        return None

    def make_them() -> None:
        import torch

        for (_, op), backend in firsts.items():
            examples = OPS[op].explicit_examples("float32")
            if not examples:
                continue
            try:
                backend.run(op, examples[0], RunContext("cpu", torch.float32))
            except BaseException:  # noqa: BLE001 - the items report what a backend raises
                pass

    making = threading.Thread(target=make_them, name="conformance-first-calls", daemon=True)
    making.start()
    making.join(seconds or None)
    if making.is_alive():
        return (f"the first call of each op ({', '.join(sorted({f'{b}/{o}' for b, o in firsts}))}) took over "
                f"{seconds:g} s before any item ran (a slow import?); items may time out "
                f"(--conformance-timeout)")
    return None
