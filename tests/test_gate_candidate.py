"""The gate a user drops into their own repository: ``conformance check`` and the reusable workflow
.github/workflows/gate-candidate.yml, whose "Gate" step's script is run here as written, from a
stand-in for a user's repository, on a wrong candidate (it must fail) and on torch's own Adagrad
(it must pass). Both write the results, the report and the job summary the workflow uploads.

The steps' shell around ``check`` is run too, with a stand-in ``python`` first on PATH where what
is tested is the step's command line or its reading of check's exit status (a real check run is
the slow tier's), and the matrix mode's "Merge and report" step on real shard files: its verdict
is check's own rule on each merged run (tests/test_merge.py runs the whole matrix mode once)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conformance.core.target import CandidateTarget
from conformance.entry_points.check import pytest_command, specs_dir
from conformance.results.store import load_results

from conformance_runs import MUTANTS, REPO, SMALL_SPEC, run_inprocess

WORKFLOW = REPO / ".github" / "workflows" / "gate-candidate.yml"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def step(name: str, job: str = "gate") -> dict:
    return next(s for s in workflow()["jobs"][job]["steps"] if s.get("name") == name)


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


def run_gate_step(tmp_path, impl: str, pytest_args: str = "", *,
                  on_github: bool = True) -> subprocess.CompletedProcess:
    """The workflow's Gate step, run by bash as GitHub would, in a user's repository holding mypkg
    (``on_github``: with GITHUB_STEP_SUMMARY set, as on a runner; else as outside GitHub Actions)."""
    user_repo = tmp_path / "user-repo"
    (user_repo / "mypkg").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "candidates" / "mutants.py", user_repo / "mypkg" / "__init__.py")
    # one xdist worker (through the workflow's pytest-args input, as a user may set it): the spec
    # cases and a few examples do not need a second worker importing torch again
    env = {**os.environ, "IMPL": impl, "DEVICE": "cpu", "PYTEST_ARGS": f"{pytest_args} -n 1".strip(),
           # this checkout's conformance, not the one an editable install may point at
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("GITHUB_STEP_SUMMARY", None)
    if on_github:
        env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
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
    from conformance.cases.properties import opted_out

    # (torch's Adagrad, not fused, takes no grad_scale: its grad-scaling items are unsupported, the reason named)
    assert all(r["outcome"] in ("passed", "xfail") or opted_out(r) for r in candidate)
    assert (tmp_path / "user-repo" / "reports" / "index.html").is_file()


@pytest.mark.slow
def test_the_gate_step_judges_outside_github_actions(tmp_path):
    # no GITHUB_STEP_SUMMARY (a local run of the step, act, another CI): check runs and gives its
    # verdict; a --markdown /dev/null fallback made it a usage error (4) with nothing run
    proc = run_gate_step(tmp_path, "adagrad=mypkg:SquareBeforeSumAdagrad",
                         "-k 'duplicates-summed-before-squaring and not generated'", on_github=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    assert "RESULT: FAIL" in output and "usage error" not in output
    assert (tmp_path / "user-repo" / "reports" / "candidate.json").is_file()
    assert not (tmp_path / "summary.md").exists()


# ------------------------------------------------------------------ the steps' shell around check

STAND_IN = """\
import json, os, pathlib, sys
args = sys.argv[1:]
pathlib.Path(os.environ["STAND_IN_ARGV"]).write_text(json.dumps(args))
if os.environ.get("STAND_IN_RESULTS") == "1" and "--results" in args:
    results = pathlib.Path(args[args.index("--results") + 1])
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text("{}")
sys.exit(int(os.environ["STAND_IN_STATUS"]))
"""


def run_with_stand_in(tmp_path: Path, script: str, env: dict, *, status: int = 0,
                      results: bool = True) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``script`` run by bash with a stand-in ``python`` first on PATH: it records its arguments
    (returned), writes the --results file when ``results`` (as check does when its run wrote one)
    and exits with ``status``, as ``python -m conformance check`` would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    python = bin_dir / "python"
    python.write_text(f"#!{sys.executable}\n{STAND_IN}", encoding="utf-8")
    python.chmod(0o755)
    work = tmp_path / "user-repo"
    work.mkdir(exist_ok=True)
    argv = tmp_path / "argv.json"
    argv.unlink(missing_ok=True)
    env = {**{k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}, **env,
           "PATH": os.pathsep.join([str(bin_dir), os.environ["PATH"]]), "STAND_IN_ARGV": str(argv),
           "STAND_IN_STATUS": str(status), "STAND_IN_RESULTS": "1" if results else "0"}
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)
    return proc, (json.loads(argv.read_text()) if argv.exists() else [])


@pytest.mark.parametrize("on_github", [True, False], ids=["on-github", "elsewhere"])
def test_the_gate_step_passes_markdown_only_when_there_is_a_job_summary(tmp_path, on_github):
    # check refuses /dev/null as its --markdown file (a usage error, 4): outside GitHub Actions,
    # without GITHUB_STEP_SUMMARY, the step must not name one
    env = {"IMPL": "adagrad=mypkg:A coalesce=mypkg:c", "DEVICE": "cpu", "PYTEST_ARGS": "-k 'not generated'"}
    summary = tmp_path / "summary.md"
    if on_github:
        env["GITHUB_STEP_SUMMARY"] = str(summary)
    proc, argv = run_with_stand_in(tmp_path, step("Gate")["run"], env)
    assert proc.returncode == 0, proc.stderr
    assert argv[:4] == ["-m", "conformance", "check", "adagrad=mypkg:A"] and argv[4] == "coalesce=mypkg:c"
    assert argv[argv.index("--pytest-args") + 1] == "-k 'not generated'"
    assert "/dev/null" not in argv
    if on_github:
        assert argv[argv.index("--markdown") + 1] == str(summary)
    else:
        assert "--markdown" not in argv


@pytest.mark.parametrize("status, results, expected", [
    (0, True, 0), (1, True, 0), (2, True, 0), (3, True, 0),  # check's verdicts: the merge job judges
    (4, True, 4),  # a usage error: nothing ran
    (5, True, 5), (137, True, 137), (139, True, 139),  # not a status of check's: it did not finish
    (0, False, 2), (1, False, 1), (2, False, 2),  # a verdict without a results file is no verdict
], ids=["pass", "fail", "could-not-judge", "unsupported", "usage-error", "5", "killed", "segfault",
        "pass-no-results", "fail-no-results", "could-not-judge-no-results"])
def test_the_shard_step_reads_checks_exit_statuses(tmp_path, status, results, expected):
    # check exits 0-4 (conformance/entry_points/check.py); 0-3 are its verdicts on the shard, which
    # the merge job judges again over the whole run: the shard job fails only when the shard broke
    env = {"IMPL": "adagrad=mypkg:A", "DEVICE": "cpu", "PYTEST_ARGS": "-n 1", "TORCH_VERSION": "2.13.0",
           "SHARD": "2", "SHARDS": "3"}
    proc, argv = run_with_stand_in(tmp_path, step("Gate shard", "shard")["run"], env, status=status, results=results)
    assert proc.returncode == expected, proc.stderr
    assert argv[:3] == ["-m", "conformance", "check"]
    assert argv[argv.index("--pytest-args") + 1] == "-n 1 --conformance-shard 2/3"
    assert argv[argv.index("--results") + 1] == "reports/shards/torch-2.13.0-cpu/shard-2.json"
    if expected:
        assert "torch-2.13.0-cpu shard 2/3" in proc.stderr


# ------------------------------------------------------------------ the merge job's verdict

def _shards(tmp_path: Path, run: str, label: str) -> list[Path]:
    """Two real shards of a narrow run of torch's own Adagrad beside stock torch (coo), as the shard
    jobs leave them: reports/shards/<run>/shard-K.json under the user's repository."""
    folder = tmp_path / "user-repo" / "reports" / "shards" / run
    folder.mkdir(parents=True)
    paths = []
    for k in (1, 2):
        code, path = run_inprocess(f"gate-candidate-{label}-{k}", str(SMALL_SPEC), "--conformance-backend",
                                   "candidate,coo", "--conformance-examples", "0", "--conformance-label", label,
                                   "--conformance-impl", f"adagrad={MUTANTS}:TorchAdagrad",
                                   "--conformance-shard", f"{k}/2")
        assert code == 0 and path.exists(), f"shard {k}/2: exit code {code}"
        paths.append(shutil.copy(path, folder / f"shard-{k}.json"))
    return [Path(p) for p in paths]


