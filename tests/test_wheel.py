"""The README's headline use, as a user has it: the suite installed from a built wheel (not the
editable checkout) the documented way -- an isolated venv (no system site-packages), CPU torch, no
extras, so no triton -- and run from an empty directory of their own on the README's wrong Adagrad.

``python -m conformance check adagrad=my_adagrad.py:SquareBeforeSumAdagrad`` exits 1; the results,
JUnit and counterexamples land under ``./reports/``; nothing new appears inside the installed
package; every re-run command and counterexample script the run printed exits 1 from that
directory; and a mistyped op (``adagard=``) exits non-zero without printing counts."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conformance_runs import REPO, wrong_adagrad_source

pytestmark = pytest.mark.acceptance  # builds a wheel and a venv with torch from the package index: minutes

# one spec case and one generated property, in one dtype: a failure of each kind, in about a minute
TORCH = "2.13.0"  # the README's install: a CPU build that brings no triton
NARROW = "-k '(duplicates-cancel or agrees-with-reference) and float64'"
BUILD_LEFTOVERS = shutil.ignore_patterns(".git", "build", "reports", "site", "*.egg-info", "__pycache__", ".nox",
                                         ".venv", ".hypothesis", ".benchmarks", ".pytest_cache")


def _env() -> dict[str, str]:
    """The environment a user's shell has: none of this test session's conformance, Hypothesis or
    path settings."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("CONFORMANCE_", "HYPOTHESIS_", "PYTEST_")) and k not in ("PYTHONPATH",)}


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.fixture(scope="module")
def documented_install(tmp_path_factory) -> tuple[str, Path]:
    """The wheel, built from a copy of the checkout, installed the documented way: (its python, the
    installed package)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    # the wheel, built from a copy of the checkout (a build leaves build/ and *.egg-info beside the sources)
    source, wheels = tmp_path / "source", tmp_path / "wheels"
    shutil.copytree(REPO, source, symlinks=True, ignore=BUILD_LEFTOVERS)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                  str(source), "-w", str(wheels)], cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    wheel = next(wheels.glob("torch_sparse_conformance-*.whl"))

    # the documented install, isolated: a venv without the system's packages, CPU torch and the
    # wheel with its own dependencies, no extras (no triton, no ninja)
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    assert made.returncode == 0, f"python -m venv failed:\n{made.stdout}{made.stderr}"
    python = str(venv / "bin" / "python")
    installed = _run([python, "-m", "pip", "install", "-q", f"torch=={TORCH}", str(wheel)], cwd=tmp_path, timeout=900)
    assert installed.returncode == 0, f"pip install torch=={TORCH} <wheel> failed:\n{installed.stdout}{installed.stderr}"
    extras = _run([python, "-c", "import importlib.util as u; print([m for m in ('triton', 'ninja') if u.find_spec(m)])"],
                  cwd=tmp_path)
    assert extras.stdout.strip() == "[]", f"the venv is not the documented install: {extras.stdout}{extras.stderr}"
    where = _run([python, "-c", "import conformance, conformance.entry_points.check as c; print(conformance.__file__); "
                                "print(c.specs_dir())"], cwd=tmp_path)
    assert where.returncode == 0 and len(where.stdout.splitlines()) == 2, \
        f"the installed suite does not import:\n{where.stdout}{where.stderr}"
    package = Path(where.stdout.splitlines()[0]).parent
    assert package.is_relative_to(venv) and not package.is_relative_to(REPO), where.stdout + where.stderr
    assert Path(where.stdout.splitlines()[1]).is_relative_to(package)
    return python, package


def test_check_from_an_empty_directory_with_the_suite_installed_from_a_wheel(tmp_path, documented_install):
    python, package = documented_install
    before = _files(package)

    # the user's directory: their wrong Adagrad and nothing else
    user = tmp_path / "user"
    user.mkdir()
    (user / "my_adagrad.py").write_text(wrong_adagrad_source(), encoding="utf-8")
    check = _run([python, "-m", "conformance", "check", "adagrad=my_adagrad.py:SquareBeforeSumAdagrad",
                  "--pytest-args", NARROW], cwd=user)
    output = check.stdout + check.stderr
    assert check.returncode == 1, output[-5000:]
    assert "RESULT: FAIL" in output

    # outputs where the user stands, nothing new inside the installed package
    reports = user / "reports"
    assert (reports / "candidate.json").is_file() and list(reports.glob("*.xml")), _files(user)
    counterexamples = sorted((reports / "counterexamples").glob("*.py"))
    assert counterexamples, _files(user)
    assert all(p.with_suffix(".yaml").is_file() for p in counterexamples)
    assert _files(package) == before, sorted(_files(package) - before)

    # every re-run command it printed, and every counterexample script, fails again from there
    commands = sorted(set(re.findall(r"^replay: (python -m conformance replay .*)$", output, flags=re.M)))
    assert any("specs/adagrad.yaml::duplicates-cancel" in c for c in commands), output[-5000:]
    assert any("specs::generated::adagrad-agrees-with-reference" in c for c in commands), output[-5000:]
    for command in commands:
        rerun = _run(["bash", "-c", command.replace("python", shlex.quote(python), 1)], cwd=user)
        assert rerun.returncode == 1, f"{command}\n{rerun.stdout[-3000:]}{rerun.stderr[-2000:]}"
    printed = re.findall(r"^counterexample script: (.+\.py)$", output, flags=re.M)
    printed = sorted(set(printed))  # a script is named once per item it was written for
    assert [Path(p) for p in printed] == counterexamples
    for script in printed:
        reproduced = _run([python, script], cwd=user)
        assert reproduced.returncode == 1, f"{script}\n{reproduced.stdout[-2000:]}{reproduced.stderr[-2000:]}"
    assert _files(package) == before, sorted(_files(package) - before)

    # a mistyped op: the error and a non-zero exit, no counts (of this run or any earlier one)
    typo = _run([python, "-m", "conformance", "check", "adagard=my_adagrad.py:SquareBeforeSumAdagrad"], cwd=user)
    said = typo.stdout + typo.stderr
    assert typo.returncode != 0 and "adagard" in said, said[-3000:]
    assert not re.search(r"\d+ (passed|failed|xfail)", said), said[-3000:]



def test_correct_implementations_written_the_common_way_pass_in_the_documented_install(tmp_path, documented_install):
    """In the same kind of venv: stock torch's SparseAdam, SGD and coalesce and a lazy-state Adagrad
    (state created at the first step, as torch's Adam does) pass one `check`, from an empty directory."""
    python, _ = documented_install
    user = tmp_path / "user"
    user.mkdir()
    shutil.copy(REPO / "tests" / "candidates" / "lazy_state.py", user / "lazy_state.py")
    check = _run([python, "-m", "conformance", "check", "adagrad=lazy_state.py:LazyAdagrad",
                  "sparse_adam=torch.optim:SparseAdam", "sgd=torch.optim:SGD", "coalesce=torch:Tensor.coalesce",
                  "--examples", "20"], cwd=user, timeout=1800)
    output = check.stdout + check.stderr
    assert check.returncode == 0 and "RESULT: PASS" in output, output[-6000:]


def test_a_one_percent_slip_fails_and_every_reproducer_it_prints_exits_1(tmp_path, documented_install):
    """A 1% learning-rate slip in a user's Adagrad, checked at the defaults (float32 only, to keep
    it to minutes): it fails, and each printed replay command and counterexample script exits 1
    from the user's directory -- the saved failing example runs first, whatever the machine's load."""
    python, _ = documented_install
    user = tmp_path / "user"
    user.mkdir()
    shutil.copy(REPO / "tests" / "candidates" / "drift.py", user / "drift.py")
    check = _run([python, "-m", "conformance", "check", "adagrad=drift.py:LrSlipAdagrad", "--pytest-args",
                  "-k float32"], cwd=user, timeout=1800)
    output = check.stdout + check.stderr
    assert check.returncode == 1 and "RESULT: FAIL" in output, output[-5000:]
    commands = sorted(set(re.findall(r"^replay: (python -m conformance replay .*)$", output, flags=re.M)))
    assert any("specs::generated::" in c for c in commands) and any("specs/adagrad.yaml::" in c for c in commands), \
        output[-5000:]
    scripts = sorted(set(re.findall(r"^counterexample script: (.+\.py)$", output, flags=re.M)))
    assert scripts, output[-5000:]
    # each one a process of its own, as a user runs them; one per core at a time (independent replays)
    runs = [(command, ["bash", "-c", command.replace("python", shlex.quote(python), 1)]) for command in commands]
    runs += [(script, [python, script]) for script in scripts]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        finished = list(pool.map(lambda run: (run[0], _run(run[1], cwd=user)), runs))
    for what, rerun in finished:
        assert rerun.returncode == 1, f"{what}\n{rerun.stdout[-3000:]}{rerun.stderr[-2000:]}"
