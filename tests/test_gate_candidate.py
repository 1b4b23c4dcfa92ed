"""The gate a user drops into their own repository: ``conformance check`` and the reusable workflow
.github/workflows/gate-candidate.yml, whose "Gate" step's script is run here as written, from a
stand-in for a user's repository, on a wrong candidate (it must fail) and on torch's own Adagrad
(it must pass). Both write the results, the report and the job summary the workflow uploads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml

from conformance.core.target import CandidateTarget
from conformance.entry_points.check import pytest_command, specs_dir

from conformance_runs import REPO

WORKFLOW = REPO / ".github" / "workflows" / "gate-candidate.yml"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def step(name: str) -> dict:
    return next(s for s in workflow()["jobs"]["gate"]["steps"] if s.get("name") == name)


def test_the_specs_ship_inside_the_package():
    # the wheel's package data holds them (pyproject's package-data names specs_data/specs/*.yaml)
    found = sorted(p.name for p in specs_dir().glob("*.yaml"))
    assert found == sorted(p.name for p in (REPO / "specs").glob("*.yaml")) and "adagrad.yaml" in found
    command = pytest_command([CandidateTarget.parse("adagrad=mypkg:MyAdagrad")], results=REPO / "r.json")
    assert command[command.index("--conformance-backend") + 1] == "candidate,coo"  # stock torch beside it
    assert command[command.index("--conformance-op") + 1] == "adagrad"


def test_the_workflow_is_reusable_and_uploads_the_report():
    document = workflow()
    on = document.get("on", document.get(True))  # YAML 1.1 reads a bare `on` as true
    inputs = on["workflow_call"]["inputs"]
    assert {"impl", "suite", "torch-version"} <= set(inputs)
    assert inputs["impl"]["required"] is True
    env = document["jobs"]["gate"]["env"]
    assert env["IMPL"] == "${{ inputs.impl }}" and env["TORCH_VERSION"] == "${{ inputs.torch-version }}"
    install = step("Install")["run"]
    assert 'torch==$TORCH_VERSION' in install and '"$SUITE"' in install and "$INSTALL" in install
    upload = next(s for s in document["jobs"]["gate"]["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["if"] == "always()" and upload["with"]["path"] == "reports/"


def run_gate_step(tmp_path, impl: str, pytest_args: str = "") -> subprocess.CompletedProcess:
    """The workflow's Gate step, run by bash as GitHub would, in a user's repository holding mypkg."""
    user_repo = tmp_path / "user-repo"
    (user_repo / "mypkg").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "candidates" / "mutants.py", user_repo / "mypkg" / "__init__.py")
    # one xdist worker (through the workflow's pytest-args input, as a user may set it): the spec
    # cases and a few examples do not need a second worker importing torch again
    env = {**os.environ, "IMPL": impl, "DEVICE": "cpu", "PYTEST_ARGS": f"{pytest_args} -n 1".strip(),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           # this checkout's conformance, not the one an editable install may point at
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run(["bash", "-euo", "pipefail", "-c", step("Gate")["run"]], cwd=user_repo, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_gate_step_fails_a_wrong_candidate(tmp_path):
    # the spec cases are enough to catch it; the generated properties catch it too (test_generated.py)
    proc = run_gate_step(tmp_path, "adagrad=mypkg:SquareBeforeSumAdagrad", "-k 'not generated'")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    assert "RESULT: FAIL" in output and "duplicates-summed-before-squaring" in output
    reports = tmp_path / "user-repo" / "reports"
    document = json.loads((reports / "candidate.json").read_text())
    failed = {r["case"] for r in document["records"] if r["backend"] == "candidate" and r["outcome"] == "failed"}
    assert "duplicates-summed-before-squaring" in failed
    assert not [r for r in document["records"] if r["backend"] == "coo" and r["outcome"] in ("failed", "error")]
    assert document["records"][0]["spec"].startswith("specs/")  # the same spec paths as this repository's runs
    assert "duplicates-summed-before-squaring" in (reports / "index.html").read_text()
    assert "RESULT: FAIL" in (tmp_path / "summary.md").read_text()


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_the_gate_step_passes_torchs_own_adagrad(tmp_path):
    # every spec case, and the generated properties with 2 examples each (the step's default is 8)
    proc = run_gate_step(tmp_path, "adagrad=torch.optim:Adagrad", "--conformance-examples 2")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "RESULT: PASS" in output
    document = json.loads((tmp_path / "user-repo" / "reports" / "candidate.json").read_text())
    candidate = [r for r in document["records"] if r["backend"] == "candidate"]
    assert any("generated" in r["nodeid"] for r in candidate)  # the generated properties ran too
    assert all(r["outcome"] in ("passed", "xfail") for r in candidate)
    assert (tmp_path / "user-repo" / "reports" / "index.html").is_file()
