"""Output paths a command may write, checked before anything is written: a results JSON (an existing
file must be empty or a results file of this suite, :func:`foreign_file_problem`: the rule the plugin
applies to ``--conformance-results``), an HTML report (empty or one of this suite's reports), or a
summary appended to (any regular file); never a device, a folder, a FIFO or a socket
(:func:`output_problem`, :class:`UnsafeOutput`). :func:`write_output` checks, then writes atomically
(a summary: appends in place).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from types import MappingProxyType

from conformance.results.writing import FORMAT, atomic_write_text


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


OUTPUT_KINDS = MappingProxyType({"results": is_results_file, "report": is_report_file, "append": None})


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
    temporary file in the same folder and a rename, or, for ``append``, added to the end of the file
    in place (``open(path, "a")``: concurrent appends, a shell's open descriptor and a symlink's
    target all keep what they hold)."""
    path = check_output(path, kind)
    if kind == "append":
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as handle:
            handle.write(text.encode("utf-8"))
    else:
        atomic_write_text(path, text)
    return path


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
