"""Results files: one JSON document per run (see ``schema/results.schema.json``), written and read.

Writing: :class:`ResultsWriter` keeps one record per item and writes the whole document
atomically (:func:`~conformance.results.writing.atomic_write_json`: temporary file in the same
folder, fsync, ``os.replace``), so a reader never sees a truncated file. A run holds
:func:`results_lock` on its path, so a second run writing the same file is refused. The file a
previous run left at the same path is kept as ``.previous/<name>`` beside it (a folder, so
``reports/*.json`` does not pick the backup up) only when that run was complete; an interrupted or
killed run's file is not worth a backup. Files written with the results (the JUnit XML) are moved
along with it or removed, so they never outlive the results file they belong to. Reading:
:func:`load_results` validates against the schema and raises :class:`ResultsError` naming the file
for anything corrupt, foreign or of another schema version.

Behind it: the document's marks, strict JSON values and the atomic write (``writing.py``, all the
run's sidecar process imports), the output paths a command may write (``outputs.py``) and the run's
metadata (``run_info.py``).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from conformance.core.record import ItemRecord, upgraded
from conformance.core.text import valid_strings
# besides this module's own names, importers take these from here: the output paths' checks (the
# report, merge, the entry points) and the run's metadata (the run's results writer)
from conformance.results.outputs import (REPORT_MARK, UnsafeOutput, check_output, foreign_file_problem,  # noqa: F401
                                         output_problem, write_output)
from conformance.results.run_info import run_metadata  # noqa: F401
from conformance.results.writing import FORMAT, SCHEMA_VERSION, atomic_write_json, now, to_jsonable

MESSAGE_LIMIT = 20_000  # characters of an item's message kept in the file

# the fields that identify an item across runs (the torch version, machine, ... are the run's)
KEY_FIELDS = ("kind", "spec", "case", "backend", "device", "dtype")


class ResultsError(Exception):
    """A results file that cannot be used, with the path it concerns."""

    def __init__(self, path: Path | str, message: str):
        self.path = str(path)
        self.message = message
        super().__init__(f"{path}: {message}")


def item_key(record: ItemRecord) -> tuple:
    """What names an item across runs: kind, spec, case, backend, device, dtype."""
    return tuple(record.get(name) for name in KEY_FIELDS)


def key_label(key: tuple) -> str:
    kind, spec, case, backend, device, dtype = key
    prefix = "benchmark " if kind == "benchmark" else ""
    return f"{prefix}{spec}::{case}[{backend}-{device}-{dtype}]"


# ------------------------------------------------------------------ the previous run's file, the lock

PREVIOUS_DIR = ".previous"


def previous_path(path: Path) -> Path:
    """Where the last complete run's file at ``path`` is kept: ``<folder>/.previous/<name>``."""
    return path.parent / PREVIOUS_DIR / path.name


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


def junit_beside(path: Path) -> Path:
    """The JUnit XML a run writes with its results file unless ``--junitxml`` names another: ``<stem>.junit.xml``."""
    return path.with_name(f"{path.stem}.junit.xml")


def results_lock(path: Path):
    """The lock a run holds on its results path (``filelock``; released when the process ends).

    ``acquire(timeout=0)`` raises ``filelock.Timeout`` when another run holds it (:func:`take_lock`).
    """
    import filelock  # lazy: ~25 ms, only a run writing results locks; cli imports this module

    return filelock.FileLock(str(lock_path(path)))


class ResultsLocked(ResultsError):
    """Another run holds the lock of the results file a command would write or move."""


def take_lock(path: Path, lock=None):
    """Acquire ``path``'s results lock (or ``lock``, made by :func:`results_lock`) at once, and return
    it; :class:`ResultsLocked` naming the lock when a run holds it, OSError when it cannot be created."""
    import filelock  # lazy: as in results_lock

    lock = lock if lock is not None else results_lock(path)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        raise ResultsLocked(path, f"another run is writing this results file (it holds the lock "
                                  f"{lock_path(path)})") from None
    return lock


@contextmanager
def holding_lock(path: Path):
    """``path``'s results lock held while a command other than a run writes or moves the file
    (``merge -o``, check setting the previous check aside): :func:`take_lock`, released at the end."""
    lock = take_lock(path)
    try:
        yield
    finally:
        lock.release()


