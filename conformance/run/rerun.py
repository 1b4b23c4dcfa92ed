"""``--conformance-item`` (exactly one item, by the id :mod:`conformance.results.rerun` reads:
``python -m conformance replay`` uses it) and each collected item's re-run command (the results
record's ``rerun``).

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.core.arguments import DEFAULT_TIMEOUT
from conformance.core.profiles import DEFAULT_PROFILE, PROFILES
from conformance.core.record import CANDIDATE, ItemRecord
from conformance.results.rerun import GENERATED, ItemId, ReplayError, command, parse_item, portable_id
from conformance.run.state import GENERATED as GENERATED_CONFIG, candidate_targets, timeout_user_set


def command_for(item: pytest.Item) -> str | None:
    """The re-run command of a collected item, with the options of its run that change what it
    does: the candidate of its op, its timeout where not the default, and for a generated item the seed,
    profile and examples."""
    record: ItemRecord | None = getattr(item, "record", None)
    if not isinstance(record, dict):
        return None
    config = item.config
    generated = bool(record.get("generated"))
    item_id = portable_id(Path(item.path), item.name, generated=generated, cwd=config.invocation_params.dir)
    impl = None
    op = record.get("op")
    if record.get("backend") == CANDIDATE and op:
        target = candidate_targets(config).get(op)
        impl = str(target.absolute(config.invocation_params.dir)) if target else None
    seconds = float(config.getoption("conformance_timeout", DEFAULT_TIMEOUT) or 0)
    timeout = seconds if seconds != DEFAULT_TIMEOUT and not timeout_user_set(config) else None
    if not generated:
        return command(item_id, impl=impl, benchmark=record.get("kind") == "benchmark", timeout=timeout)
    gen = config.stash.get(GENERATED_CONFIG, None)
    if gen is None:
        return command(item_id, impl=impl, timeout=timeout)
    here = Path(config.invocation_params.dir)
    kept = None if Path(gen.counterexamples) == here / "reports" / "counterexamples" else _shown(gen.counterexamples, here)
    return command(item_id, impl=impl, seed=gen.seed,
                   profile=gen.profile if gen.profile != DEFAULT_PROFILE else None,
                   examples=gen.examples if gen.examples != PROFILES[gen.profile]["examples"] else None,
                   shrink=gen.shrink, counterexamples=kept, timeout=timeout)


def _shown(path: Path, here: Path) -> str:
    """``path`` relative to ``here`` when inside it, else absolute."""
    try:
        return Path(path).resolve().relative_to(here.resolve()).as_posix()
    except ValueError:
        return str(Path(path).resolve())


def _matches(item: pytest.Item, wanted: ItemId) -> bool:
    if item.name != wanted.name:
        return False
    if wanted.generated:
        return getattr(item.parent, "name", None) == GENERATED and bool(getattr(item, "record", {}).get("generated"))
    return not getattr(item, "record", {}).get("generated") and Path(item.path).resolve() == wanted.path.resolve()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    texts = config.getoption("conformance_item", None)
    if not texts:
        return
    cwd = config.invocation_params.dir
    try:
        wanted = [parse_item(text, cwd=cwd) for text in texts]
    except ReplayError as exc:
        raise pytest.UsageError(f"--conformance-item {exc}") from None
    kept = [item for item in items if any(_matches(item, w) for w in wanted)]
    missing = [w.text for w in wanted if not any(_matches(item, w) for item in kept)]
    if missing:
        known = ""
        if any(w.generated and w.text in missing for w in wanted):  # a mistyped property: name the ones there are
            properties = sorted({item.name.split("[")[0] for item in items if getattr(item.parent, "name", None) == GENERATED})
            known = f"; the generated properties collected: {', '.join(properties) or 'none'}"
        raise pytest.UsageError(f"--conformance-item: no item {', '.join(missing)} in this run "
                                f"(collected {len(items)} item(s) under the given paths and options{known})")
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


@pytest.hookimpl(trylast=True)
def pytest_itemcollected(item: pytest.Item) -> None:
    """Each record carries its re-run command (the results file's ``rerun``; the report shows it)."""
    record = getattr(item, "record", None)
    if isinstance(record, dict) and "rerun" not in record:
        try:
            rerun = command_for(item)
        except Exception:  # noqa: BLE001 - a convenience: never fail collection over it
            rerun = None
        if rerun:
            record["rerun"] = rerun
