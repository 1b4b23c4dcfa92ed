"""What every part of the report shares: the order of backends, devices and dtypes, the bounds on what
the page shows of a results file, and the small formatters."""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any, Iterable

from conformance.core import outcomes
from conformance.core.record import CANDIDATE, ItemRecord

DEVICE_ORDER = ("cpu", "cuda", "xla")
DTYPE_SHORT = MappingProxyType({"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"})
TEXT_LIMIT = 10_000  # characters of one message, value or name shown (the results file keeps it all)
LABEL_LIMIT = 300  # characters of a run's label, repeated on every chip of its run
ITEMS_LIMIT = 10_000  # elements of one list shown (a tensor's values)
TOOLTIP_LIMIT = 300  # characters of a reason repeated in a chip's tooltip (the drawer has it whole)
DEPTH_LIMIT = 40  # levels of lists and objects shown of one value (a spec's tensors nest a few)


def capped(value: Any, limit: int = TEXT_LIMIT, depth: int = 0) -> Any:
    """``value`` with every string cut to ``limit`` characters, every list to ITEMS_LIMIT
    elements and every list or object nested DEPTH_LIMIT deep to a note, each cut saying how much
    more the results file has: what a results file holds never makes the page grow beyond a bound
    per item (a 50 MB label, a million-element value), nor the report recurse without bound (a
    value nested 900 deep, which JSON reads)."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return value[:limit] + f"… ({len(value) - limit:,} more characters in the results file)"
    if isinstance(value, (dict, list, tuple)) and depth >= DEPTH_LIMIT:
        return f"… (nested deeper than {DEPTH_LIMIT} levels in the results file)"
    if isinstance(value, dict):
        return {capped(k, limit, depth + 1): capped(v, limit, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        shown = [capped(v, limit, depth + 1) for v in value[:ITEMS_LIMIT]]
        if len(value) > ITEMS_LIMIT:
            shown.append(f"… ({len(value) - ITEMS_LIMIT:,} more items in the results file)")
        return shown
    return value


def order(value: str | None, known: tuple[str, ...]) -> tuple:
    """A sort key: the ``known`` values in their order, then the others by name."""
    return (known.index(value), "") if value in known else (len(known), value or "")


def backend_order(runs: Iterable[Any]) -> tuple[str, ...]:
    """The order of the report's backends: the candidate first (the column a reader of a gate looks
    for), then each run's backends as its registry lists them (``run["backends"]``, written by the
    plugin), the first run's first; a backend no run lists (an older file) goes last, by name."""
    names = [CANDIDATE]
    for results in runs:
        names.extend(str(name) for name in results.run.get("backends") or () if name not in names)
    return tuple(names)


def run_tag(index: int) -> str:
    """A short tag for a run inside a matrix cell: A, B, ... (the full label is on hover and in the key)."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return letters[index] if index < len(letters) else f"R{index + 1}"


def http_url(value: Any) -> str | None:
    """``value`` when it is an http(s) address (the only kind the report makes a link of), else None."""
    if isinstance(value, str) and re.match(r"(?i)https?://[^\s]+$", value.strip()):
        return value.strip()
    return None


def counts(records: Iterable[ItemRecord]) -> dict[str, int]:
    """How many records of each outcome (every outcome named, zeros included)."""
    found: dict[str, int] = {o: 0 for o in outcomes.ALL}  # (Outcome is a str enum)
    for record in records:
        found[record["outcome"]] = found.get(record["outcome"], 0) + 1
    return found


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


