"""pytest-benchmark: what the installed suite costs a project's own test run (which it leaves alone).

Run from the repository root, on a quiet machine (not part of either test tier):

    python -m pytest benchmarks/test_bench_startup.py --benchmark-only --benchmark-group-by=group \
        --benchmark-json=reports/bench_startup.json

Each round is one ``python -m pytest -q`` in a child process, in a project of one test and a
``specs/`` folder of its own (an OpenAPI document), timed from start to exit: once as the
environment has it (the suite's ``pytest11`` entry point loads its options), once with
``-p no:conformance`` (no suite at all). The ratio of the two medians is the suite's cost; the
entry point imports no torch (``conformance/run/options.py``), so it should stay close to 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROUNDS = int(os.environ.get("CONFORMANCE_BENCH_STARTUP_ROUNDS", "10"))
OPENAPI = 'openapi: 3.0.0\ninfo: {title: my service, version: "1"}\npaths: {}\n'


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    (root / "specs").mkdir()
    (root / "specs" / "openapi.yaml").write_text(OPENAPI, encoding="utf-8")
    (root / "tests").mkdir()
    (root / "tests" / "test_mine.py").write_text("def test_mine():\n    assert 1 + 1 == 2\n", encoding="utf-8")
    return root


def _own_run(project: Path, *args: str) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PYTEST_", "CONFORMANCE_"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.benchmark(group="a project's own pytest run")
@pytest.mark.parametrize("plugin", ["suite installed", "-p no:conformance"])
def test_a_projects_own_run(benchmark, project, plugin):
    args = ("-p", "no:conformance") if plugin.startswith("-p") else ()
    _own_run(project, *args)  # warm-up: the file system's caches
    benchmark.pedantic(_own_run, args=(project, *args), rounds=ROUNDS, iterations=1)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "--benchmark-only", "--benchmark-group-by=group", *sys.argv[1:]]))
