"""Sharded runs, merged: ``--conformance-shard K/N`` splits one run into N pieces, each item in
exactly one, the same on every machine and with any number of xdist workers; ``conformance merge``
joins the pieces' results files into the one an unsharded run writes, and refuses anything that is
not the shards of one run, naming the files and what differs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from conformance.entry_points.cli import main as cli_main
from conformance.results.store import load_results
from conformance.run.shard import parse_shard, shard_of
from conformance_runs import REPO, sharded_runs

# a narrow run with every kind of record: spec and generated items, passed, failed (a wrong
# candidate, with its verdict and message), xfail (known divergences) and unsupported. The
# candidate's generated items are left out: which example a failing generated item reports depends
# on the modules the process imported before it (Hypothesis draws literals from local modules), so
# it differs between any two runs that ran different items first (-k, xdist, shards): see
# docs/results-report-gate.md, "Sharded runs"
RUN = ["specs", "--conformance-op", "coalesce", "--conformance-backend", "reference,coo,masked,candidate",
       "-k", "not (generated and candidate)",
       "--conformance-impl", "coalesce=tests/candidates/mutants.py:last_write_wins_coalesce",
       "--conformance-dtype", "float32,float16", "--conformance-no-shrink"]
TIMINGS = ("seconds", "timing")  # wall times: the only thing allowed to differ between two runs


def _pytest(checkout: Path, results: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m pytest`` in a fresh interpreter, as on each CI runner (nothing drawn or imported
    carries over), on the suite in ``checkout``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTEST_XDIST_WORKER", None)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(checkout),
               "-c", str(checkout / "pyproject.toml"), "-o", "addopts=", "--conformance-device", "cpu",
               "--conformance-results", str(results), *args]
    return subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, timeout=600)


def _snapshot(into: Path) -> Path:
    """A copy of this checkout's files (tracked and untracked, not ignored): the four runs must run
    the same suite, and a shared work tree can change between them."""
    listing = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True, timeout=60).stdout
    for name in filter(None, listing.decode().split("\0")):
        source = REPO / name
        if source.is_symlink():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            (into / name).symlink_to(os.readlink(source))
        elif source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    return _snapshot(tmp_path_factory.mktemp("suite"))


@pytest.fixture(scope="module")
def fresh_runs(tmp_path_factory, checkout) -> dict[str, Path]:
    """The unsharded run and its three shards (shard 2 on two xdist workers), same options, each in
    a fresh interpreter (the slow tier)."""
    root = tmp_path_factory.mktemp("sharded")
    counterexamples = ["--conformance-counterexamples", str(root / "counterexamples")]  # same in every run
    paths = {}
    for name, extra in [("whole", []), ("shard-1", ["--conformance-shard", "1/3"]),
                        ("shard-2", ["--conformance-shard", "2/3", "-n", "2"]),
                        ("shard-3", ["--conformance-shard", "3/3"])]:
        path = root / f"{name}.json"
        proc = _pytest(checkout, path, *RUN, *counterexamples, *extra)
        # the candidate fails in the whole run (1); a shard may hold none of its failures (0)
        assert proc.returncode in ((1,) if name == "whole" else (0, 1)), \
            f"{name}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        paths[name] = path
    return paths


@pytest.fixture(scope="module")
def runs() -> dict[str, Path]:
    """A narrow unsharded run and its three shards, in this process (conformance_runs.sharded_runs):
    real shards for what merge refuses and keeps."""
    return sharded_runs()


def _records(path: Path) -> dict[str, dict]:
    return {r["nodeid"]: {k: v for k, v in r.items() if k not in TIMINGS} for r in load_results(path).records}


def _merge(*args) -> int:
    return cli_main(["merge", *map(str, args)])


def test_three_shards_in_this_process_merge_into_the_unsharded_run(runs, tmp_path, capsys):
    """The fast tier's end-to-end run of ``conformance merge``: the narrow run's three shards, given
    out of order, make the unsharded run's records and outcome."""
    whole = _records(runs["whole"])
    merged_path = tmp_path / "merged.json"
    assert _merge(runs["shard-3"], runs["shard-1"], runs["shard-2"], "-o", merged_path) == 0
    assert f"{merged_path} (3 shards, {len(whole)} records; status complete, exit status 1)" in capsys.readouterr().out
    assert _records(merged_path) == whole and len(whole) == 9  # three cases on three backends
    merged, unsharded = load_results(merged_path), load_results(runs["whole"])
    for field in ("status", "exit_status", "records_expected", "not_run", "torch", "label"):
        assert merged.run[field] == unsharded.run[field], field
    assert [s["shard"] for s in merged.run["shards"]] == ["1/3", "2/3", "3/3"]


