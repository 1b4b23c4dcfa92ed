"""A new backend, added the documented way (docs/architecture.md), in a copy of the package: one backend module
under ``conformance/backends/``, its name in ``BUILTIN_BACKEND_MODULES`` and one test file -- three files, no
other. pytest then collects and judges its items on every spec case and generated property of its op, beside
the reference, and the backend's own test runs. (The issue: adding the compiled backend touched 19 files.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from test_new_op import ROOT, _changed

BACKEND_MODULE = '''"""``throwaway``: coalesce through torch.Tensor.coalesce (a backend of tests/test_new_backend.py)."""

from __future__ import annotations

from conformance.backends.base import Backend
from conformance.ops import OPS


def coalesce_by_torch(inputs, ctx):
    return OPS["coalesce"].run_candidate(lambda tensor: tensor.coalesce(), inputs, ctx)


class ThrowawayBackend(Backend):
    name = "throwaway"
    description = "torch.Tensor.coalesce, run as a backend of its own"
    devices = ("cpu",)


BACKEND = ThrowawayBackend({"coalesce": coalesce_by_torch})
'''

BACKEND_TEST = '''from conformance.backends import builtin_backends
from conformance.judging.runner import run_item
from conformance.specs.load import load_spec


def test_the_throwaway_backend_meets_the_documented_coalesce():
    spec = load_spec("specs/coalesce.yaml")
    case = next(case for case in spec.cases if case.expected is not None and "float64" in case.dtypes)
    run_item(case, builtin_backends()["throwaway"], "cpu", "float64")
'''


@pytest.mark.slow  # child interpreters on a copy of the package
def test_a_new_backend_takes_its_module_its_registration_and_its_test(tmp_path):
    shutil.copytree(ROOT / "conformance", tmp_path / "conformance", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    (tmp_path / "conformance/backends/throwaway.py").write_text(BACKEND_MODULE, encoding="utf-8")
    registry = tmp_path / "conformance/backends/__init__.py"
    text = registry.read_text(encoding="utf-8")
    assert '    "conformance.backends.compiled",\n)' in text
    registry.write_text(text.replace('    "conformance.backends.compiled",\n)',
                                     '    "conformance.backends.compiled",\n    "conformance.backends.throwaway",\n)'),
                        encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_throwaway.py").write_text(BACKEND_TEST, encoding="utf-8")
    assert _changed(tmp_path) == {"conformance/backends/throwaway.py", "conformance/backends/__init__.py",
                                  "tests/test_throwaway.py"}

    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    results = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "specs", "tests/test_throwaway.py", "--conformance-op", "coalesce", "-p",
         "no:cacheprovider",
         "-p", "no:xdist", "-q", "--conformance-device", "cpu", "--conformance-backend", "reference,throwaway",
         "--conformance-examples", "2", "--conformance-results", str(results)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    records = [r for r in json.loads(results.read_text())["records"] if r["backend"] == "throwaway"]
    spec_items = [r for r in records if not r.get("generated")]
    generated = {r["case"] for r in records if r.get("generated")}
    assert len(spec_items) >= 20 and {r["op"] for r in records} == {"coalesce"}
    assert {"coalesce-agrees-with-reference", "coalesce-layout-invariant"} <= generated, generated
    assert not [r["nodeid"] for r in records if r["outcome"] in ("failed", "error")]
    assert "1 passed" in run.stdout or "passed" in run.stdout  # tests/test_throwaway.py ran beside the specs