def _complete_run_id(path: Path) -> str | None:
    """The run id of the results file at ``path`` when it is a complete run, else None."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    run = old.get("run") if isinstance(old, dict) else None
    if not isinstance(run, dict) or run.get("status") != "complete" or old.get("format") != FORMAT:
        return None
    return str(run.get("id"))


def set_aside(path: Path, companions: Iterable[Path] = ()) -> None:
    """Before a run that must not be confused with its predecessor (``conformance check``): the file
    at ``path`` leaves it. A complete run's file (and its companions) go to ``.previous/`` as a
    writer would keep them; an incomplete one's are removed. Raises OSError (e.g. ``.previous`` is a file)."""
    keep_previous(path, None, companions)
    if path.is_file():
        path.unlink()


def keep_previous(path: Path, run_id: str | None, companions: Iterable[Path] = ()) -> None:
    """Before a run's (or a merge's) first write to ``path``: a complete file of another run (and its
    companions) is copied to ``.previous/``; an incomplete one's is left to be overwritten. The
    companions (the JUnit XML) are removed either way: they never outlive the file they belong to."""
    old_id = _complete_run_id(path) if path.exists() else None
    keep = old_id is not None and old_id != run_id
    for source in (path, *companions):
        if not source.exists() or source.is_dir():
            continue
        if keep:
            target = previous_path(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp")
            try:
                shutil.copy2(source, tmp)
                os.replace(tmp, target)
            except OSError as exc:  # named as what failed: keeping the previous file, not writing this one
                tmp.unlink(missing_ok=True)
                raise OSError(exc.errno, f"cannot keep the previous run's {source.name} as {target} "
                                         f"({exc.strerror or exc})") from exc
        if source != path:
            source.unlink()


@dataclass
class ResultsWriter:
    """One run's records by node id, written whole on each :meth:`write`."""

    path: Path
    run: dict[str, Any]
    records: dict[str, ItemRecord] = field(default_factory=dict)
    companions: tuple[Path, ...] = ()  # files written with the results (JUnit XML): backed up or removed with it
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)  # "<spec>::<case id>" -> case context
    _wrote: bool = False

    def add(self, nodeid: str, record: ItemRecord) -> None:
        """Keep an item's record; a later phase's error or failure (teardown) overrides a pass."""
        record = to_jsonable({"nodeid": nodeid, **record})
        record.setdefault("kind", "case" if record.get("case") is not None else "invalid-spec")
        message = record.get("message")
        if isinstance(message, str) and len(message) > MESSAGE_LIMIT:
            record["message"] = message[:MESSAGE_LIMIT] + f"\n... ({len(message) - MESSAGE_LIMIT} more characters)"
        previous = self.records.get(nodeid)
        if previous is not None and record["outcome"] not in ("error", "failed"):  # Outcome.ERROR, .FAILED
            return
        if previous is not None and previous.get("message") and record.get("message") != previous.get("message"):
            record["message"] = f"{previous['message']}\n--- then ---\n{record.get('message') or ''}"
            for key, value in previous.items():
                # (a key of the same TypedDict, which mypy wants as a literal)
                record.setdefault(key, value)  # type: ignore[misc]
        self.records[nodeid] = record

    def add_case(self, key: str, context: dict[str, Any]) -> None:
        """Keep a spec case's context (source, derivation, inputs, golden values, line) once."""
        self.cases.setdefault(key, to_jsonable(context))

    def document(self) -> dict[str, Any]:
        return {"format": FORMAT, "schema_version": SCHEMA_VERSION, "run": self.run,
                "records": list(self.records.values()), "cases": self.cases}

    def write(self, status: str | None = None) -> None:
        if status is not None:
            self.run["status"] = status
        self.run["updated"] = now()
        if not self._wrote:
            keep_previous(self.path, self.run["id"], self.companions)
        atomic_write_json(self.path, self.document())
        self._wrote = True

# ------------------------------------------------------------------ reading

@lru_cache(maxsize=None)
def results_schema() -> dict:
    return json.loads(resources.files("conformance.results.schema").joinpath("results.schema.json").read_text())


@dataclass
class Results:
    """A loaded results file."""

    path: Path
    run: dict[str, Any]
    records: list[ItemRecord]
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)  # optional in the file

    @property
    def label(self) -> str:
        return self.run.get("label") or f"torch {self.run.get('torch')}"

    def by_key(self) -> dict[tuple, ItemRecord]:
        return {item_key(record): record for record in self.records}


class NotStrictJSON(ValueError):
    """Valid for Python's json module, not for strict JSON readers (browsers, jq)."""


