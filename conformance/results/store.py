"""Results files: one JSON document per run (see ``schema/results.schema.json``).

Writing: :class:`ResultsWriter` keeps one record per item and writes the whole document
atomically (temporary file in the same folder, fsync, ``os.replace``), so a reader never sees a
truncated file. A run holds :func:`results_lock` on its path, so a second run writing the same
file is refused. The file a previous run left at the same path is kept as
``.previous/<name>`` beside it (a folder, so ``reports/*.json`` does not pick the backup up)
only when that run was complete; an interrupted or killed run's file is not worth a backup.
Files written with the results (the JUnit XML) are moved along with it or removed, so they never
outlive the results file they belong to. Reading: :func:`load_results` validates against the schema and raises
:class:`ResultsError` naming the file for anything corrupt, foreign or of another schema version.
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import math
import os
import platform
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any, Iterable

from conformance.core.record import ItemRecord, upgraded

FORMAT = "torch-sparse-conformance-results"
SCHEMA_VERSION = 1
MESSAGE_LIMIT = 20_000  # characters of an item's message kept in the file

# the fields that identify an item across runs (the torch version, machine, ... are the run's)
KEY_FIELDS = ("kind", "spec", "case", "backend", "device", "dtype")


class ResultsError(Exception):
    """A results file that cannot be used, with the path it concerns."""

    def __init__(self, path: Path | str, message: str):
        self.path = str(path)
        self.message = message
        super().__init__(f"{path}: {message}")


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def item_key(record: ItemRecord) -> tuple:
    """What names an item across runs: kind, spec, case, backend, device, dtype."""
    return tuple(record.get(name) for name in KEY_FIELDS)


def key_label(key: tuple) -> str:
    kind, spec, case, backend, device, dtype = key
    prefix = "benchmark " if kind == "benchmark" else ""
    return f"{prefix}{spec}::{case}[{backend}-{device}-{dtype}]"


# ------------------------------------------------------------------ JSON cleaning

def clean_float(value: Any) -> Any:
    """Non-finite floats as the strings JSON lacks numbers for."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def to_jsonable(value: Any) -> Any:
    """Records carry backend extras: make them strict JSON (numbers, strings, lists, dicts)."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
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
            return text
    except Exception:  # noqa: BLE001
        pass
    return f"<{type(value).__name__} object>"


# ------------------------------------------------------------------ run metadata

def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def torch_xla_version() -> str | None:
    """torch_xla's version when it is installed, without importing it (that starts a runtime)."""
    module = sys.modules.get("torch_xla")
    if module is not None and getattr(module, "__version__", None):
        return str(module.__version__)
    return _version("torch_xla") or _version("torch-xla")


