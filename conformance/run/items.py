"""The one item pipeline that spec cases, generated properties and benchmarks share.

:func:`placements` is the one expansion of a thing to run into backend x device x dtype under the
command line's selection. :class:`ConformanceItem` is the one base of the three item kinds: it
carries its kind and identity as data (``item.record``, which every outcome and results record is
built from), skips an unavailable device with the reason, and maps ``Unsupported`` to the outcome
unsupported. A kind only says what it runs (``run``) and how its failure reads.
:func:`warmed_up_last` starts the backends' slow one-time setup and runs their items last;
:func:`first_calls_made` makes each backend's first call of each op before any item's timer starts;
a first call that does not return within its limit is a hung call, and the items of its backend and op
are not run while it runs (:class:`HungFirstCall`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterable, Iterator, Protocol

import pytest
import torch

from conformance.backends.base import Backend
from conformance.core.compare import warm_up_comparison
from conformance.core.devices import unavailable_reason
from conformance.core.record import ItemRecord
from conformance.ops import OPS
from conformance.run import outcomes
from conformance.core.types import RunContext, Unsupported


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
        hung = self.config.stash.get(HUNG_FIRST_CALLS, {}).get((self.backend.name, self.record.get("op")))
        if hung is not None and hung.blocks():
            self.record["timed_out"] = True  # a hang of its backend on its op: the circuit breaker counts it
            raise FirstCallHung(hung.message)
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


class FirstCallHung(Exception):
    """An item not run: its backend's first call of its op hung (:class:`HungFirstCall`)."""


@dataclass
class HungFirstCall:
    """A backend's first call of an op that did not return within its limit: in this process
    (``thread``, the call still running there) or in an earlier worker of this run, which the
    watchdog ended (``thread`` None: it held the GIL). While it runs, an item of the same backend and
    op is an ``error`` (``timed_out``) without being run: the process already has a call of that code
    stuck in it (a lock it holds, an import under way), so a result of the item could not be trusted,
    and running it would cost its own timeout and the worker for the same hang. A first call that
    returns late (a very slow import) blocks only the items that start before it returns."""

    backend: str
    op: str
    message: str
    thread: threading.Thread | None = None
    limit: float = 0.0  # seconds it was given

    def blocks(self) -> bool:
        return self.thread is None or self.thread.is_alive()


HUNG_FIRST_CALLS = pytest.StashKey[dict[tuple[str, str], HungFirstCall]]()


class FirstCallsWatch(Protocol):
    """The native side of the first calls' limit (conformance.run.timeouts.FirstCallsWatchdog)."""

    def making(self, label: str, seconds: float) -> None: ...

    def arm(self, seconds: float) -> None: ...

    def cancel(self) -> None: ...


def first_call_label(backend: str, op: str) -> str:
    return f"{backend}/{op}"


def first_calls_made(items: list[pytest.Item], limit: Callable[[Backend], float],
                     watch: FirstCallsWatch | None = None) -> tuple[str | None, list[HungFirstCall]]:
    """Each selected backend's first call of each op, made once before any item runs (per process:
    each xdist worker makes its own), so that what a first call costs -- a candidate's library
    imported lazily, torch's modules imported on first use -- is not counted against the first item's
    timeout. Uses the op's first explicit example in float32 on cpu (the first example the op's
    generated items run); what it raises is left to the items to report.

    Each backend's calls run in a thread of their own, given ``limit(backend)`` seconds (0: no limit)
    from their start; a call still running then is a hung call (:class:`HungFirstCall`, returned),
    and the next backend's calls are made (in order of their limits, the longest first). ``watch``,
    when given, is armed for each backend's calls at their limit plus a grace: a call that holds the
    GIL keeps this thread from ever seeing the limit pass, and the watchdog ends the process instead.
    Returns (a one-line warning or None, the hung calls). The suite's own comparison is warmed up
    first (:func:`~conformance.core.compare.warm_up_comparison`)."""
    warm_up_comparison()
    firsts = _first_calls_to_make(items)
    hung: list[HungFirstCall] = []
    limits = {name: limit(backend) for name, (backend, _) in firsts.items()}
    # the most generous limit first (unlimited, 0, before all): what the first calls share -- torch's own
    # modules imported on first use, seconds on a loaded machine -- is paid under it, not under a
    # candidate's shorter one
    for name in sorted(limits, key=lambda name: -limits[name] if limits[name] else float("-inf")):
        backend, ops = firsts[name]
        hung_call = _first_calls_of(backend, ops, limits[name], watch)
        if hung_call is not None:
            hung.append(hung_call)
    slow = [first_call_label(call.backend, call.op) for call in hung]
    if slow:
        return (f"the first call of {', '.join(slow)} had not returned within its limit before any item ran: it "
                f"hangs, or imports slowly; the items of {', '.join(slow)} that start while it runs are errors, "
                f"not run (--conformance-timeout raises the limit)"), hung
    return None, hung