@pytest.mark.slow  # four runs in fresh interpreters, one of them with xdist workers
def test_three_shards_merge_into_the_unsharded_run(fresh_runs, tmp_path, capsys):
    runs = fresh_runs
    whole = _records(runs["whole"])
    shards = [_records(runs[f"shard-{k}"]) for k in (1, 2, 3)]
    # every item in exactly one shard, the one its node id hashes to (shard 2 ran on two workers)
    assert all(shards) and sum(map(len, shards)) == len(whole)
    for k, shard in enumerate(shards, 1):
        assert set(shard) == {nodeid for nodeid in whole if shard_of(nodeid, 3) == k}
    outcomes = {r["outcome"] for r in whole.values()}
    assert {"passed", "failed", "xfail", "unsupported"} <= outcomes
    assert any(r.get("generated") for r in whole.values())

    merged_path = tmp_path / "merged.json"
    assert _merge(runs["shard-3"], runs["shard-1"], runs["shard-2"], "-o", merged_path) == 0
    assert f"{merged_path} (3 shards, {len(whole)} records; status complete, exit status 1)" in capsys.readouterr().out
    merged = load_results(merged_path)  # valid against the results schema
    assert _records(merged_path) == whole  # ids, outcomes, verdicts, messages, values: all of it
    unsharded = load_results(runs["whole"])
    assert merged.cases == unsharded.cases
    for field in ("status", "exit_status", "records_expected", "not_run", "torch", "label"):
        assert merged.run[field] == unsharded.run[field], field
    assert [s["shard"] for s in merged.run["shards"]] == ["1/3", "2/3", "3/3"]
    assert merged.run["options"]["conformance_shard"] is None
    assert "--conformance-shard" not in merged.run["options"]["args"]
    assert merged.run["options"]["args"][merged.run["options"]["args"].index("--conformance-results") + 1] \
        == str(merged_path)


@pytest.mark.parametrize("value", ["0/3", "4/3", "a/b", "3/0", "1/", "-1/3"])
def test_a_bad_shard_is_refused(value):
    with pytest.raises(ValueError, match="K/N|shard|shards"):
        parse_shard(value)


@pytest.mark.slow  # a child pytest
def test_a_bad_shard_option_is_a_usage_error_naming_it(tmp_path):
    proc = _pytest(REPO, tmp_path / "r.json", "specs", "--conformance-op", "coalesce", "--conformance-shard", "4/3")
    assert proc.returncode == 4
    assert "--conformance-shard: '4/3': the shard K must be between 1 and N=3" in proc.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow  # a child pytest
def test_shards_of_a_thorough_run_need_one_seed(tmp_path):
    # each shard would draw a fresh seed of its own: not pieces of one run
    proc = _pytest(REPO, tmp_path / "r.json", "specs", "--conformance-op", "coalesce", "--conformance-shard", "1/2",
                   "--conformance-hypothesis-profile", "thorough")
    assert proc.returncode == 4
    assert "--conformance-shard 1/2 with --conformance-hypothesis-profile thorough needs --conformance-seed" in proc.stderr


