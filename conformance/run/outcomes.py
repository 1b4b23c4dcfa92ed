"""How a pytest report maps onto the outcomes (:mod:`conformance.core.outcomes`), and the record a
report carries."""

from __future__ import annotations

import pytest

from conformance.core.outcomes import ALL, ERROR, FAILED, PASSED, SKIPPED, UNSUPPORTED, XFAIL, XPASS
from conformance.core.record import ItemRecord
from conformance.core.types import Mismatch, Outcome

__all__ = ["ALL", "ERROR", "FAILED", "PASSED", "SKIPPED", "UNSUPPORTED", "XFAIL", "XPASS", "Outcome",
           "PROPERTY", "UnsupportedSkip", "classify", "record_of"]

PROPERTY = "conformance"  # key of the user property carrying an item's record


def record_of(report) -> ItemRecord | None:
    """The conformance record a report carries (a user property), or None."""
    for key, value in getattr(report, "user_properties", ()):
        if key == PROPERTY:
            return value
    return None


# (pytest's public Skipped is an attribute of a function, which mypy cannot take as a base class)
class UnsupportedSkip(pytest.skip.Exception):  # type: ignore[name-defined]
    """The pytest skip that carries the outcome ``unsupported``."""


def classify(report, excinfo) -> Outcome | None:
    """The outcome decided by this report, or None when the phase decides nothing."""
    if hasattr(report, "wasxfail"):
        return XPASS if report.passed else XFAIL
    if report.skipped:
        if excinfo is not None and excinfo.errisinstance(UnsupportedSkip):
            return UNSUPPORTED
        return SKIPPED
    if report.failed:
        if report.when == "call" and excinfo is not None and excinfo.errisinstance(Mismatch):
            return FAILED
        return ERROR
    if report.when == "call":
        return PASSED
    return None