def _first_calls_to_make(items: list[pytest.Item]) -> dict[str, tuple[Backend, list[str]]]:
    """Backend name -> (the backend, the ops of its items in order): the first calls to make, for the
    cpu items of backends that are not the oracle, have no slow setup of their own and are not skipped."""
    firsts: dict[str, tuple[Backend, list[str]]] = {}
    for item in items:
        op = getattr(item, "record", {}).get("op")
        backend = getattr(item, "backend", None)
        if isinstance(item, ConformanceItem) and op in OPS and backend is not None and not backend.is_oracle \
                and item.device == "cpu" and backend.warm_up.__func__ is Backend.warm_up \
                and item.get_closest_marker("skip") is None:
            ops = firsts.setdefault(backend.name, (backend, []))[1]
            if op not in ops:
                ops.append(op)
    return firsts


def _first_calls_of(backend: Backend, ops: list[str], seconds: float,
                    watch: FirstCallsWatch | None) -> HungFirstCall | None:
    """Make ``backend``'s first call of each of ``ops`` in a thread of their own, waiting ``seconds``
    (0: no limit) for them; the call still running then, as a hung call, or None."""
    name = backend.name
    current: list[str] = []  # the op whose first call is under way
    given_up = threading.Event()  # set past the limit: the thread makes no more calls
    making = threading.Thread(target=_make_first_calls, args=(backend, ops, seconds, current, given_up, watch),
                              name=f"conformance-first-calls-{name}", daemon=True)
    started = time.monotonic()
    if watch is not None and seconds:
        watch.arm(seconds)
    making.start()
    try:
        making.join(seconds or None)
    finally:
        if watch is not None:
            watch.cancel()
    if not making.is_alive():
        return None
    given_up.set()
    op = current[0] if current else "?"
    return HungFirstCall(name, op, thread=making, limit=seconds, message=(
        f"not run: {name}'s first call of {op} (its first explicit example, float32 on cpu), made "
        f"before any item ran, had not returned {round(time.monotonic() - started, 1):g} s after it started "
        f"(its limit: {seconds:g} s) and is still running in this process: it hangs, or its first use "
        f"takes longer than the limit (a slow import? a larger --conformance-timeout raises the limit). "
        f"An item of {name}/{op} that starts while it runs is not run"))


def _make_first_calls(backend: Backend, ops: list[str], seconds: float, current: list[str],
                      given_up: threading.Event, watch: FirstCallsWatch | None) -> None:
    """The first-calls thread: ``backend``'s first call of each op, the op under way in ``current``,
    until the caller gives up (``given_up``); what a call raises is left to the items to report."""
    for op in ops:
        examples = OPS[op].explicit_examples("float32")
        if not examples or given_up.is_set():
            continue
        current[:] = [op]
        if watch is not None:
            watch.making(first_call_label(backend.name, op), seconds)
        try:
            backend.run(op, examples[0], RunContext("cpu", torch.float32))
        except BaseException:  # noqa: BLE001 - the items report what a backend raises
            pass
    current.clear()
