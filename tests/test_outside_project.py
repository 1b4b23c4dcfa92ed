"""The plugin in someone else's project: installed in an environment, the suite's pytest plugin is
loaded by every pytest run there (``pytest11``). A run of that project's own tests must go as it
would without the suite -- even with a ``specs/`` folder of unrelated YAML files (an OpenAPI
document, a YAML fixture with a top-level ``op:`` line, the counterexamples ``conformance check``
wrote under ``reports/`` -- while a run of the suite's (an explicit opt-in: ``--conformance``, any of
its options, or its ini values) is unchanged (conformance.run.state.is_conformance_run; in process:
tests/test_opt_in.py; the main job's records are compared in
tests/test_console.py and by tests/results_diff.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conformance_runs import NO_GC_AT_EXIT, OWN_COALESCE_SPEC

OPENAPI = """\
openapi: 3.0.0
info: {title: my service, version: "1"}
paths: {}
"""

# the project's own tests check what the suite's plugin must leave alone
OWN_TESTS = """\
import os
import signal
import sys

import pytest
from hypothesis import given, strategies as st


@given(st.integers())
def test_hypothesis_of_my_own(x):
    assert x == x


def test_the_run_is_left_as_it_was():
    assert "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ
    assert "CONFORMANCE_GENERATED_SEED" not in os.environ
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_suite_is_not_imported():
    # the entry point adds the suite's options and nothing more: no torch, no plugin to load
    assert "torch" not in sys.modules
    assert "conformance.run.plugin" not in sys.modules
"""



def _project(root: Path) -> Path:
    (root / "specs").mkdir()
    (root / "specs" / "openapi.yaml").write_text(OPENAPI, encoding="utf-8")
    (root / "tests" / "data").mkdir(parents=True)
    (root / "tests" / "data" / "fixture.yaml").write_text("op: rename\nfrom: a\nto: b\n", encoding="utf-8")
    (root / "tests" / "test_mine.py").write_text(OWN_TESTS, encoding="utf-8")
    return root


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest in the project, from a shell of the project's own (nothing of this test run's environment)."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("PYTEST_", "HYPOTHESIS_", "CONFORMANCE_"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=env, preexec_fn=_interactive_signals)


def _interactive_signals() -> None:
    """SIGINT as a terminal's shell leaves it: a test run started in the background of a script
    inherits it ignored, and the project's own test reads Python's default handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("args", [(), ("-n", "2")], ids=["one-process", "xdist"])
@pytest.mark.slow
def test_a_projects_own_run_is_left_alone(tmp_path, args):
    project = _project(tmp_path)
    run = _pytest(project, *args)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    assert "3 passed" in output and "error" not in output.lower(), output[-3000:]
    assert "generated" not in output and "conformance" not in output, output[-3000:]
    # no reports/ of ours (pytest-benchmark makes .benchmarks/ in every run, the project's Hypothesis .hypothesis/)
    assert sorted(path.name for path in project.iterdir() if not path.name.startswith(".")) == ["specs", "tests"]
    # nor is `pytest specs` the suite's run in a project of one's own (no opt-in): nothing collected
    specs = _pytest(project, "specs", *args)
    assert specs.returncode == 5 and "invalid-spec" not in specs.stdout, (specs.stdout + specs.stderr)[-3000:]


@pytest.mark.slow
def test_a_spec_of_the_projects_own_still_runs(tmp_path):
    project = _project(tmp_path)
    (project / "specs" / "mine.yaml").write_text(OWN_COALESCE_SPEC, encoding="utf-8")
    run = _pytest(project, "specs/mine.yaml", "--conformance-backend", "coo", "--conformance-device", "cpu")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "1 passed" in run.stdout
    # a folder of specs named with --conformance is a run of the suite's: its generated items come too
    # (the OpenAPI document beside them is reported, as a spec missing its op would be); without it,
    # the folder is the project's own (tests/test_opt_in.py)
    listed = _pytest(project, "specs", "--conformance", "--collect-only")
    assert "specs/mine.yaml::one-duplicate[" in listed.stdout
    assert "specs::generated::coalesce-agrees-with-reference[" in listed.stdout
    assert "specs/openapi.yaml::invalid-spec" in listed.stdout


def test_a_run_inside_a_process_leaves_the_processs_environment(pytester, monkeypatch):
    """A run of the suite's sets Hypothesis' storage folder (and, with a drawn seed, the seed for
    its xdist workers) for itself only: a run inside another process (``pytest.main``) removes
    them again at its end."""
    for name in ("HYPOTHESIS_STORAGE_DIRECTORY", "CONFORMANCE_GENERATED_SEED"):
        monkeypatch.delenv(name, raising=False)
    pytester.mkdir("specs")
    result = pytester.runpytest_inprocess("specs", "--collect-only", "-p", "no:cacheprovider", *NO_GC_AT_EXIT,
                                          "--conformance-hypothesis-profile", "thorough")
    assert "conformance generated cases: profile thorough" in result.stdout.str()  # the suite's; seed drawn
    assert "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ
    assert "CONFORMANCE_GENERATED_SEED" not in os.environ
