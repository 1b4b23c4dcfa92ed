"""The one item pipeline that spec cases, generated properties and benchmarks share.

:func:`placements` is the one expansion of a thing to run into backend x device x dtype under the
command line's selection. :class:`ConformanceItem` is the one base of the three item kinds: it
carries its kind and identity as data (``item.record``, which every outcome and results record is
built from), skips an unavailable device with the reason, and maps ``Unsupported`` to the outcome
unsupported. A kind only says what it runs (``run``) and how its failure reads.
:func:`warmed_up_last` starts the backends' slow one-time setup and runs their items last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterable, Iterator

import pytest

from conformance.backends.base import Backend
from conformance.devices import unavailable_reason
from conformance.record import ItemRecord
from conformance.run import outcomes
from conformance.types import Unsupported


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