@lru_cache(maxsize=None)
def suite_git() -> dict[str, Any]:
    """The suite's git commit and whether its work tree has changes (None outside a checkout)."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10)
        if commit.returncode != 0:
            return {"git_commit": None, "git_dirty": None}
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
        return {"git_commit": commit.stdout.strip(),
                "git_dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}


def device_info(names: Iterable[str]) -> dict[str, dict[str, str | None]]:
    """For each device: its hardware name, or the reason it is unavailable."""
    from conformance.core.devices import DEVICES, unavailable_reason

    info: dict[str, dict[str, str | None]] = {}
    for name in names:
        if name not in DEVICES:
            continue
        reason = unavailable_reason(name)
        hardware = None
        if reason is None:
            try:
                if name == "cpu":
                    hardware = _cpu_model()
                elif name == "cuda":
                    import torch

                    hardware = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
                else:
                    import importlib

                    support = importlib.import_module(f"conformance.{name}_support")
                    hardware = str(getattr(support, f"{name}_hardware")())
            except Exception as exc:  # a name is nice to have, never worth failing a run
                hardware = f"unknown ({type(exc).__name__})"
        info[name] = {"name": hardware, "unavailable": reason}
    return info


def machine_fingerprint(run: dict) -> str:
    """Same fingerprint: timings of the two runs can be compared (hostname deliberately left out)."""
    accelerators = sorted(f"{d}={v.get('name')}" for d, v in (run.get("devices") or {}).items()
                          if d != "cpu" and v.get("name"))
    parts = [run.get("cpu_model"), str(run.get("cpu_count")), platform.machine(), platform.system(), *accelerators]
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:16]


def run_metadata(*, devices: Iterable[str] = ("cpu",), options: dict | None = None, label: str | None = None,
                 hypothesis_seed: Any = None, run_id: str | None = None) -> dict[str, Any]:
    import torch

    try:
        import numpy
        numpy_version = numpy.__version__
    except ImportError:  # pragma: no cover - numpy is a dependency
        numpy_version = None
    from conformance import __version__

    run: dict[str, Any] = {
        "id": run_id or uuid.uuid4().hex,  # conformance check gives its own, to know the file is its run's
        "label": label,
        "status": "running",
        "exit_status": None,
        "started": now(),
        "finished": None,
        "updated": now(),
        "torch": str(torch.__version__),
        "torch_xla": torch_xla_version(),
        "python": platform.python_version(),
        "numpy": numpy_version,
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "devices": device_info(devices),
        "suite": {"version": __version__, **suite_git()},
        "hypothesis_seed": hypothesis_seed,
        "options": to_jsonable(options or {}),
        "records_expected": None,
        "not_run": [],
    }
    run["machine"] = {"fingerprint": machine_fingerprint(run), "cpu_model": run["cpu_model"],
                      "cpu_count": run["cpu_count"], "arch": platform.machine()}
    return run


# ------------------------------------------------------------------ writing

def atomic_write_json(path: Path, document: Any) -> None:
    """Write ``document`` to ``path`` so that ``path`` is always either the old or the new file."""
    atomic_write_text(path, json.dumps(document, indent=1, allow_nan=False) + "\n")


def atomic_write_text(path: Path, text: str | bytes, *, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder (fsync, ``os.replace``):
    ``path`` is always either the old or the new file, never a truncated one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp's 0600 would make the file unreadable to others
        os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8") if isinstance(text, str) else text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ------------------------------------------------------------------ output paths

# the first lines of every HTML report this suite writes (template.html.j2): how a report it may
# replace is told from a file of someone else's
REPORT_MARK = '<meta name="generator" content="torch-sparse-conformance report">'
_OLD_REPORT_START = '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
_OLD_REPORT_NAV = '<nav><a href="#runs">Runs</a> · <a href="#matrix">Matrix</a>'


class UnsafeOutput(OSError):
    """An output path a command must not write: a device, a folder, a FIFO, a file this suite did
    not write. An OSError (``filename``, ``strerror``), so a command's "cannot write" handling
    reports it as it reports a full disk."""

    def __init__(self, path: Path | str, why: str):
        super().__init__(errno.EPERM, why, str(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def is_report_file(path: Path) -> bool:
    """Whether the file at ``path`` is an HTML report of this suite (its generator line, or the
    page of an older version: its first lines and navigation)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1 << 20).decode("utf-8", errors="replace")
    except OSError:
        return False
    return REPORT_MARK in head[:4096] or (head.startswith(_OLD_REPORT_START) and _OLD_REPORT_NAV in head)


def is_results_file(path: Path) -> bool:
    """Whether the file at ``path`` may be replaced by a results file: the plugin's rule for
    ``--conformance-results`` (:func:`foreign_file_problem`)."""
    return foreign_file_problem(path) is None


OUTPUT_KINDS = {"results": is_results_file, "report": is_report_file, "append": None}


