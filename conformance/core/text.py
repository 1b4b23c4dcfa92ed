"""Text from outside the suite (a candidate's exception message, a label, a hostname, a path, a
results file) made safe to keep and to show; the one place for it (docs/robustness.md).

:func:`valid_text` keeps: a lone surrogate (how Python holds a byte that is not UTF-8: a file name
read from a Latin-1 folder, a command-line argument) becomes the six characters ``\\udcff``, so that
every encoder takes it (execnet between xdist's processes, a file, ``print``); :func:`valid_strings`
does so for every string of a JSON-like value. :func:`safe_to_show` is for what a command prints or
writes as Markdown or HTML: control characters too (C0 but newline and tab, DEL, C1) become escapes such as
``\\x1b``, so no escape sequence clears a terminal or draws a verdict of its own.

The standard library only (the run's sidecar writes records through ``results/writing.py``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\udcff``); otherwise unchanged."""
    try:
        str.encode(text, "utf-8")  # str's own: a subclass's encode() is a candidate's code
        return text
    except UnicodeEncodeError:
        return str.encode(text, "utf-8", "backslashreplace").decode("utf-8")


def valid_strings(value: Any) -> Any:
    """``value`` (dicts, lists and tuples of strings and anything else) with :func:`valid_text`
    applied to every string, keys included."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_strings(k): valid_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_strings(v) for v in value]
    if isinstance(value, tuple):
        return tuple(valid_strings(v) for v in value)
    return value


def safe_to_show(text: str) -> str:
    """Untrusted ``text`` as it may reach a terminal or a Markdown file: :func:`valid_text`, and each
    control character but newline and tab as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", valid_text(text))


def safe_name(text: str) -> str:
    """``text`` (a property id, an item's parts) as a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


def failing_example_path(directory: Path, item_name: str) -> Path:
    """Where a generated item's latest failing example is kept under a counterexamples folder, exactly
    as the search drew it (pickled: the op's own input objects), for ``conformance replay`` to run first.
    Here, torch-free, so that replay's own process finds it without importing torch."""
    return directory / ".failing" / f"{safe_name(item_name)}.pickle"
