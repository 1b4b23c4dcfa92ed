"""Under pytest-xdist the records travel from the workers in each report's user properties and the
controller writes the file. The controller collects nothing itself, so each worker's first report
also carries its collection: every conformance item's node id with its identity (``item.record``).
That is how the controller knows which items a run expects (:class:`Collected`), and what an item
whose worker died was (conformance/run/crashes.py). Each spec case's context travels once per
process the same way.

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.core.record import ItemRecord
from conformance.core.text import valid_strings, valid_text
from conformance.run.state import is_controller

CASE_PROPERTY = "conformance_case"  # user property: {"key": "<spec>::<case>", "context": case_context(case)}
_CASES_SENT = pytest.StashKey[set]()
COLLECTION_PROPERTY = "conformance_collection"  # user property: a worker's [[node id, identity]...], once per process
COLLECTED = pytest.StashKey["Collected"]()
_COLLECTION_SENT = pytest.StashKey[bool]()


class Collected:
    """The conformance items a run expects, each with its identity record (``item.record``): those
    this process collected, or (in the xdist controller) those the workers' first reports brought."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[str, ItemRecord]] = {}  # results key -> (node id, identity)

    def add(self, pairs) -> None:
        for nodeid, identity in pairs:
            self.items[record_key(nodeid, identity)] = (nodeid, identity)

    def keys(self) -> set[str]:
        return set(self.items)

    def pairs(self) -> list[list]:
        return [[nodeid, identity] for nodeid, identity in self.items.values()]

    def identity(self, nodeid: str) -> ItemRecord | None:
        return next((identity for known, identity in self.items.values() if known == nodeid), None)


def collected(config: pytest.Config) -> Collected:
    return config.stash.setdefault(COLLECTED, Collected())


def pytest_collection_finish(session: pytest.Session) -> None:
    collected(session.config).add(
        (item.nodeid, record) for item in session.items if isinstance(record := getattr(item, "record", None), dict))


class WorkerCollections:
    """The controller's side of the ledger: takes in each worker's collection from its first report.
    tryfirst, so that the results writer and a crashed item's record see it."""

    def __init__(self, config: pytest.Config):
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report) -> None:
        for key, value in getattr(report, "user_properties", ()):
            if key == COLLECTION_PROPERTY:
                collected(self.config).add(value)



def record_key(nodeid: str, record: ItemRecord) -> str:
    """The item's key in the results file: its node id, with the spec path in front where pytest
    leaves the file out (a spec file given on the command line outside the rootdir has node id
    ``::name``, so two such files would collide)."""
    return f"{record.get('spec')}{nodeid}" if nodeid.startswith("::") and record.get("spec") else nodeid



def case_context(case) -> dict[str, Any]:
    """What a report needs of a spec case beyond its records (the results file's ``cases`` map)."""
    error = case.expected_error
    return {"source": case.source, "derivation": case.derivation or None, "inputs": case.inputs,
            "expected": case.expected,
            "expected_error": {"type": error.type, "match": error.match} if error is not None else None,
            "line": case.line}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Each spec case's context travels once per process with the first report of one of its items."""
    report = yield
    if not is_controller(item.config) and not item.config.stash.get(_COLLECTION_SENT, False):
        item.config.stash[_COLLECTION_SENT] = True
        report.user_properties.append((COLLECTION_PROPERTY, collected(item.config).pairs()))
    case = getattr(item, "case", None)
    if case is not None and hasattr(case, "inputs") and hasattr(case, "spec_path"):
        key = f"{case.spec_path}::{case.id}"
        sent = item.config.stash.setdefault(_CASES_SENT, set())
        if key not in sent:
            sent.add(key)
            try:
                report.user_properties.append((CASE_PROPERTY, {"key": key, "context": case_context(case)}))
            except Exception:  # noqa: BLE001 - context is for the report; never fail an item over it
                pass
    return report




class WorkerText:
    """A worker's reports and warnings made valid text before execnet sends them: it refuses a lone
    surrogate (a candidate's ``f"cannot open {name}"``, the name from a Latin-1 folder), which ended
    the worker and the run (``conformance/core/text.py``)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_report_to_serializable(self, config: pytest.Config, report):
        data = yield
        return None if data is None else valid_strings(data)

    @pytest.hookimpl(tryfirst=True)
    def pytest_warning_recorded(self, warning_message, when, nodeid, location) -> None:
        message = warning_message.message
        shown: tuple[Any, ...]
        try:
            shown = (str(message), getattr(message, "args", ()))
            valid = valid_strings(shown) == shown
        except Exception:  # noqa: BLE001 - xdist's own str() of it would raise too
            shown, valid = (f"<{type(message).__name__} object; str() failed>",), False
        if not valid:
            warning_message.message = valid_text(shown[0])  # a str: xdist sends its text alone
        warning_message.filename = valid_text(str(warning_message.filename))


def configure(config: pytest.Config) -> None:
    """This module's part of the run's state (called by :func:`conformance.run.plugin.pytest_configure`)."""
    if is_controller(config) and not config.pluginmanager.has_plugin("conformance-collections"):
        config.pluginmanager.register(WorkerCollections(config), "conformance-collections")
    if not is_controller(config) and not config.pluginmanager.has_plugin("conformance-worker-text"):
        config.pluginmanager.register(WorkerText(), "conformance-worker-text")
