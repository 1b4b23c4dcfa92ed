"""The one item pipeline that spec cases, generated properties and benchmarks share.

:func:`placements` is the one expansion of a thing to run into backend x device x dtype under the
command line's selection. :class:`ConformanceItem` is the one base of the three item kinds: it
carries its kind and identity as data (``item.record``, which every outcome and results record is
built from), skips an unavailable device with the reason, and maps ``Unsupported`` to the outcome
unsupported. A kind only says what it runs (``run``) and how its failure reads.
:func:`warmed_up_last` starts the backends' slow one-time setup and runs their items last;
:func:`first_calls_made` makes each backend's first call of each op before any item's timer starts;
in the thread the items run in; a first call that does not return within its limit is stopped, a hung
call, and the items of its backend and op are not run (:class:`HungFirstCall`).
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterable, Iterator, Protocol

import pytest
import torch

from conformance.backends.base import Backend
from conformance.core.compare import warm_up_comparison
from conformance.core.interrupts import SignalWatch, raised_by_code
from conformance.core.devices import unavailable_reason
from conformance.core.record import ItemRecord, Kind
from conformance.ops import OPS
from conformance.run import outcomes
from conformance.run.native_hangs import capped
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

    kind: Kind = "case"

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
        op = self.record.get("op")
        hung = self.config.stash.get(HUNG_FIRST_CALLS, {}).get((self.backend.name, op)) if op is not None else None
        if hung is not None:
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
    """A backend's first call of an op that did not return within its limit: stopped there in this
    process, or in an earlier worker of this run, which the watchdog ended (it was stuck in C). An
    item of the same backend and op is then an ``error`` (``timed_out``) without being run: the process
    may still hold what the call left (a lock, an import half made), so a result of the item could not
    be trusted, and running it would cost its own timeout and the worker for the same hang."""

    backend: str
    op: str
    message: str
    limit: float = 0.0  # seconds it was given


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

    The calls are made in this thread, where the items run (a candidate is called only from the
    thread that imported it), each backend's given ``limit(backend)`` seconds (0: no limit) from their
    start; a call still running then is stopped, a hung call (:class:`HungFirstCall`, returned), and
    the next backend's calls are made (in order of their limits, the longest first). ``watch``, when
    given, is armed for each backend's calls at their limit plus a grace: a call stuck in C (holding
    the GIL or not) cannot be stopped, and the watchdog ends the process instead.
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
        return (f"the first call of {', '.join(slow)} had not returned within its limit before any item ran and "
                f"was stopped: it hangs, or imports slowly; the items of {', '.join(slow)} are errors, not run "
                f"(--conformance-timeout raises the limit)"), hung
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


class FirstCallStopped(BaseException):
    """Raised in a first call past its limit (:class:`Deadline`); a BaseException, as a timeout is, so
    that the code under test's ``except Exception`` does not swallow it."""


class Deadline:
    """Past ``seconds`` (0: never) after entering, a watcher thread sends SIGALRM to the thread that
    entered, whose handler raises :class:`FirstCallStopped` there while ``calling`` is set: a call
    waiting in Python code or in a system call stops at its limit, in the thread it was made in. Code
    stuck in C never sees it; the native watchdog (:class:`FirstCallsWatch`) is for that. Off outside
    the main thread or without SIGALRM (Windows): ``passed`` is then never set."""

    def __init__(self, seconds: float):
        self.seconds, self.calling = seconds, False
        self.passed, self.done, self.lock = threading.Event(), False, threading.Lock()
        self.timer: threading.Timer | None = None
        self.previous: Any = None

    def __enter__(self) -> "Deadline":
        if self.seconds and hasattr(signal, "pthread_kill") and threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGALRM, self._stop)
            self.timer = threading.Timer(capped(self.seconds), self._fire, (threading.get_ident(),))
            self.timer.daemon = True
            self.timer.start()
        return self

    def _fire(self, ident: int) -> None:
        with self.lock:
            if not self.done:
                self.passed.set()
                signal.pthread_kill(ident, signal.SIGALRM)

    def _stop(self, signum: int, frame: Any) -> None:
        if self.calling and self.passed.is_set():
            self.calling = False
            raise FirstCallStopped()

    def __exit__(self, *exc_info: Any) -> None:
        if self.timer is None:
            return
        self.calling = False
        with self.lock:  # no signal is sent past this point (one sent before is handled, and ignored, here)
            self.done = True
        self.timer.cancel()
        signal.signal(signal.SIGALRM, signal.SIG_DFL if self.previous is None else self.previous)


def _first_calls_of(backend: Backend, ops: list[str], seconds: float,
                    watch: FirstCallsWatch | None) -> HungFirstCall | None:
    """Make ``backend``'s first call of each of ``ops`` in this thread, the one the items run in (a
    thread-affine library refuses, or breaks on, a call from another thread), within ``seconds`` (0: no
    limit) of their start: the call still running then is stopped (:class:`Deadline`), and returned as a
    hung call; None when every call returned in time. What a call raises is left to the items to report;
    a Ctrl-C is the run's."""
    name, stopped, started = backend.name, None, time.monotonic()
    if watch is not None and seconds:
        watch.arm(seconds)
    try:
        with Deadline(seconds) as deadline:
            for op in ops:
                examples = OPS[op].explicit_examples("float32")
                if not examples:
                    continue
                if watch is not None:
                    watch.making(first_call_label(name, op), seconds)
                try:
                    with SignalWatch():
                        deadline.calling = True
                        backend.run(op, examples[0], RunContext("cpu", torch.float32))
                except FirstCallStopped:
                    stopped = op
                    break
                except KeyboardInterrupt as exc:
                    if not raised_by_code(exc):
                        raise
                except BaseException:  # noqa: BLE001 - the items report what a backend raises
                    pass
                finally:
                    deadline.calling = False
                if deadline.passed.is_set():  # returned past the limit: the next ones are left to the items
                    break
    finally:
        if watch is not None:
            watch.cancel()
    if stopped is None:
        return None
    return HungFirstCall(name, stopped, limit=seconds, message=(
        f"not run: {name}'s first call of {stopped} (its first explicit example, float32 on cpu), made "
        f"before any item ran, had not returned {round(time.monotonic() - started, 1):g} s after it started "
        f"(its limit: {seconds:g} s) and was stopped there: it hangs, or its first use takes longer than the "
        f"limit (a slow import? a larger --conformance-timeout raises the limit). An item of {name}/{stopped} is "
        f"not run: the process may still hold what the call left (a lock, a half-made import)"))