def test_the_split_is_a_partition_that_ignores_order():
    ids = [f"specs/x.yaml::case-{i}[coo-cpu-float{b}]" for i in range(300) for b in (16, 32)]
    for count in (1, 2, 3, 7):
        pieces = [{i for i in ids if shard_of(i, count) == k} for k in range(1, count + 1)]
        assert set().union(*pieces) == set(ids) and sum(map(len, pieces)) == len(ids)
        assert all(len(piece) > len(ids) / count / 2 for piece in pieces)  # no shard left nearly empty
    assert [shard_of(i, 3) for i in ids] == [shard_of(i, 3) for i in reversed(ids)][::-1]


# ------------------------------------------------------------------ what merge refuses


def _variant(path: Path, out: Path, **changes) -> Path:
    """A copy of a real shard's results file with fields changed -- a TEST FIXTURE standing for a
    shard of another run (another torch, other options, ...). Keys are 'field' or 'a.b' paths."""
    document = json.loads(path.read_text(encoding="utf-8"))
    for dotted, value in changes.items():
        target = document
        *parents, last = dotted.split(".")
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    out.write_text(json.dumps(document), encoding="utf-8")
    return out


def _refused(capsys, *args) -> str:
    assert _merge(*args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    error = captured.err.strip()
    assert error.startswith("conformance merge: ") and "\n" not in error
    return error


def test_merge_refuses_missing_and_overlapping_shards(runs, tmp_path, capsys):
    s1, s2, s3 = runs["shard-1"], runs["shard-2"], runs["shard-3"]
    out = tmp_path / "m.json"
    assert f"missing shard 3/3 (have 1/3 from {s1}, 2/3 from {s2})" in _refused(capsys, s1, s2, "-o", out)
    again = tmp_path / "shard-2-again.json"
    again.write_bytes(s2.read_bytes())
    assert f"overlapping shards: {s2} and {again} are both shard 2/3" in _refused(capsys, s1, s2, again, s3, "-o", out)
    assert f"{s2}: given twice" in _refused(capsys, s1, s2, s2, s3, "-o", out)
    # shard 3's file claiming one of shard 1's items as well
    stolen = json.loads(s1.read_text())["records"][0]
    document = json.loads(s3.read_text())
    document["records"].append(stolen)
    greedy = tmp_path / "greedy-3.json"
    greedy.write_text(json.dumps(document))
    assert f"overlapping shards: {s1} and {greedy} both have a record of {stolen['nodeid']}" \
        in _refused(capsys, s1, s2, greedy, "-o", out)
    other_split = _variant(s3, tmp_path / "of-4.json", **{"run.options.conformance_shard": "3/4"})
    assert f"shards of different splits: {s1} is shard 1/3, {s2} is shard 2/3, {other_split} is shard 3/4" \
        in _refused(capsys, s1, s2, other_split, "-o", out)
    assert not out.exists()


def test_merge_refuses_a_file_that_is_no_shard(runs, tmp_path, capsys):
    error = _refused(capsys, runs["whole"], runs["shard-1"], "-o", tmp_path / "m.json")
    assert f"{runs['whole']}: not a shard (its run has no --conformance-shard K/N)" in error
    assert "is one of the inputs" in _refused(capsys, runs["shard-1"], runs["shard-2"], runs["shard-3"],
                                              "-o", runs["shard-2"])


@pytest.mark.parametrize("field, value, says", [
    ("run.torch", "2.5.1+cpu", "torch"),
    ("run.options.conformance_op", ["masked_mean"], "options.conformance_op"),
    ("run.options.conformance_dtype", None, "options.conformance_dtype"),
    ("run.suite.git_commit", "0" * 40, "suite.git_commit"),
    ("run.label", "torch 2.13 cuda", "label"),
])
def test_merge_refuses_shards_of_different_runs(runs, tmp_path, capsys, field, value, says):
    other = _variant(runs["shard-3"], tmp_path / "other-3.json", **{field: value})
    error = _refused(capsys, runs["shard-1"], runs["shard-2"], other, "-o", tmp_path / "m.json")
    assert error.startswith("conformance merge: not shards of one run: ")
    mine = load_results(runs["shard-1"]).run
    for part in field.split(".")[1:]:
        mine = mine[part]
    assert f"{says} differs ({runs['shard-1']}: {mine!r}; {runs['shard-2']}: {mine!r}; {other}: {value!r})" in error


def test_merge_refuses_shards_that_saw_other_devices(runs, tmp_path, capsys):
    other = _variant(runs["shard-3"], tmp_path / "no-cpu-3.json", **{"run.devices.cpu.unavailable": "no cpu here"})
    error = _refused(capsys, runs["shard-1"], runs["shard-2"], other, "-o", tmp_path / "m.json")
    assert f"devices differs ({runs['shard-1']}: 'cpu available'; {runs['shard-2']}: 'cpu available'; " \
           f"{other}: 'cpu unavailable')" in error


def test_what_a_shard_may_change_is_not_a_difference(runs, tmp_path):
    # where it wrote its files, its host and machine, how many workers: shard 2 ran with -n 2
    other = _variant(runs["shard-3"], tmp_path / "elsewhere-3.json", **{
        "run.hostname": "runner-7", "run.machine.fingerprint": "0123456789abcdef",
        "run.devices.cpu.name": "Intel Xeon", "run.options.rootdir": "/home/runner/work/x"})
    merged_path = tmp_path / "m.json"
    assert _merge(runs["shard-1"], runs["shard-2"], other, "-o", merged_path) == 0
    run = load_results(merged_path).run
    assert "runner-7" in run["hostname"] and "Intel Xeon" in run["devices"]["cpu"]["name"]
    assert run["machine"]["fingerprint"].startswith("shards-")  # timings of mixed machines: not one machine's


def test_merge_validates_each_input(runs, tmp_path, capsys):
    broken = _variant(runs["shard-3"], tmp_path / "broken-3.json", **{"records.0.outcome": "maybe"})
    error = _refused(capsys, runs["shard-1"], runs["shard-2"], broken, "-o", tmp_path / "m.json")
    assert f"{broken}: does not match the results schema at records/0/outcome" in error
    truncated = tmp_path / "truncated-3.json"
    truncated.write_text(runs["shard-3"].read_text()[:500])
    assert f"{truncated}: not valid JSON" in _refused(capsys, runs["shard-1"], runs["shard-2"], truncated,
                                                      "-o", tmp_path / "m.json")
    assert f"{tmp_path / 'absent.json'}: cannot read" in _refused(capsys, runs["shard-1"], tmp_path / "absent.json",
                                                                  "-o", tmp_path / "m.json")


def test_an_interrupted_shard_makes_an_interrupted_run(runs, tmp_path, capsys):
    document = json.loads(runs["shard-3"].read_text())
    lost = document["records"].pop()["nodeid"]
    document["run"].update(status="interrupted", exit_status=2, not_run=[lost])
    cut = tmp_path / "cut-3.json"
    cut.write_text(json.dumps(document))
    merged_path = tmp_path / "m.json"
    assert _merge(runs["shard-1"], runs["shard-2"], cut, "-o", merged_path) == 0
    assert f"warning: {cut}: shard 3/3 is 'interrupted', not complete (1 of its items not run)" in capsys.readouterr().err
    run = load_results(merged_path).run
    assert run["status"] == "interrupted" and run["exit_status"] == 2 and run["not_run"] == [lost]


# ------------------------------------------------------------------ the reusable workflow's matrix mode

WORKFLOW = REPO / ".github" / "workflows" / "gate-candidate.yml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def _step(job: str, name: str) -> dict:
    return next(s for s in _workflow()["jobs"][job]["steps"] if s.get("name") == name)


def _uses(job: str, action: str) -> list[dict]:
    return [s for s in _workflow()["jobs"][job]["steps"] if s.get("uses", "").startswith(action + "@")]


def _inputs() -> dict:
    document = _workflow()
    return (document.get("on") or document[True])["workflow_call"]["inputs"]  # YAML 1.1 reads `on` as true


def test_the_workflow_has_a_matrix_mode_beside_the_single_job():
    jobs = _workflow()["jobs"]
    assert list(jobs) == ["gate", "plan", "shard", "merge"]
    inputs = _inputs()
    assert inputs["torch-versions"]["default"] == "" and inputs["shards"]["type"] == "number"
    assert jobs["gate"]["if"] == "inputs.torch-versions == ''"  # the single job, as before, without them
    assert jobs["plan"]["if"] == "inputs.torch-versions != ''"
    assert jobs["plan"]["outputs"] == {"matrix": "${{ steps.plan.outputs.matrix }}",
                                       "runs": "${{ steps.plan.outputs.runs }}"}
    assert _step("plan", "Plan")["id"] == "plan"
    shard = jobs["shard"]
    assert shard["needs"] == "plan" and shard["runs-on"] == "${{ matrix.runs-on }}"
    assert shard["strategy"] == {"fail-fast": False, "matrix": "${{ fromJSON(needs.plan.outputs.matrix) }}"}
    [upload] = _uses("shard", "actions/upload-artifact")
    assert upload["if"] == "always()" and upload["with"]["path"] == "reports/shards/"
    assert upload["with"]["name"] == "conformance-shard-${{ matrix.torch }}-${{ matrix.device }}-${{ matrix.shard }}"
    merge = jobs["merge"]
    assert merge["needs"] == ["plan", "shard"] and "!cancelled()" in merge["if"]
    [download] = _uses("merge", "actions/download-artifact")
    assert download["with"] == {"pattern": "conformance-shard-*", "merge-multiple": True, "path": "reports/shards/"}
    [report] = _uses("merge", "actions/upload-artifact")
    assert report["if"] == "always()" and report["with"] == {"name": "conformance-report", "path": "reports/"}
    names = [s.get("name") or s["uses"] for s in merge["steps"]]
    assert names.index("Merge and report") > names.index("actions/download-artifact@v4")


def test_every_expression_names_something_that_exists():
    text = WORKFLOW.read_text(encoding="utf-8")
    inputs, outputs = set(_inputs()), set(_workflow()["jobs"]["plan"]["outputs"])
    plan_keys = {"torch", "device", "shard", "shards", "runs-on", "index-url"}  # what the Plan step emits
    for expression in EXPRESSION.findall(text):
        for kind, name in re.findall(r"\b(inputs|matrix|needs\.plan\.outputs|steps\.plan\.outputs)\.([\w-]+)",
                                     expression):
            known = {"inputs": inputs, "matrix": plan_keys, "needs.plan.outputs": outputs,
                     "steps.plan.outputs": {"matrix", "runs"}}[kind]
            assert name in known, f"${{{{ {expression} }}}}: {kind}.{name} does not exist"


def _resolve(env: dict, values: dict) -> dict:
    """A job's env with its ${{ ... }} expressions replaced by ``values`` (what GitHub would put there)."""
    resolved = {}
    for key, value in env.items():
        text = EXPRESSION.sub(lambda m: str(values[m.group(1)]), str(value))
        resolved[key] = text
    return resolved


def _bash(script: str, cwd: Path, env: dict, suite: Path) -> subprocess.CompletedProcess:
    """A step's script run by bash as GitHub runs it, with ``suite`` as the installed suite."""
    env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(suite), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def _plan(tmp_path: Path, **inputs) -> tuple[subprocess.CompletedProcess, dict]:
    values = {f"inputs.{name}": spec.get("default", "") for name, spec in _inputs().items()}
    values.update({f"inputs.{name}": value for name, value in inputs.items()})
    out = tmp_path / "github_output"
    out.write_text("")
    env = {**_resolve(_workflow()["jobs"]["plan"]["env"], values), "GITHUB_OUTPUT": str(out)}
    proc = _bash(_step("plan", "Plan")["run"], tmp_path, env, REPO)
    return proc, dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)


