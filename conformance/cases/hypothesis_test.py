"""A search as a Hypothesis test, with Hypothesis' public API only (:func:`hypothesis_test`): the
explicit examples first, then draws from a seed, under the profile's settings, with each item's
examples kept apart in the run's one example database (:class:`_KeyedDatabase`). The search
(:mod:`conformance.cases.search`) runs it."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from hypothesis import example, given
from hypothesis import seed as seeded
from hypothesis.database import ExampleDatabase


def hypothesis_test(test_case: Callable[[Any], None], strategy, explicit: list, settings, *, seed: int,
                    database_key: str) -> Callable[[], None]:
    """``test_case`` as a Hypothesis test, with Hypothesis' public API only: its ``explicit``
    examples first (``@example``, in the order given), then draws of ``strategy`` from ``seed``
    (``@seed``) under ``settings``, the profile's example database (if any) keyed by
    ``database_key`` (one item's examples apart from another's: :class:`_KeyedDatabase`).

    The order matters: ``@seed`` switches the example database off in the settings it finds on
    the test (a seed is for reproducing a run), so the profile's ``settings`` go on last, over it,
    and keep the database a ``thorough`` run saves its failures to and reuses
    (tests/test_generated.py checks both)."""
    for each in reversed(explicit):  # applied inside out: run in the order given, before any draw
        test_case = example(each)(test_case)
    test = seeded(seed)(given(strategy)(test_case))
    if settings.database is not None:
        settings = type(settings)(settings, database=_KeyedDatabase(settings.database, database_key))
    return settings(test)


class _KeyedDatabase(ExampleDatabase):
    """An example database seen under one key: every key Hypothesis uses (the test's digest, the
    same for every item, and its sub-keys) is prefixed with ``key`` (the item's name), so each
    item saves and reuses its own examples in the one database of the run."""

    def __init__(self, database: ExampleDatabase, key: str):
        super().__init__()
        self.database, self.prefix = database, key.encode() + b"\x00"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.database!r}, {self.prefix[:-1].decode()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _KeyedDatabase) and (self.database, self.prefix) == (other.database, other.prefix)

    def __hash__(self) -> int:
        return hash((type(self), self.prefix))

    def _key(self, key: bytes) -> bytes:
        return self.prefix + key

    def save(self, key: bytes, value: bytes) -> None:
        self.database.save(self._key(key), value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.database.fetch(self._key(key))

    def delete(self, key: bytes, value: bytes) -> None:
        self.database.delete(self._key(key), value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.database.move(self._key(src), self._key(dest), value)