def _reject_constant(name: str) -> float:
    raise NotStrictJSON(f"a bare {name} (this suite writes non-finite values as the strings \"NaN\", "
                        "\"Infinity\", \"-Infinity\")")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotStrictJSON(f"the number {text[:40]} is out of range of a float")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members, refusing a key given twice (Python's json keeps the last one silently:
    an outcome "failed" then "passed" would read as passed)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        duplicate = ""
        for key, _ in pairs:  # (the first key seen twice)
            if key in seen:
                duplicate = key
                break
            seen.add(key)
        raise NotStrictJSON(f"the key {duplicate[:80]!r} appears twice in one object (which one counts is up to "
                            "the reader)")
    return obj


def parse_strict_json(text: str) -> Any:
    """``json.loads`` that refuses bare NaN/Infinity, numbers out of float range (1e600) and a key
    given twice in one object; ValueError says which, RecursionError is left to the caller."""
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float,
                      object_pairs_hook=_unique_keys)


def schema_problem(data: Any) -> str | None:
    """The first place ``data`` breaks the results schema ("at records/3/outcome: ..."), or None."""
    import jsonschema  # lazy: ~0.1 s, only when a file is validated; cli imports this module

    validator = jsonschema.Draft202012Validator(results_schema())
    error = min(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path], default=None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
    return f"does not match the results schema at {where}: {error.message[:300]}"


def _decode(path: Path, raw: bytes) -> Any:
    """The JSON document in ``raw``, or ResultsError saying why there is none."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsError(path, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}): not a "
                                 "results file, or a corrupt one") from None
    try:
        data = parse_strict_json(text)
        # a "\udcff" escape reads as a lone surrogate, which no encoder takes: every string made valid text
        return valid_strings(data) if _SURROGATE_ESCAPE.search(text) else data
    except RecursionError:
        raise ResultsError(path, "nested too deeply to read (RecursionError): not a results file") from None
    except NotStrictJSON as exc:
        raise ResultsError(path, f"not strict JSON: {exc}") from None
    except ValueError as exc:
        raise ResultsError(path, f"not valid JSON (corrupt or truncated file): {exc}") from None


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # JSON's escape of a surrogate (of a pair, too)


MAX_INPUT_BYTES = 64 * 1024 * 1024  # the largest results file report, merge and gate read (64 MiB)


def load_results(path: Path | str, *, max_bytes: int | None = -1) -> Results:
    """Read and validate a results file; ResultsError names the file and what is wrong with it.

    At most ``max_bytes`` are read (-1: :data:`MAX_INPUT_BYTES`, 64 MiB; None: no limit; a full run of the
    suite writes a few MB; a larger file, or an endless one such as /dev/zero, is refused before it
    is parsed). Strict JSON only (no bare NaN/Infinity, no number beyond a float, no key twice in
    one object), then the schema: types and ranges, e.g. a negative timing or an int where a list
    of strings belongs."""
    path = Path(path)
    max_bytes = MAX_INPUT_BYTES if max_bytes == -1 else max_bytes
    try:
        with open(path, "rb") as handle:
            raw = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    except OSError as exc:
        raise ResultsError(path, f"cannot read: {exc.strerror or exc}") from None
    if max_bytes is not None and len(raw) > max_bytes:
        raise ResultsError(path, f"larger than {max_bytes:,} bytes ({max_bytes / 2 ** 20:g} MiB), the most report, "
                                 "merge and gate read of a results file (docs/results-report-gate.md); not read")
    data = _decode(path, raw)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ResultsError(path, f"not a conformance results file (no \"format\": \"{FORMAT}\")")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ResultsError(path, f"unknown results schema version {version!r:.80}; this suite reads version "
                                 f"{SCHEMA_VERSION} (written by a different version of the suite?)")
    try:
        problem = schema_problem(data)
    except RecursionError:
        problem = "nested too deeply to validate (RecursionError)"
    if problem:
        raise ResultsError(path, problem)
    for record in data["records"]:
        upgraded(record)  # an older file's xla_compiles: compiles, with the compiler its counts name
    return Results(path, data["run"], data["records"], data.get("cases") or {})


def load_many(paths: Iterable[Path | str]) -> tuple[list[Results], list[ResultsError]]:
    """Every usable results file, and a ResultsError naming each file left out and why (for a
    reader that goes on with the good ones: the report). Never raises for a file's content."""
    loaded, problems = [], []
    for path in paths:
        try:
            loaded.append(load_results(path))
        except ResultsError as exc:
            problems.append(exc)
        except Exception as exc:  # noqa: BLE001 - one odd file never costs the others
            problems.append(ResultsError(path, f"cannot be read ({type(exc).__name__}: {exc})"[:400]))
    return loaded, problems
