"""The options a backend cannot do (:class:`Narrowing`): declared by a candidate
(``unsupported_options``) or learned from an ``Unsupported`` that names one; the search draws
them at torch's default from then on."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from conformance.backends.base import Backend

if TYPE_CHECKING:  # annotations only: the judging and cases stages take any op record
    from conformance.ops.base import Op

UNSUPPORTED_OPTIONS_ATTRIBUTE = "unsupported_options"


def declared_unsupported_options(op: Op, backend: Backend) -> frozenset[str]:
    """The options a candidate declares it cannot do (``unsupported_options`` on its class or
    function, e.g. ``{"lr_decay", "maximize"}``); empty for other backends. A name that is not an
    option of the op is an error naming it."""
    candidate = backend.candidate(op.name)
    declared = getattr(candidate, UNSUPPORTED_OPTIONS_ATTRIBUTE, None) or ()
    if isinstance(declared, str):
        declared = (declared,)
    unknown = sorted(set(declared) - set(op.option_names()))
    if unknown:
        raise ValueError(f"{getattr(candidate, '__qualname__', candidate)}.{UNSUPPORTED_OPTIONS_ATTRIBUTE} names "
                         f"{', '.join(map(repr, unknown))}, not an option of {op.name} (its options: "
                         f"{', '.join(op.option_names()) or 'none'})")
    return frozenset(declared)


@dataclass
class Narrowing:
    """The options a backend cannot do, drawn at torch's default from then on: declared
    (``unsupported_options``) or learned from an Unsupported whose message names an option the
    example set. Every example is mapped through :meth:`apply`, so the search keeps its full
    example count within the supported subset instead of rejecting nearly every draw."""

    op: Op
    declared: frozenset = frozenset()
    learned: list = field(default_factory=list)
    # rejects-invalid: an example stays pinned only while the documented contract still rejects it
    # (Op.reference_beyond_torch: torch's own limitations are not the contract); one whose only error
    # is the unsupported option stays as drawn, and the backend says it cannot do it (unsupported)
    keep_invalid: bool = False

    @property
    def options(self) -> frozenset:
        return self.declared | frozenset(self.learned)

    def apply(self, example: Any) -> Any:
        options = self.options
        if not options:
            return example
        pinned = self.op.at_torch_defaults(example, options)
        if self.keep_invalid and pinned is not example:
            try:  # invalid under the documented contract, not merely by a limitation of torch's
                self.op.reference_beyond_torch(pinned)
            except Exception:  # noqa: BLE001 - still the documented error: the narrowed example
                return pinned
            return example  # its error is the unsupported option itself: the backend says so (unsupported)
        return pinned

    def learn(self, unsupported: BaseException, example: Any) -> bool:
        """Learn the options ``unsupported``'s message names that ``example`` sets; whether any was new."""
        text = str(unsupported)
        named = [name for name in self.op.option_names() if name not in self.options
                 and re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text)
                 and self.op.at_torch_defaults(example, frozenset([name])) is not example]
        self.learned += named
        return bool(named)

    def describe(self) -> str | None:
        """"narrowed: lr_decay, maximize at torch's default (...)", or None when nothing was narrowed."""
        if not self.options:
            return None
        how = []
        if self.declared:
            how.append(f"declared {UNSUPPORTED_OPTIONS_ATTRIBUTE}")
        if self.learned:
            how.append(f"learned from Unsupported: {', '.join(self.learned)}")
        return f"narrowed: {', '.join(sorted(self.options))} at torch's default ({'; '.join(how)})"
