"""What the plugin's modules share, in one place below them: the command line's selection, the
generated items' configuration, per-item timeouts, spec paths relative to the rootdir, and whether
this process is an xdist worker. The modules of ``run/`` import this one and never each other's
privates."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from conformance.backends.base import Backend
from conformance.cases.profiles import PROFILES
from conformance.record import ItemRecord


@dataclass
class Selection:
    """What the command line asked to run."""

    backends: dict[str, Backend]
    devices: list[str]
    dtypes: list[str] | None
    ops: list[str] | None


SELECTION = pytest.StashKey[Selection]()


# a generated item's default time budget, as a share of its pytest-timeout: the rest is left for the
# example in flight when the budget runs out, the counterexample written on a failure and the replays
BUDGET_SHARE = 0.5


@dataclass
class GeneratedConfig:
    profile: str
    examples: int
    seed: int
    seed_given: bool
    counterexamples: Path
    database: Path | None
    impl_targets: dict[str, str]
    shrink: bool = True  # --conformance-no-shrink: report the first failing example as drawn
    budget: float | None = None  # --conformance-budget (None: BUDGET_SHARE of the item's timeout; 0: none)

    def budget_for(self, item) -> float | None:
        """The item's search budget in seconds (None: no limit)."""
        if self.budget is not None:
            return self.budget or None
        seconds = item_timeout(item)
        return BUDGET_SHARE * seconds if seconds else None

    def hypothesis_settings(self):
        from hypothesis import HealthCheck, Phase, settings
        from hypothesis.database import DirectoryBasedExampleDatabase

        profile = PROFILES[self.profile]
        return settings(
            max_examples=self.examples,
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
        try:
            record = {**record, "spec": Path(spec).resolve().relative_to(config.rootpath.resolve()).as_posix()}
        except ValueError:
            pass
    return record


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
