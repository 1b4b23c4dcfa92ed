"""A results document on disk, at its lowest: what marks it (``FORMAT``, ``SCHEMA_VERSION``), its
values made strict JSON (:func:`to_jsonable`), its time stamps (:func:`now`), and the atomic write
(:func:`atomic_write_json`: a temporary file in the same folder, fsync, ``os.replace``), so that a
reader never sees a truncated file.

The standard library only: the run's sidecar process (:mod:`conformance.run.sidecar`), which writes a
crashed or hung item's record after the run's process died, imports this module and nothing heavier.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

FORMAT = "torch-sparse-conformance-results"
SCHEMA_VERSION = 1


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------ JSON cleaning

def clean_float(value: Any) -> Any:
    """Non-finite floats as the strings JSON lacks numbers for."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def to_jsonable(value: Any) -> Any:
    """Records carry backend extras: make them strict JSON (numbers, strings, lists, dicts), every
    string valid text (a lone surrogate from a candidate's message escaped: ``core/text.py``)."""
    if isinstance(value, dict):
        return {to_jsonable(str(k)): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, str):
        # lazy: at module level the package would stand on 7 levels (tests/test_layout.py)
        from conformance.core.text import valid_text

        return valid_text(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return clean_float(value)
    try:  # numpy / torch scalars
        item = value.item()
        if isinstance(item, (int, float, bool)):
            return to_jsonable(item)
    except Exception:
        pass
    try:  # a foreign object's __str__ may raise or return a non-string: never the run's end
        text = str(value)
        if isinstance(text, str):
            return to_jsonable(text)
    except Exception:  # noqa: BLE001
        pass
    return f"<{type(value).__name__} object>"


# ------------------------------------------------------------------ writing

def atomic_write_json(path: Path, document: Any) -> None:
    """Write ``document`` to ``path`` so that ``path`` is always either the old or the new file."""
    atomic_write_text(path, json.dumps(document, indent=1, allow_nan=False) + "\n")


def atomic_write_text(path: Path, text: str | bytes) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder (fsync, ``os.replace``):
    ``path`` is always either the old or the new file, never a truncated one. A lone surrogate in
    ``text`` is written as its escape (``\\udcff``), never an error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp's 0600 would make the file unreadable to others
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8", "backslashreplace") if isinstance(text, str) else text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
