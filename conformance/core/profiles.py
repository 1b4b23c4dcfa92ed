"""The Hypothesis profiles of the generated cases, by name, and the default one."""

from types import MappingProxyType
from typing import TypedDict


class Profile(TypedDict):
    examples: int  # drawn examples per item
    database: bool  # failures kept in the example database
    phases: tuple[str, ...]  # Hypothesis' phases, by name


PROFILES: MappingProxyType[str, Profile] = MappingProxyType({
    # CI: deterministic (fixed seed, no example database), bounded, no deadline flakiness
    "ci": {"examples": 8, "database": False,
           "phases": ("explicit", "generate", "shrink")},
    # nightly: many examples, a fresh seed each run, failures kept in the example database
    "thorough": {"examples": 300, "database": True,
                 "phases": ("explicit", "reuse", "generate", "target", "shrink")},
})
DEFAULT_PROFILE = "ci"
