"""What ``conformance check`` does so that the reproducers of its failures work from any directory
and go with the check that wrote them:

- a file candidate (``adagrad=my_adagrad.py:MyAdagrad``) is handed to its run by absolute path
  (:func:`absolute_targets`), so every command the run prints that names it -- the ``replay`` lines,
  the counterexample scripts and specs, check's own command line -- names it so too;
- the previous check's counterexample scripts (and their specs or notes) move to
  ``reports/counterexamples/.previous/`` before the run writes new ones
  (:func:`set_aside_counterexamples`), as the previous results move to ``reports/.previous/``.

Nothing here imports torch or the op records.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Callable

from conformance.core.target import CandidateTarget

PREVIOUS = ".previous"  # the results file's convention (conformance.results.store.PREVIOUS_DIR)
WRITTEN = (".py", ".yaml", ".notes.txt")  # what conformance.cases.counterexamples writes for a failure
COUNTEREXAMPLES_OPTION = "--conformance-counterexamples"


def absolute_targets(targets: list[CandidateTarget], cwd: Path | None = None) -> list[CandidateTarget]:
    """Each file target with its path made absolute (from ``cwd``, default the current directory),
    the others as they are."""
    return [target.absolute(cwd or Path.cwd()) for target in targets]


def counterexamples_folder(results: Path, extra: list[str], cwd: Path | None = None) -> Path:
    """Where the run writes its counterexamples: ``--conformance-counterexamples DIR`` among the
    pytest arguments (relative to ``cwd``), else ``counterexamples/`` beside the results file (the
    plugin's rule, conformance.cases.counterexamples.counterexamples_directory)."""
    here = Path(cwd or Path.cwd())
    given = None
    for i, arg in enumerate(extra):
        if arg == COUNTEREXAMPLES_OPTION and i + 1 < len(extra):
            given = extra[i + 1]
        elif arg.startswith(COUNTEREXAMPLES_OPTION + "="):
            given = arg.split("=", 1)[1]
    if given:
        return Path(os.path.abspath(here / given))
    return Path(results).parent / "counterexamples"


def _written(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.is_file() and not p.is_symlink()
                  and p.name.endswith(WRITTEN))


def set_aside_counterexamples(folder: Path, shown: Callable[[Path], str] = str) -> list[str]:
    """Make ``folder/.previous/`` hold exactly the counterexample files now in ``folder`` (the
    previous check's; what ``.previous/`` held before, a check older still, is removed), so the
    folder holds only what the coming run writes. The saved failing examples ``replay`` runs first
    (``.failing/``) stay. Returns what moved, a line to be said (none when nothing did); raises OSError."""
    files = _written(folder)
    previous = folder / PREVIOUS
    if previous.is_symlink() or (previous.exists() and not previous.is_dir()):
        raise OSError(errno.ENOTDIR, "not a folder", str(previous))
    for old in _written(previous):
        old.unlink()
    if not files:
        return []
    previous.mkdir(parents=True, exist_ok=True)
    for path in files:
        os.replace(path, previous / path.name)
    return [f"moved the previous counterexample scripts ({len(files)} file(s)) to {shown(previous)}"]
