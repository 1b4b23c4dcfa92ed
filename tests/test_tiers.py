"""The harness's three tiers (conftest.py at the repository's root): which tests each command
runs, and how many xdist workers it starts by default."""

from __future__ import annotations

import importlib.util

import pytest

from conformance_runs import REPO


def _root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", REPO / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tiers(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with the repository's root conftest and one test of each tier."""
    pytester.makeconftest((REPO / "conftest.py").read_text(encoding="utf-8"))
    pytester.makeini("[pytest]\nmarkers =\n    slow: the slow tier\n    acceptance: the acceptance tier\n")
    pytester.makepyfile(test_one_of_each="""
        import pytest

        def test_fast():
            pass

        @pytest.mark.slow
        def test_slow():
            pass

        @pytest.mark.acceptance
        def test_acceptance():
            pass
    """)
    return pytester


@pytest.mark.parametrize("args, ran", [
    ((), {"test_fast"}),
    (("--run-slow",), {"test_fast", "test_slow"}),
    (("--run-slow", "-m", "slow"), {"test_slow"}),
    (("--run-acceptance", "-m", "acceptance"), {"test_acceptance"}),
    (("-m", "acceptance"), {"test_acceptance"}),  # a -m expression naming a tier decides by itself
    (("--run-slow", "--run-acceptance"), {"test_fast", "test_slow", "test_acceptance"}),
], ids=["fast", "full", "slow", "acceptance", "named-by-m", "every-test"])
def test_each_tier_runs_its_tests_and_deselects_the_others(tiers, args, ran):
    reprec = tiers.inline_run("-p", "no:xdist", "-p", "no:cacheprovider", *args)
    passed, skipped, failed = reprec.listoutcomes()
    assert not failed and not skipped
    assert {report.nodeid.split("::")[-1] for report in passed} == ran
    deselected = reprec.getcalls("pytest_deselected")
    assert sum(len(call.items) for call in deselected) == 3 - len(ran)


class _Config:
    def __init__(self, **options):
        self.options = options

    def getoption(self, name, default=None):
        return self.options.get(name, default)


def test_the_full_and_slow_tiers_take_two_workers_per_core_the_others_one(monkeypatch):
    conftest = _root_conftest()
    monkeypatch.setattr(conftest.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert conftest._default_workers(_Config()) == "auto"  # the fast tier
    assert conftest._default_workers(_Config(**{"--run-slow": True})) == 4
    assert conftest._default_workers(_Config(**{"--run-slow": True, "markexpr": "slow"})) == 4
    assert conftest._default_workers(_Config(**{"--run-acceptance": True, "markexpr": "acceptance"})) == "auto"
    assert conftest._default_workers(_Config(**{"--run-slow": True, "--run-acceptance": True})) == "auto"
