"""``--conformance-shard K/N``: run one of N deterministic pieces of a run.

An item belongs to shard ``1 + sha256(node id) mod N``: every item lands in exactly one shard, and
which one depends only on its own node id (relative to the rootdir), not on the collection order,
the number of xdist workers or the machine. N runners given the same command line and shards
1/N ... N/N together run each item of the unsharded run once; ``conformance merge`` joins their
results files into one (:mod:`conformance.results.merge`). The shard is recorded in the results
file's run options (``conformance_shard``).

Registered from :mod:`conformance.run.plugin` through ``pytest_plugins``.

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

import pytest

from conformance.results.shards import OPTION, Shard, parse_shard, shard_of

SHARD = pytest.StashKey[Shard | None]()


def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    text = config.getoption("conformance_shard")
    if text is None:
        config.stash[SHARD] = None
        return
    try:
        shard = parse_shard(text)
    except ValueError as exc:
        raise pytest.UsageError(f"{OPTION}: {exc}") from None
    profile = config.getoption("conformance_hypothesis_profile", None)
    if profile == "thorough" and config.getoption("conformance_seed", None) is None:
        raise pytest.UsageError(f"{OPTION} {shard} with --conformance-hypothesis-profile thorough needs "
                                "--conformance-seed SEED: each shard would draw a fresh seed of its own, and "
                                "the shards would not be pieces of one run")
    config.stash[SHARD] = shard


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep this shard's items, deselect the others (before the plugin's reordering)."""
    shard = config.stash.get(SHARD, None)
    if shard is None or shard.count == 1:
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        (keep if shard_of(item.nodeid, shard.count) == shard.index else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config: pytest.Config) -> list[str]:
    shard = config.stash.get(SHARD, None)
    return [f"conformance shard: {shard} (by node id hash)"] if shard is not None else []
