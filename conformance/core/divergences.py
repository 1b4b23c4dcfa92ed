"""Known divergences: the one declaration of a documented way an implementation departs from the
spec, reported as xfail with its reason, never as a pass or a failure.

A :class:`Divergence` says where it applies (ops, backends, devices, dtypes, properties or spec
cases: None means any), why (reason, link) and, where there is one, what the diverging
implementation does (a NumPy ``model`` of its outputs, or the ``rounding`` mode it uses). A spec
case's ``known_divergences:`` entries load into it (conformance.specs.load); the Python records
declare theirs with :func:`register`: an op's (stock torch's param-group behaviour), a backend's
documented idioms, stock torch's half-precision arithmetic (conformance.cases.lowprec) and the
Triton interpreter's rounding. :func:`lookup` is the one way to find those that apply.

A divergence of stock torch (``behaviour: stock-torch``) applies to whatever returns torch's
result on the same inputs, judged on the outputs (conformance.judging.verdict); one that torch no longer
shows is reported as stale.

A divergence that torch fixed (or brought in) in some release says which releases show it: ``torch``,
a PEP 440 specifier set on the running torch's release (its local label, ``+cpu``, dropped), e.g.
``"<2.14"``. On any other torch it does not apply: its items pass or fail on their own, as they would
without it, and never read as an unexpected pass of a divergence that version does not have.

A divergence of ``kind: error`` pins the exception it expects: ``raises`` (a type name, matched against the
exception's classes and those of the exceptions it was raised from) and ``match`` (a regular expression
searched in that exception's message), so that no other error -- the suite's own, a missing module --
passes as the known one. A stock-torch divergence names its ``finding``: the torch-only reproducer
``findings/reproducers/<finding>.py`` that dates it across releases (``conformance.results.dating``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable

import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version

STOCK_TORCH = "stock-torch"  # behaviour: what stock torch does, whichever implementation shows it


@dataclass(frozen=True)
class Divergence:
    """A documented departure from the spec: where it applies, why, and how it behaves."""

    key: str
    reason: str
    link: str | None = None
    ops: tuple[str, ...] | None = None
    backends: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    properties: tuple[str, ...] | None = None  # generated properties by name, or spec cases by id
    behaviour: str | None = None  # STOCK_TORCH: stock torch's own; None: the named backends' idiom
    model: Callable[[Any], Any] | None = None  # inputs -> what the diverging implementation returns
    rounding: str | None = None  # the rounding mode used instead of round-to-nearest-even
    kind: str = "mismatch"  # what a spec item's xfail catches: mismatch, error or any
    torch: str | None = None  # the torch releases that show it (PEP 440 specifiers, "<2.14"); None: every one
    raises: str | None = None  # kind "error": the expected exception's type name (it, or one it was raised from)
    match: str | None = None  # kind "error": a regular expression searched in that exception's message
    finding: str | None = None  # the reproducer that dates it (findings/reproducers/<finding>.py); None: the key

    def __post_init__(self) -> None:
        if self.torch is not None:
            torch_specifier(self.torch)  # a typo must not silently make it apply nowhere
        if self.kind == "error" and not self.raises:
            raise ValueError(f"divergence {self.key}: kind 'error' names the exception it expects (raises: "
                             "a type name, and match: a pattern of its message)")
        if self.match is not None:
            try:
                re.compile(self.match)
            except re.error as exc:
                raise ValueError(f"divergence {self.key}: match {self.match!r} is not a regular expression "
                                 f"({exc})") from None

    @property
    def finding_name(self) -> str:
        """The name of its finding and reproducer (``finding``, else its key)."""
        return self.finding or self.key

    def error_matches(self, error: BaseException) -> bool:
        """Whether ``error`` is the exception this divergence expects: for kind "error", one of type ``raises``
        whose message ``match`` finds, ``error`` itself or one it was raised from (its cause or context);
        for kind "any", any; for kind "mismatch", none."""
        if self.kind == "any":
            return True
        if self.kind != "error":
            return False
        seen: set[int] = set()
        current: BaseException | None = error
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            names = {cls.__name__ for cls in type(current).__mro__} | {
                f"{cls.__module__}.{cls.__qualname__}" for cls in type(current).__mro__}
            if self.raises in names and (self.match is None or re.search(self.match, str(current))):
                return True
            current = current.__cause__ or current.__context__
        return False

    def expected_error(self) -> type:
        """A class whose instances are exactly the errors :meth:`error_matches` accepts (pytest's
        ``xfail(raises=...)`` takes a class and asks isinstance)."""
        return _ExpectedErrorType(f"Expected[{self.raises}]", (BaseException,), {"divergence": self})

    @property
    def is_torch_behaviour(self) -> bool:
        return self.behaviour == STOCK_TORCH

    @property
    def text(self) -> str:
        """The reason, with the link in brackets."""
        return self.reason + (f" ({self.link})" if self.link else "")

    def applies_to(self, *, op: str | None = None, backend: str | None = None, device: str | None = None,
                   dtype: str | None = None, property: str | None = None, torch: str | None = None) -> bool:
        """Whether each place given is among this divergence's (a place not given is not asked), on
        ``torch`` (a version; not given: the running torch's) when the divergence names its releases."""
        asked = ((op, self.ops), (backend, self.backends), (device, self.devices), (dtype, self.dtypes),
                 (property, self.properties))
        return (all(place is None or among is None or place in among for place, among in asked)
                and self.shown_by(torch))

    def shown_by(self, torch_version: str | None = None) -> bool:
        """Whether the torch release ``torch_version`` (None: the running torch's) is one that shows it."""
        if self.torch is None:
            return True
        # a nightly counts as its version (2.16.0.dev1 is in ">=2.14"; PEP 440 leaves it out of "<2.16")
        return torch_specifier(self.torch).contains(torch_release(torch_version), prereleases=True)


@dataclass(frozen=True)
class LayoutDivergence(Divergence):
    """A divergence of an implementation that reads and writes the inputs ``walks`` names (roles:
    ``param``, ``grad``) in storage order from ``data_ptr()``, ignoring their strides. It explains a
    miss of the property layout-invariant when the same implementation, handed each of those inputs
    as the contiguous tensor over its view's window of storage (``RunContext.linear_windows``), leaves
    every storage and output bit for bit as the miss did (conformance/cases/input_layouts.py)."""

    walks: tuple[str, ...] = ()
    # where no model run reproduces it: ``triggered(inputs, placements) -> bool``, whether the example holds
    # what brings it out (the placements: conformance.core.layouts.Placement, where each input went)
    triggered: Callable[..., bool] | None = None


@dataclass(frozen=True)
class ConditionalDivergence(Divergence):
    """A divergence named by what brings it out: ``triggered(inputs) -> bool`` (the property's example), for a
    check that has no model to run (the property complex-agrees)."""

    triggered: Callable[[Any], bool] | None = None


@dataclass(frozen=True)
class PathDivergence(Divergence):
    """A divergence of one of torch's paths from its for-loop step, with the test of whether it accounts
    for a difference the twin found: ``explains(inputs, path_outputs, for_loop_outputs, agrees)`` (NumPy
    outputs by name; ``agrees()``: whether the path's outputs agree with the NumPy reference within the
    tolerance of a correct implementation in the dtype)."""

    explains: Callable[..., bool] | None = None


class _ExpectedErrorType(type):
    """The type of :meth:`Divergence.expected_error`'s classes: isinstance asks the divergence."""

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, BaseException) and cls.divergence.error_matches(instance)  # type: ignore[attr-defined]


