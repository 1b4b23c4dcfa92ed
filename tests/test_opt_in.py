"""The suite's plugin is an explicit opt-in (issue 30, point 1): installed, it is loaded by every
pytest run of the environment (``pytest11``), and collects and changes nothing unless the run gives
``--conformance``, one of its ``--conformance-...`` options, its ``conformance_results`` ini value,
or a path inside a folder the ini value ``conformance_specs`` names (this repository's
pyproject.toml names ``specs``). Path names alone never decide (conformance.run.state.is_conformance_run).

In process (pytester): collection only, so each run takes well under a second."""

from __future__ import annotations

import pytest

from conformance_runs import NO_GC_AT_EXIT, OWN_COALESCE_SPEC

OPENAPI = "openapi: 3.0.0\ninfo: {title: my service, version: '1'}\npaths: {}\n"
FIXTURE = "op: rename\nfrom: a\nto: b\n"  # a project's YAML fixture that happens to start with op:


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project of one's own: an OpenAPI document under specs/, a YAML fixture with a top-level
    ``op:`` under its tests, what ``conformance check`` wrote under reports/, and one test."""
    pytester.makefile(".yaml", **{"specs/openapi": OPENAPI, "tests/data/fixture": FIXTURE,
                                  "reports/counterexamples/coalesce-agrees": OWN_COALESCE_SPEC})
    pytester.makepyfile(**{"tests/test_mine": "def test_mine():\n    pass\n"})
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *NO_GC_AT_EXIT, "-q", *args)


def test_a_projects_own_run_collects_none_of_its_yaml(project):
    result = _run(project)  # every folder: tests/, specs/, reports/
    result.assert_outcomes(passed=1)
    assert "invalid-spec" not in result.stdout.str() and "generated" not in result.stdout.str()


def test_a_projects_specs_folder_is_not_a_run_of_the_suites(project):
    result = _run(project, "specs", "reports")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout.str()[-2000:]
    assert "invalid-spec" not in result.stdout.str()
    fixture = _run(project, "tests/data", "--collect-only")
    assert fixture.ret == pytest.ExitCode.NO_TESTS_COLLECTED, fixture.stdout.str()[-2000:]


def test_the_plugin_is_registered_only_in_a_run_of_the_suites(project):
    """The entry point registers the suite's options in every run; the plugin itself (and with it
    torch, Hypothesis and the op records) only in a run that opts in (tests/test_outside_project.py
    shows a project's own run importing no torch)."""
    own = project.parseconfigure("tests")
    assert own.pluginmanager.has_plugin("conformance.run.options")
    assert not own.pluginmanager.has_plugin("conformance.run.plugin")
    assert own.getoption("conformance_examples") is None  # the options are there all the same
    suites = project.parseconfigure("specs", "--conformance-examples", "0")
    assert suites.pluginmanager.has_plugin("conformance.run.plugin")
    assert suites.pluginmanager.has_plugin("conformance.run.generated_plugin")


def test_the_plain_flag_opts_in(project):
    result = _run(project, "reports", "--conformance", "--collect-only", "--conformance-examples", "0",
                  "--conformance-device", "cpu")
    result.stdout.fnmatch_lines(["*coalesce-agrees.yaml::one-duplicate*"])
    assert "test_mine" not in result.stdout.str()
    flagged = _run(project, "specs", "--conformance", "--collect-only")  # asked for: the suite's run
    flagged.stdout.fnmatch_lines(["*specs/openapi.yaml::invalid-spec*", "*specs::generated::coalesce-*"])


def test_any_conformance_option_opts_in(project):
    result = _run(project, "reports", "--collect-only", "--conformance-op", "coalesce",
                  "--conformance-examples", "0", "--conformance-device", "cpu")
    result.stdout.fnmatch_lines(["*coalesce-agrees.yaml::one-duplicate*"])


OWN_OPTION = """\
def pytest_addoption(parser):
    parser.addoption("--conformance-level", default="1", help="our own compliance level")
"""


def test_a_projects_own_conformance_option_does_not_opt_it_in(project):
    """Issue 52 (F7): any argument starting --conformance- opted in, so a project's own --conformance-level
    ran its YAML fixture as an invalid spec; only the suite's own option names do."""
    project.makeconftest(OWN_OPTION)
    given = _run(project, "tests", "--conformance-level=3")
    given.assert_outcomes(passed=1)
    assert "invalid-spec" not in given.stdout.str()
    project.makepyprojecttoml('[tool.pytest.ini_options]\naddopts = "--conformance-level 3"\n')
    configured = project.parseconfigure("tests")
    assert configured.getoption("--conformance-level") == "3"
    assert not configured.pluginmanager.has_plugin("conformance.run.plugin")
    both = _run(project, "tests/data", "--conformance-level=3", "--conformance-op=coalesce", "--collect-only")
    both.stdout.fnmatch_lines(["*fixture.yaml::invalid-spec*"])  # the suite's own option still opts in


def test_a_folder_scan_collects_the_specs_the_loader_reads(pytester: pytest.Pytester):
    """Issue 52 (F12): a spec with a UTF-8 BOM or a quoted ``"op":`` key loaded when named, and was passed
    over in its folder (the scan looked for the bytes ``op:``); a YAML file without the key still is."""
    quoted = OWN_COALESCE_SPEC.replace("op: coalesce", '"op": coalesce', 1)
    assert quoted != OWN_COALESCE_SPEC
    specs = {"plain": OWN_COALESCE_SPEC, "bom": "\ufeff" + OWN_COALESCE_SPEC, "quoted": quoted,
             "single": quoted.replace('"op"', "'op'")}
    (pytester.path / "cases").mkdir()
    for name, text in {**specs, "other": OPENAPI}.items():
        (pytester.path / "cases" / f"{name}.yaml").write_text(text, encoding="utf-8")
    result = _run(pytester, "cases", "--conformance", "--collect-only", "--conformance-examples", "0",
                  "--conformance-device", "cpu", "--conformance-backend", "coo", "--conformance-dtype", "float32")
    result.stdout.fnmatch_lines_random([f"*cases/{name}.yaml::one-duplicate*" for name in specs])
    assert "other.yaml" not in result.stdout.str() and "invalid-spec" not in result.stdout.str()


def test_the_ini_names_the_folders_of_specs(pytester: pytest.Pytester):
    """As this repository's pyproject.toml does for ``specs``: ``pytest specs`` is the suite's run,
    ``pytest`` (testpaths: tests) is not."""
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["tests"]\nconformance_specs = ["specs"]\n')
    pytester.makefile(".yaml", **{"specs/mine": OWN_COALESCE_SPEC, "tests/data/fixture": FIXTURE})
    pytester.makepyfile(**{"tests/test_mine": "def test_mine():\n    pass\n"})
    own = _run(pytester)
    own.assert_outcomes(passed=1)
    suites = _run(pytester, "specs", "--collect-only")
    suites.stdout.fnmatch_lines(["*specs/mine.yaml::one-duplicate*", "*specs::generated::coalesce-*"])
    one = _run(pytester, "specs/mine.yaml", "--collect-only")
    one.stdout.fnmatch_lines(["*specs/mine.yaml::one-duplicate*"])
    elsewhere = _run(pytester, "tests", "--collect-only")
    assert "one-duplicate" not in elsewhere.stdout.str() and "invalid-spec" not in elsewhere.stdout.str()


def test_this_repositorys_ini_opts_its_specs_in_and_its_tests_out(pytestconfig):
    from conformance.run.options import PATHS_INI

    folders = [path.name for path in pytestconfig.getini(PATHS_INI)]
    assert folders == ["specs"]
    from conformance.run.state import is_conformance_run

    assert not is_conformance_run(pytestconfig)  # this very run of the harness's tests


def test_the_help_names_every_dtype_and_device():
    """``--help`` lists them without importing torch: the names must be the tables' own."""
    from conformance.core.devices import DEVICES
    from conformance.core.dtypes import DTYPES
    from conformance.run.options import DEVICE_NAMES, DTYPE_NAMES

    assert DTYPE_NAMES == tuple(DTYPES) and DEVICE_NAMES == tuple(DEVICES)