def _fail_one(shards: list[Path], backend: str) -> str:
    """A TEST FIXTURE: ``backend``'s first passed item in the shards made failed, and its shard's exit
    status pytest's for it (1); returns the item's node id."""
    for path in shards:
        document = json.loads(path.read_text(encoding="utf-8"))
        record = next((r for r in document["records"] if r["backend"] == backend and r["outcome"] == "passed"), None)
        if record is not None:
            record.update(outcome="failed", message="AssertionError: a failure standing in for a real one")
            document["run"]["exit_status"] = 1
            path.write_text(json.dumps(document), encoding="utf-8")
            return record["nodeid"]
    raise AssertionError(f"no passed item of {backend} in {shards}")


def run_merge_step(tmp_path: Path, runs: str) -> tuple[subprocess.CompletedProcess, str]:
    """The matrix mode's "Merge and report" step, run by bash as GitHub would, over the shards under
    the user's repository; (the step, the job summary it wrote)."""
    summary = tmp_path / "summary.md"
    summary.unlink(missing_ok=True)
    env = {**os.environ, "IMPL": f"adagrad={MUTANTS}:TorchAdagrad", "RUNS": runs, "GITHUB_STEP_SUMMARY": str(summary),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-euo", "pipefail", "-c",
                           step("Merge and report", "merge")["run"]], cwd=tmp_path / "user-repo", env=env,
                          capture_output=True, text=True, timeout=600)
    return proc, (summary.read_text(encoding="utf-8") if summary.exists() else "")