def output_problem(path: Path | str, kind: str) -> str | None:
    """Why a command must not write ``path``, or None. ``kind``: ``results`` (a results JSON: an
    existing file must be empty or a results file of this suite, the rule the plugin applies to
    ``--conformance-results``), ``report`` (an HTML report: an existing file must be empty or one of
    this suite's reports), ``append`` (a summary appended to, e.g. ``$GITHUB_STEP_SUMMARY``: any
    regular file). Never a device, a folder, a FIFO or a socket, and never under a file."""
    path = Path(path)
    ours = OUTPUT_KINDS[kind]
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except NotADirectoryError:
        info = None
    except OSError as exc:
        return f"cannot be examined: {exc.strerror or exc}"
    if info is None:
        for parent in path.parents:
            if parent.exists():
                if not parent.is_dir():
                    return f"{parent} is a file, not a folder"
                break
        return None
    if stat.S_ISDIR(info.st_mode):
        return "is a directory; give a file path"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a device, a FIFO or a socket); not writing to it"
    if ours is not None and info.st_size and not ours(path):
        what = "a results file" if kind == "results" else "an HTML report"
        return (f"exists and is not {what} of this suite; not overwriting it (give another path, or remove it)")
    return None


def check_output(path: Path | str, kind: str) -> Path:
    """``path`` when :func:`output_problem` finds nothing, else :class:`UnsafeOutput` naming it."""
    problem = output_problem(path, kind)
    if problem:
        raise UnsafeOutput(path, problem)
    return Path(path)


def write_output(path: Path | str, text: str, kind: str) -> Path:
    """Write a command's output file safely: checked (:func:`check_output`), then through a
    temporary file in the same folder and a rename. ``append`` adds ``text`` to what the file holds
    (its permissions kept); the others replace it."""
    path = check_output(path, kind)
    mode = None
    if kind == "append" and path.exists():
        mode = stat.S_IMODE(os.stat(path).st_mode)
        text = path.read_bytes() + text.encode("utf-8")
    atomic_write_text(path, text, mode=mode)
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


PREVIOUS_DIR = ".previous"


def previous_path(path: Path) -> Path:
    """Where the last complete run's file at ``path`` is kept: ``<folder>/.previous/<name>``."""
    return path.parent / PREVIOUS_DIR / path.name


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


def results_lock(path: Path):
    """The lock a run holds on its results path (``filelock``; released when the process ends).

    ``acquire(timeout=0)`` raises ``filelock.Timeout`` when another run holds it.
    """
    import filelock

    return filelock.FileLock(str(lock_path(path)))


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


def foreign_file_problem(path: Path) -> str | None:
    """Why the existing file at ``path`` must not be overwritten by a results file (it is not empty and
    not a results file of this suite: ``--conformance-results setup.py``), or None."""
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return None
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        data = None
    if isinstance(data, dict) and data.get("format") == FORMAT:
        return None
    return "exists and is not a results file of this suite; not overwriting it (give another path, or remove it)"


def set_aside(path: Path, companions: Iterable[Path] = ()) -> None:
    """Before a run that must not be confused with its predecessor (``conformance check``): the file
    at ``path`` leaves it. A complete run's file (and its companions) go to ``.previous/`` as a
    writer would keep them; an incomplete one's are removed. Raises OSError (e.g. ``.previous`` is a file)."""
    if path.is_file() and _complete_run_id(path) is not None:
        ResultsWriter(path, {"id": None}, companions=tuple(companions))._keep_previous()
    for source in (path, *companions):
        if source.is_file():
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
                record.setdefault(key, value)
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
            self._keep_previous()
        atomic_write_json(self.path, self.document())
        self._wrote = True

    def _keep_previous(self) -> None:
        """Before the first write: a complete previous run's file (and its companions) go to
        ``.previous/``; an incomplete one's are left for this run to overwrite (companions removed)."""
        old_id = _complete_run_id(self.path) if self.path.exists() else None
        keep = old_id is not None and old_id != self.run["id"]
        for source in (self.path, *self.companions):
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
            if source != self.path:
                source.unlink()


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
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))
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
    import jsonschema

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
        return parse_strict_json(text)
    except RecursionError:
        raise ResultsError(path, "nested too deeply to read (RecursionError): not a results file") from None
    except NotStrictJSON as exc:
        raise ResultsError(path, f"not strict JSON: {exc}") from None
    except ValueError as exc:
        raise ResultsError(path, f"not valid JSON (corrupt or truncated file): {exc}") from None


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
