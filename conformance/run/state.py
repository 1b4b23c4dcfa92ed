"""What the plugin's modules share, in one place below them: whether this run is the suite's
(:func:`is_conformance_run`, :mod:`conformance.run.options`'s), the command line's selection, the generated items' configuration,
per-item timeouts, spec paths relative to the rootdir, and whether this process is an xdist
worker. The modules of ``run/`` import this one and never each other's privates."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from conformance.backends.base import Backend
from conformance.cases.drawn import DrawnExamples
from conformance.core.profiles import PROFILES
from conformance.core.record import ItemRecord
from conformance.core.target import CandidateTarget, TargetError, parse_targets
# whether a run is the suite's lives below the plugin, in its options (the entry point imports them alone);
# is_conformance_run, WORKER_FLAG and SPEC_SUFFIXES are passed on to the plugin's modules from here
from conformance.run.options import BUDGET_SHARE, SPEC_SUFFIXES, WORKER_FLAG, is_conformance_run  # noqa: F401


@dataclass
class Selection:
    """What the command line asked to run."""

    backends: dict[str, Backend]
    devices: list[str]
    dtypes: list[str] | None
    ops: list[str] | None


SELECTION = pytest.StashKey[Selection]()
CANDIDATE_TARGETS = pytest.StashKey[dict[str, CandidateTarget]]()


def candidate_targets(config: pytest.Config) -> dict[str, CandidateTarget]:
    """``--conformance-impl``'s values parsed once per run, by op (whichever hook asks first)."""
    if CANDIDATE_TARGETS not in config.stash:
        try:
            targets = parse_targets(config.getoption("conformance_impl", None) or [])
        except TargetError as exc:
            raise pytest.UsageError(f"--conformance-impl {exc}") from None
        config.stash[CANDIDATE_TARGETS] = {target.op: target for target in targets}
    return config.stash[CANDIDATE_TARGETS]


@dataclass
class GeneratedConfig:
    profile: str
    examples: int
    seed: int
    seed_given: bool
    counterexamples: Path
    database: Path | None
    impl_targets: dict[str, CandidateTarget]
    shrink: bool = True  # --conformance-no-shrink: report the first failing example as drawn
    budget: float | None = None  # --conformance-budget (None: BUDGET_SHARE of the item's timeout; 0: none)
    drawn: DrawnExamples = field(default_factory=DrawnExamples)  # the run's clean runs, replayed by the next backend
    examples_given: bool = False  # --conformance-examples named the count: no backend's emulated_examples caps it

    def budget_for(self, item) -> float | None:
        """The item's search budget in seconds (None: no limit)."""
        if self.budget is not None:
            return self.budget or None
        seconds = item_timeout(item)
        return BUDGET_SHARE * seconds if seconds else None

    def examples_for(self, backend: Backend, device: str) -> int:
        """The drawn examples of a generated item of ``backend`` on ``device``: the run's count, capped by
        the backend's ``emulated_examples`` on a device it emulates unless the count was named."""
        cap = backend.emulated_examples.get(device)
        return self.examples if cap is None or self.examples_given else min(self.examples, cap)

    def hypothesis_settings(self, examples: int | None = None):
        profile = PROFILES[self.profile]
        return settings(
            max_examples=self.examples if examples is None else examples,
            deadline=None,
            derandomize=False,
            database=DirectoryBasedExampleDatabase(str(self.database)) if self.database else None,
            phases=[getattr(Phase, name) for name in profile["phases"] if self.shrink or name != "shrink"],
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
            print_blob=False,
        )


GENERATED = pytest.StashKey[GeneratedConfig]()


def relative_spec(record: ItemRecord, config: pytest.Config) -> ItemRecord:
    """Spec paths relative to the rootdir, so that runs from different checkouts match up."""
    spec = record.get("spec")
    if spec and os.path.isabs(spec):
        relative = _relative_to(spec, str(config.rootpath))
        if relative is not None:
            record = {**record, "spec": relative}
    return record


@functools.lru_cache(maxsize=256)  # a run has a few spec files and thousands of records: resolved once each
def _relative_to(spec: str, root: str) -> str | None:
    try:
        return Path(spec).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return None


# a spec's top-level ``op:`` line as the loader reads it: after a BOM, the key quoted or not
# (tests/test_outside_project.py, tests/test_opt_in.py)
_OP_KEY = re.compile(rb"^(?:\xef\xbb\xbf)?(?:op|\"op\"|'op')\s*:", re.M)


def is_conformance_spec(path: Path) -> bool:
    """A YAML file with a top-level ``op:`` line: one of the suite's specs (valid or not), not some
    other YAML file (an OpenAPI document, a CI config). Asked only in a run of the suite's."""
    if path.suffix not in SPEC_SUFFIXES or not path.is_file():
        return False
    try:
        with path.open("rb") as handle:
            return bool(_OP_KEY.search(handle.read(1 << 20)))
    except OSError:
        return False


def is_controller(config: pytest.Config) -> bool:
    """This process is not a pytest-xdist worker (the controller of a distributed run, or the only process)."""
    return not hasattr(config, "workerinput")


def timeout_user_set(config: pytest.Config) -> bool:
    if not config.pluginmanager.hasplugin("timeout"):
        return True  # nothing to set
    if config.getoption("timeout", None) is not None or os.environ.get("PYTEST_TIMEOUT"):
        return True
    try:
        return bool(config.getini("timeout"))
    except ValueError:
        return False


def item_timeout(item: pytest.Item) -> float:
    """The item's pytest-timeout timeout in seconds (0: none)."""
    marker = item.get_closest_marker("timeout")
    value = None
    if marker is not None:
        value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    if value is None:
        value = item.config.getoption("timeout", None) or os.environ.get("PYTEST_TIMEOUT")
        if value is None:
            try:
                value = item.config.getini("timeout")
            except ValueError:
                value = None
    try:
        return max(0.0, float(value or 0))
    except (TypeError, ValueError):
        return 0.0