class InvalidTorchVersions(ValueError):
    """A divergence's ``torch`` that is not a PEP 440 specifier set."""


@lru_cache(maxsize=None)
def torch_specifier(text: str) -> SpecifierSet:
    """``text`` ("<2.14", ">=2.10,<2.14") as a specifier set; InvalidTorchVersions if it is none, or if a
    clause cannot be evaluated (each is, here: a version of 5,000 digits parses, then fails when matched)."""
    try:
        specifier = SpecifierSet(text)
        for clause in specifier:
            clause.contains(Version("0"), prereleases=True)
    except ValueError as exc:  # InvalidSpecifier, or a number past int()'s 4,300 digits
        raise InvalidTorchVersions(f"torch: {_short(text)} is not a version specifier such as '<2.14' "
                                   f"({_short(str(exc), 200)})") from None
    if not str(specifier):
        raise InvalidTorchVersions(f"torch: {text!r} names no version (e.g. '<2.14')")
    return specifier


def _short(text: str, limit: int = 60) -> str:
    """``repr(text)``, cut to ``limit`` characters with the rest counted."""
    shown = repr(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(shown) - limit:,} more characters)"


def torch_release(version: str | None = None) -> Version:
    """A torch version's release, its local label dropped ("2.13.0+cpu" -> 2.13.0); None: the running
    torch's."""
    if version is None:
        version = str(torch.__version__)
    return Version(version.split("+")[0])


_REGISTERED: dict[str, Divergence] = {}


def register(divergence: Divergence) -> Divergence:
    """Declare a Python record's divergence (by its key; a module loaded again replaces its own)."""
    _REGISTERED[divergence.key] = divergence
    return divergence


def lookup(declared: Iterable[Divergence] | None = None, **where: str | None) -> tuple[Divergence, ...]:
    """The divergences that apply ``where`` (op, backend, device, dtype, property, torch; see
    :meth:`Divergence.applies_to`), in declaration order: among ``declared`` (a spec case's), or
    among the registered ones."""
    pool = _REGISTERED.values() if declared is None else declared
    return tuple(divergence for divergence in pool if divergence.applies_to(**where))
