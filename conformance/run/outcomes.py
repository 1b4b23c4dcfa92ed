"""The outcomes a conformance item can have, and how a pytest report maps onto them.

passed       the backend matched the golden values, the invariants and the reference
failed       it ran but differed (max abs/rel error and first differing index in the message)
error        it raised where a result was expected, or the case itself could not be evaluated
unsupported  the backend says it does not implement this op, dtype or device
xfail        a known divergence recorded in the spec (reason and link) showed up as recorded
xpass        a recorded divergence did not show up: the spec's record may be out of date
skipped      the device is not available here (the reason says why)
"""

from __future__ import annotations

import pytest

from conformance.types import Outcome


PASSED, FAILED, ERROR, UNSUPPORTED, XFAIL, XPASS, SKIPPED = Outcome
ALL = tuple(Outcome)
PROPERTY = "conformance"  # key of the user property carrying an item's record


def record_of(report) -> dict | None:
    """The conformance record a report carries (a user property), or None."""
    for key, value in getattr(report, "user_properties", ()):
        if key == PROPERTY:
            return value
    return None


class UnsupportedSkip(pytest.skip.Exception):
    """The pytest skip that carries the outcome ``unsupported``."""


def classify(report, excinfo) -> Outcome | None:
    """The outcome decided by this report, or None when the phase decides nothing."""
    from conformance.compare import Mismatch

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