def test_the_plan_refuses_cuda_without_a_gpu_runner(tmp_path):
    proc, outputs = _plan(tmp_path, **{"torch-versions": "2.5.1", "devices": "cpu cuda"})
    assert proc.returncode != 0 and not outputs
    assert "devices has cuda: give gpu-runs-on" in proc.stderr
    proc, outputs = _plan(tmp_path, **{"torch-versions": "2.5.1 2.13.0", "devices": "cpu cuda", "shards": 3,
                                       "gpu-runs-on": "gpu"})
    include = json.loads(outputs["matrix"])["include"]
    assert len(include) == 2 * 2 * 3 and outputs["runs"].split() == [
        "torch-2.5.1-cpu", "torch-2.5.1-cuda", "torch-2.13.0-cpu", "torch-2.13.0-cuda"]
    cuda = [e for e in include if e["device"] == "cuda"]
    assert {e["runs-on"] for e in cuda} == {"gpu"} and all("/cu" in e["index-url"] for e in cuda)


@pytest.mark.slow  # the workflow's steps in bash: three child pytest runs
def test_the_matrix_mode_runs_here_for_one_torch_version_with_two_shards(tmp_path, checkout):
    """Plan, then each shard's "Gate shard" step, then "Merge and report", as the jobs would run them
    (the artifacts' upload and download leave reports/shards/ as it is: one folder per run)."""
    version = torch.__version__.split("+")[0]
    # one xdist worker per shard (the workflow's pytest-args input, as a user may set it): the few
    # items of a shard do not need a second worker importing torch again
    impl, pytest_args = "adagrad=mypkg:SquareBeforeSumAdagrad", "-k 'not generated' --conformance-dtype float32 -n 1"
    proc, outputs = _plan(tmp_path, **{"torch-versions": version, "devices": "cpu", "shards": 2})
    assert proc.returncode == 0, proc.stderr
    include = json.loads(outputs["matrix"])["include"]
    assert [(e["torch"], e["device"], e["shard"], e["shards"]) for e in include] == [
        (version, "cpu", 1, 2), (version, "cpu", 2, 2)]

    user_repo = tmp_path / "user-repo"  # a user's repository holding their (wrong) Adagrad
    (user_repo / "mypkg").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "candidates" / "mutants.py", user_repo / "mypkg" / "__init__.py")
    values = {f"inputs.{name}": spec.get("default", "") for name, spec in _inputs().items()}
    values.update({"inputs.impl": impl, "inputs.pytest-args": pytest_args, "inputs.suite": "unused"})
    for entry in include:
        env = _resolve(_workflow()["jobs"]["shard"]["env"], {**values, **{f"matrix.{k}": v for k, v in entry.items()}})
        proc = _bash(_step("shard", "Gate shard")["run"], user_repo, env, checkout)
        # the candidate fails some items of this shard; the shard job still succeeds (the merge job judges)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        assert f"--conformance-shard {entry['shard']}/2" in proc.stdout
    shards = sorted((user_repo / "reports" / "shards" / f"torch-{version}-cpu").glob("shard-*.json"))
    assert [p.name for p in shards] == ["shard-1.json", "shard-2.json"]

    summary = tmp_path / "summary.md"
    env = {**_resolve(_workflow()["jobs"]["merge"]["env"], {**values, "needs.plan.outputs.runs": outputs["runs"]}),
           "GITHUB_STEP_SUMMARY": str(summary)}
    proc = _bash(_step("merge", "Merge and report")["run"], user_repo, env, checkout)
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]  # the wrong candidate fails the gate
    merged = load_results(user_repo / "reports" / f"torch-{version}-cpu.json")
    assert [s["shard"] for s in merged.run["shards"]] == ["1/2", "2/2"]
    assert merged.run["label"] == f"torch {version} cpu" and merged.run["status"] == "complete"
    pieces = [load_results(p).records for p in shards]
    assert sorted(r["nodeid"] for r in merged.records) == sorted(r["nodeid"] for piece in pieces for r in piece)
    failed = {r["case"] for r in merged.records if r["backend"] == "candidate" and r["outcome"] == "failed"}
    assert "duplicates-summed-before-squaring" in failed
    assert f"torch {version} cpu" in (user_repo / "reports" / "index.html").read_text(encoding="utf-8")
    text = summary.read_text(encoding="utf-8")
    assert f"| torch {version} cpu | 2 |" in text and "RESULT: FAIL" in text
