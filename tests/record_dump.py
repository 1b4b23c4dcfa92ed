"""A pytest plugin for the tests of the suite itself: ``-p tests.record_dump`` writes every
item's conformance record (outcome included) to the JSON file named by CONFORMANCE_RECORDS."""

from __future__ import annotations

import json
import os

from conformance.run import outcomes

_records: dict[str, dict] = {}


def pytest_sessionstart(session):
    _records.clear()  # in-process runs share this module


def pytest_runtest_logreport(report):
    for key, value in getattr(report, "user_properties", ()):
        if key == outcomes.PROPERTY:
            _records[report.nodeid] = value


def pytest_sessionfinish(session):
    path = os.environ.get("CONFORMANCE_RECORDS")
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(_records, handle, indent=1, default=str)
