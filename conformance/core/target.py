"""A candidate target, ``OP=module:attr`` or ``OP=path/to/file.py:attr``, parsed once.

``check``'s arguments and ``--conformance-impl``'s values are text on the command line and in the
results file's run options; everything past the parser passes :class:`CandidateTarget` on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FORM = "OP=module:attr or OP=path/to/file.py:attr"


class TargetError(ValueError):
    """Text that is not a candidate target; the message names the text and the expected form."""


@dataclass(frozen=True)
class CandidateTarget:
    """Which object implements which op: ``op``, a dotted ``module`` or a ``path/to/file.py``, and a
    (dotted) ``attribute`` of it."""

    op: str
    module: str
    attribute: str

    @classmethod
    def parse(cls, text: str) -> CandidateTarget:
        op, equals, target = str(text).partition("=")
        module, colon, attribute = target.partition(":")
        op, module, attribute = op.strip(), module.strip(), attribute.strip()
        if not equals or not colon or not op or not module or not attribute:
            raise TargetError(f"{text!r}: expected {FORM}")
        return cls(op, module, attribute)

    @classmethod
    def parse_or_none(cls, text: object) -> CandidateTarget | None:
        """For text read back from a results file, which may hold anything."""
        try:
            return cls.parse(text) if isinstance(text, str) else None
        except TargetError:
            return None

    @property
    def target(self) -> str:
        """``module:attr`` (or ``path/to/file.py:attr``), without the op."""
        return f"{self.module}:{self.attribute}"

    @property
    def is_file(self) -> bool:
        return self.module.endswith(".py")

    @property
    def short_name(self) -> str:
        """The target without its folders: what a report column says."""
        return self.target.rsplit("/", 1)[-1]

    def resolved_from(self, directory: str | Path) -> CandidateTarget:
        """A relative file target as the run that named it found it, seen from ``directory``."""
        if not self.is_file or Path(self.module).is_absolute() or Path(self.module).is_file():
            return self
        return CandidateTarget(self.op, str(Path(directory) / self.module), self.attribute)

    def absolute(self, directory: str | Path) -> CandidateTarget:
        """A file target named by its absolute path (a relative one read from ``directory``): what a
        printed command names, so that it runs from any directory."""
        if not self.is_file or Path(self.module).is_absolute():
            return self
        return CandidateTarget(self.op, os.path.abspath(Path(directory) / self.module), self.attribute)

    def __str__(self) -> str:
        return f"{self.op}={self.target}"


def parse_targets(values: Iterable[str]) -> list[CandidateTarget]:
    """Each value parsed; an op given twice is an error (one candidate per op)."""
    targets: list[CandidateTarget] = []
    for value in values:
        target = CandidateTarget.parse(value)
        if any(other.op == target.op for other in targets):
            raise TargetError(f"{value!r}: op {target.op!r} given twice")
        targets.append(target)
    return targets
