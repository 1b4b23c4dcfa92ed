"""The examples each clean run of a generated property drew, kept so that the next backend of the
same property and dtype replays them instead of drawing them again (:class:`DrawnExamples`), and
the per-item seed that makes every backend draw the same ones (:func:`derive_seed`)."""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

from hypothesis import Phase

if TYPE_CHECKING:  # annotations only
    from conformance.cases.trial import Property

def derive_seed(base_seed: int, prop: Property, dtype: str) -> int:
    """Per-item seed: the same for every backend and device, so all of them see the same examples."""
    digest = hashlib.sha256(f"{base_seed}:{prop.id}:{dtype}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


class DrawnExamples:
    """The examples each clean run drew, kept so that the next backend replays them.

    Every backend of a property and dtype gets the same seed (:func:`derive_seed`), so Hypothesis
    draws each of them the very same examples. In a deterministic run (a fixed seed, no example
    database, no reuse or target phase) the examples of a *clean* run -- each one ran and passed,
    none was rejected -- are exactly the ones Hypothesis would draw for the next backend as long as
    that backend passes them all too. So the next backend replays them instead of drawing them
    again (drawing is most of a generated item's time). Any other outcome on a replayed example --
    a mismatch, an error, an unsupported example -- throws the replay away and runs the item under
    Hypothesis, which draws the same examples again, keeps drawing past unsupported ones and
    shrinks a failure: the verdict is the one Hypothesis alone would give.

    One belongs to each run (the plugin keeps it in its configuration, ``GeneratedConfig.drawn``).
    They are kept in memory, and with ``directory`` set (pytest-xdist: one folder of the run's,
    :mod:`conformance.run.generated_plugin`) also as files, so that one worker replays what another
    drew. A file that cannot be written or read is no replay: Hypothesis draws instead.
    """

    def __init__(self, capacity: int = 1024, directory: Path | None = None):
        self.capacity = capacity
        self.directory = directory
        self.runs: dict[tuple, list] = {}
        self.replayed = 0  # items answered from a replay (for the harness's own tests)

    @staticmethod
    def key(prop: Property, dtype: str, settings, base_seed: int, narrowed: frozenset = frozenset()) -> tuple | None:
        """The runs a replay stands for, or None where Hypothesis's search is not deterministic."""
        phases = set(settings.phases)
        if settings.database is not None or Phase.reuse in phases or Phase.target in phases \
                or Phase.generate not in phases:
            return None
        key = prop.id, dtype, derive_seed(base_seed, prop, dtype), settings.max_examples
        return (*key, tuple(sorted(narrowed))) if narrowed else key

    def _file(self, key: tuple) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / (hashlib.sha256(repr(key).encode()).hexdigest()[:32] + ".pickle")

    def get(self, key: tuple | None) -> list | None:
        if key is None or self.capacity <= 0:
            return None
        if key not in self.runs and (path := self._file(key)) is not None and path.is_file():
            try:
                self._remember(key, pickle.loads(path.read_bytes()))  # noqa: S301 - this run's own file
            except Exception:  # noqa: BLE001 - half-written or unreadable: Hypothesis draws instead
                return None
        return self.runs.get(key)

    def keep(self, key: tuple | None, examples: list) -> None:
        if key is None or self.capacity <= 0:
            return
        self._remember(key, examples)
        path = self._file(key)
        if path is not None and not path.exists():
            partial = path.with_name(f".{path.name}.{os.getpid()}")
            try:
                partial.write_bytes(pickle.dumps(examples))
                os.replace(partial, path)  # atomic: a reader sees the whole file or none
            except Exception:  # noqa: BLE001 - no file, no replay elsewhere: nothing lost
                partial.unlink(missing_ok=True)

    def _remember(self, key: tuple, examples: list) -> None:
        if len(self.runs) >= self.capacity:
            self.runs.pop(next(iter(self.runs)))
        self.runs[key] = examples