@pytest.mark.timeout(300)
@pytest.mark.slow  # runs the spec suite for real shards (about 9 s): the fast tier stays within its 90 s
def test_the_merge_verdict_is_the_candidates_not_stock_torchs(tmp_path):
    # stock torch fails one of its own items beside a candidate that passes every one: the merged
    # run's exit status is pytest's 1, but single mode's rule (check's judge) passes the candidate
    # and names the finding about torch; so must the merge job
    shards = _shards(tmp_path, "torch-x-cpu", "torch x cpu")
    finding = _fail_one(shards, "coo")
    proc, summary = run_merge_step(tmp_path, "torch-x-cpu")
    output = proc.stdout + proc.stderr
    assert load_results(tmp_path / "user-repo" / "reports" / "torch-x-cpu.json").run["exit_status"] == 1
    assert proc.returncode == 0, output[-3000:]
    assert "| torch x cpu | 2 |" in summary and "| PASS |" in summary
    assert f"torch:   {finding} (a finding about stock torch" in summary
    assert summary.rstrip().endswith("RESULT: PASS")
    assert (tmp_path / "user-repo" / "reports" / "index.html").is_file()


@pytest.mark.timeout(300)
@pytest.mark.slow  # as above
def test_the_merge_verdict_is_could_not_judge_for_an_unmerged_run_and_fail_for_a_failed_item(tmp_path):
    shards = _shards(tmp_path, "torch-x-cpu", "torch x cpu")
    lacking = shutil.copytree(shards[0].parent, shards[0].parent.with_name("torch-y-cpu"))
    (lacking / "shard-1.json").unlink()  # merge refuses torch-y-cpu: shard 1/2 is missing
    proc, summary = run_merge_step(tmp_path, "torch-x-cpu torch-y-cpu")
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    assert "missing shard 1/2" in proc.stderr
    assert "| torch x cpu | 2 |" in summary and "| PASS |" in summary
    assert "| torch-y-cpu | not merged | none | COULD NOT JUDGE |" in summary
    assert summary.rstrip().endswith("RESULT: COULD NOT JUDGE")
    # a candidate item failed: FAIL, whatever else could not be judged
    failed = _fail_one(shards, "candidate")
    proc, summary = run_merge_step(tmp_path, "torch-x-cpu torch-y-cpu")
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
    assert "| FAIL |" in summary and f"failed:  {failed}" in summary and summary.rstrip().endswith("RESULT: FAIL")
