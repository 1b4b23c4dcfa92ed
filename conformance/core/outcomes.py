"""The outcomes a conformance item can have (the shared list; how a pytest report maps onto them
is :mod:`conformance.run.outcomes`).

passed       the backend matched the golden values, the invariants and the reference
failed       it ran but differed (max abs/rel error and first differing index in the message)
error        it raised where a result was expected, or the case itself could not be evaluated
unsupported  the backend says it does not implement this op, dtype or device
xfail        a known divergence recorded in the spec (reason and link) showed up as recorded
xpass        a recorded divergence did not show up: the spec's record may be out of date
skipped      the device is not available here (the reason says why)
"""

from __future__ import annotations

from conformance.core.types import Outcome

PASSED, FAILED, ERROR, UNSUPPORTED, XFAIL, XPASS, SKIPPED = Outcome
ALL = tuple(Outcome)
