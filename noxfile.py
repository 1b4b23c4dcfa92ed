"""nox sessions: ``conformance`` runs ``pytest specs`` once per torch version (one of them with
torch_xla on the ``xla`` device) and ``tests`` runs the harness's own tests.

    nox -t conformance                       # every torch version below
    nox -s conformance                       # every one without torch_xla
    nox -s "conformance(torch-2.9.0-xla)"    # one of them
    nox -s tests
    nox -s examples                          # the example candidates' pinned verdicts (not a default)
    nox -s newest                            # the fast tier on the newest releases (reports, never fails)
    nox -s lock                              # refresh constraints.txt with those releases

Each conformance session writes, under reports/:
  junit-torch-<V>.xml      pytest's JUnit XML of the spec run
  results-torch-<V>.json   the conformance results (when the plugin has --conformance-results)
  status-torch-<V>.json    what was installed and how the run ended -- also when installing failed
  junit-bad-input-torch-<V>.xml  the bad-input corpus (tests/test_bad_input.py) on that torch
  junit-kernels-torch-<V>.xml  the kernel tests (tests/test_kernels.py) on that torch: C++ and
                               Triton's interpreter on CPU, compiled Triton on CUDA where a GPU is
                               present; a crash (a signal) is recorded as such in the status file
The XLA session also runs the XLA harness tests (junit-xla-tests-torch-<V>.xml).

Environment:
  CONFORMANCE_TORCH_INDEX_URL        pip --index-url for torch (e.g. a CPU-only wheel index)
  CONFORMANCE_TORCH_EXTRA_INDEX_URL  pip --extra-index-url for torch
  CONFORMANCE_TORCH_VERSIONS         comma-separated torch versions instead of the list below
                                     (a version with a torch_xla release below gets it too)
  CONFORMANCE_NOX_KERNEL_TESTS=0     skip the kernel tests in the conformance sessions
  CONFORMANCE_NOX_INSTALL_ONLY=1     install the session's venv and stop (status "installed"): .ci/run
                                     installs the examples' and XLA's venvs so while the tiers run
  PIP_CONSTRAINT=/dev/null           lift a pip constraint file that caps torch: with pip.conf's
                                     `constraint` holding torch<=2.14.1 (the development VM's), torch
                                     2.15.0's install fails ("install failed" in its status file, pip
                                     naming "(constraint) torch<=2.14.1")
Virtualenvs are reused (nox's reuse_venv), and torch is not reinstalled when the venv already has
the requested version, so a repeated run costs only the tests.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nox

nox.options.reuse_venv = "yes"
# plain `nox` runs the quick sessions only: the harness's tests and the spec run on the torch the
# suite is developed on. The other torch versions, and above all the XLA one (torch 2.9.0 +
# torch_xla 2.9.0, see its session's docstring for its size), run when named: nox -t conformance

ROOT = Path(__file__).resolve().parent
REPORTS = ROOT / "reports"

# torch version -> the torch_xla release built against it (torch_xla X.Y needs torch X.Y exactly
# and its wheel does not say so, so the pair is pinned here).
TORCH_XLA = {"2.9.0": "2.9.0"}
# 2.9.0: the newest torch with a torch_xla that runs here; 2.13.0: the version the suite is
# developed on; 2.15.0: the newest torch release on PyPI (`pip index versions torch`).
DEFAULT_TORCH_VERSIONS = ["2.9.0", "2.13.0", "2.15.0"]
TORCH_VERSIONS = [v.strip() for v in os.environ.get("CONFORMANCE_TORCH_VERSIONS", "").split(",") if v.strip()] \
    or DEFAULT_TORCH_VERSIONS
TESTS_TORCH = "2.13.0"
nox.options.sessions = ["tests"] + ([f"conformance(torch-{TESTS_TORCH})"]
                                    if TESTS_TORCH in TORCH_VERSIONS and TESTS_TORCH not in TORCH_XLA else [])
XLA_TESTS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_xla_*.py"))


def _session_id(version: str) -> str:
    return f"torch-{version}" + ("-xla" if version in TORCH_XLA else "")


def _index_args() -> list[str]:
    args = []
    if os.environ.get("CONFORMANCE_TORCH_INDEX_URL"):
        args += ["--index-url", os.environ["CONFORMANCE_TORCH_INDEX_URL"]]
    if os.environ.get("CONFORMANCE_TORCH_EXTRA_INDEX_URL"):
        args += ["--extra-index-url", os.environ["CONFORMANCE_TORCH_EXTRA_INDEX_URL"]]
    return args


def _venv_python(session: nox.Session) -> str:
    return str(Path(session.bin) / ("python.exe" if sys.platform == "win32" else "python"))


def _installed(session: nox.Session, module: str) -> str | None:
    """The venv's ``module.__version__`` (local label dropped), or None when it is not importable."""
    code = f"import {module}; print({module}.__version__.split('+')[0])"
    result = subprocess.run([_venv_python(session), "-c", code], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


class InstallFailed(Exception):
    pass


def _pip(session: nox.Session, *args: str) -> None:
    """pip install in the session's venv; raises InstallFailed with pip's last lines. Without pip's byte
    compilation (``--no-compile``): the sessions' venvs hold some 32,000 modules (torch, torch_xla, JAX,
    TensorFlow) of which a run imports a few thousand, and Python compiles those as it first imports
    them; compiling all of them at install cost about 4 ms of CPU each (some two CPU-minutes in CI, on
    the cores the tiers run on)."""
    command = [_venv_python(session), "-m", "pip", "install", "--progress-bar", "off", "--no-compile", *args]
    session.log(" ".join(command[1:]))
    last_lines: collections.deque[str] = collections.deque(maxlen=15)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as pip:
        for line in pip.stdout:  # streamed, so a long download shows progress
            sys.stdout.write(line)
            last_lines.append(line.rstrip())
    if pip.returncode != 0:
        tail = "\n".join(last_lines)
        raise InstallFailed(f"pip install {' '.join(args)} exited {pip.returncode}:\n{tail}")


def _install(session: nox.Session, torch_version: str) -> None:
    """torch (from the configured index), torch_xla when paired, then this package and its test extras
    at the versions constraints.txt pins (less those this torch pins itself: :func:`_constraints_for`)."""
    if _installed(session, "torch") != torch_version:
        _pip(session, f"torch=={torch_version}", *_index_args())
    xla = TORCH_XLA.get(torch_version)
    if xla and _installed(session, "torch_xla") != xla:
        _pip(session, f"torch_xla=={xla}")
    # torch is already satisfied, so the project's "torch>=..." leaves it alone. Skipped when this
    # venv already has this checkout installed with the same pyproject.toml and constraints.txt.
    stamp = Path(session.virtualenv.location) / ".conformance-install-stamp"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + CONSTRAINTS.read_bytes()).hexdigest()
    wanted = f"{ROOT}\n{digest}\n"
    if not (stamp.is_file() and stamp.read_text() == wanted):
        _pip(session, "-c", str(_constraints_for(session)), "-e", f"{ROOT}[test]")
        stamp.write_text(wanted)
    got = _installed(session, "torch")
    if got != torch_version:
        raise InstallFailed(f"asked for torch {torch_version}, the venv has {got}")


# what the README's commands and CI install beside torch, pinned (nox -s lock refreshes it)
CONSTRAINTS = ROOT / "constraints.txt"
CONSTRAINTS_HEADER = """\
# What the README's commands, .ci/run and the nox sessions install beside torch, pinned (pip's
# constraints: a package listed here is installed at this version when anything asks for it; torch
# itself is pinned by each command). Refreshed by `nox -s lock` (a fresh venv, `pip install
# torch==2.13.0 -e ".[test]"` with no constraints, `pip freeze`); `nox -s newest` tries the newest
# releases against the fast tier and reports what broke, without touching this file
# (docs/running.md#pinned-installs).
"""


def _pinned(text: str) -> dict[str, str]:
    """Normalised name -> its ``name==version`` line, of a constraints file or ``pip freeze``'s output."""
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line and not line.startswith("-"):
            name = line.split("==", 1)[0].strip()
            pins[name.lower().replace("_", "-").replace(".", "-")] = line
    return pins


def _constraints_for(session: nox.Session) -> Path:
    """constraints.txt less the packages the venv's torch requires (a torch other than the one it was
    made with pins its own triton, sympy...: a pin of ours would fight it), written into the venv."""
    code = ("import importlib.metadata as m, re; print('\\n'.join(re.split(r'[ ;<>=!~\\[(]', r, 1)[0] "
            "for r in m.requires('torch') or []))")
    result = subprocess.run([_venv_python(session), "-c", code], capture_output=True, text=True)
    torchs = set(_pinned("\n".join(f"{name}==0" for name in result.stdout.split())))
    torch_version = _installed(session, "torch") or "0.0"
    if _release_tuple(torch_version) < NUMPY_1_BEFORE:  # built against NumPy 1 (the release matrix's oldest)
        torchs.add("numpy")
    kept = [line for name, line in _pinned(CONSTRAINTS.read_text()).items() if name not in torchs]
    if "numpy" in torchs and _release_tuple(torch_version) < NUMPY_1_BEFORE:
        kept.append("numpy<2")
    path = Path(session.virtualenv.location) / "conformance-constraints.txt"
    path.write_text("\n".join(kept) + "\n")
    return path


def _install_only(session: nox.Session, status_path: Path, status: dict) -> bool:
    """Under CONFORMANCE_NOX_INSTALL_ONLY=1: the venv is installed; say so in the status file and stop."""
    if os.environ.get("CONFORMANCE_NOX_INSTALL_ONLY", "0") in ("", "0"):
        return False
    status.update(status="installed")
    REPORTS.mkdir(exist_ok=True)
    status_path.write_text(json.dumps(status, indent=2) + "\n")
    session.log(f"installed only (CONFORMANCE_NOX_INSTALL_ONLY): {status_path.relative_to(ROOT)}")
    return True


def _write_status(version: str, status: dict) -> Path:
    REPORTS.mkdir(exist_ok=True)
    path = REPORTS / f"status-torch-{version}.json"
    path.write_text(json.dumps(status, indent=2) + "\n")
    return path


def _plugin_has_results_option(session: nox.Session) -> bool:
    result = subprocess.run([_venv_python(session), "-m", "pytest", "--help"], capture_output=True, text=True,
                            cwd=ROOT)
    return "--conformance-results" in result.stdout


XLA_SESSION_DOC = """Spec suite on torch {torch} + torch_xla {xla} (cpu and xla): torch + torch_xla wheels 936 MiB, + CUDA deps; not in plain nox.

    The XLA session installs torch 2.9.0 (PyPI's wheel: 859 MiB, plus the nvidia-* CUDA wheels it
    depends on, several GB more, not measured) and torch_xla 2.9.0 (77 MiB); downloading the two
    wheels alone took 91 s on the 2-core development VM (shared, load average ~11, 2026-11-23).
    Run it with nox -s "conformance({session_id})", or every torch version with nox -t conformance.
    """


@nox.session(tags=["conformance"])
@nox.parametrize("torch_version", [nox.param(v, id=_session_id(v)) for v in TORCH_VERSIONS if v not in TORCH_XLA])
def conformance(session: nox.Session, torch_version: str) -> None:
    """Spec suite on one torch version (plain `nox` runs tests and conformance(torch-2.13.0) only)."""
    _conformance(session, torch_version)


def _xla_session(torch_version: str) -> None:
    """A torch version paired with torch_xla: a session of its own, so that its size is said on
    its line of `nox -l` only (a parametrized session has one description for every version)."""
    def conformance_xla(session: nox.Session) -> None:
        _conformance(session, torch_version)

    session_id = _session_id(torch_version)
    conformance_xla.__doc__ = XLA_SESSION_DOC.format(torch=torch_version, xla=TORCH_XLA[torch_version],
                                                     session_id=session_id)
    nox.session(name=f"conformance({session_id})", tags=["conformance"])(conformance_xla)


for _version in TORCH_VERSIONS:
    if _version in TORCH_XLA:
        _xla_session(_version)


def _conformance(session: nox.Session, torch_version: str) -> None:
    """The spec suite, kernel tests and bad-input corpus on one torch version (and the XLA tests
    where it has torch_xla); results, JUnit XML and a status file under reports/."""
    started = time.monotonic()
    status: dict = {"torch_requested": torch_version, "torch_xla_requested": TORCH_XLA.get(torch_version),
                    "torch_index": _index_args() or None}
    try:
        _install(session, torch_version)
    except InstallFailed as exc:
        status.update(status="install failed", error=str(exc), seconds=round(time.monotonic() - started, 1))
        path = _write_status(torch_version, status)
        session.error(f"install failed for torch {torch_version} (recorded in {path.relative_to(ROOT)}):\n{exc}")
    status.update(torch=_installed(session, "torch"), torch_xla=_installed(session, "torch_xla"),
                  install_seconds=round(time.monotonic() - started, 1))
    if _install_only(session, REPORTS / f"status-torch-{torch_version}.json", status):
        return
    env = {"PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")} if torch_version in TORCH_XLA else {}

    REPORTS.mkdir(exist_ok=True)
    junit = REPORTS / f"junit-torch-{torch_version}.xml"
    results = REPORTS / f"results-torch-{torch_version}.json"
    args = ["-p", "no:cacheprovider", f"--junitxml={junit}"]
    if _plugin_has_results_option(session):
        args.append(f"--conformance-results={results}")
        status["results"] = str(results.relative_to(ROOT))
    status["junit"] = str(junit.relative_to(ROOT))

    ran = time.monotonic()
    exit_codes = {}
    try:
        exit_codes["specs"] = _pytest(session, ["specs", *args, *session.posargs], env)
        if os.environ.get("CONFORMANCE_NOX_KERNEL_TESTS", "1") != "0":
            # the kernels build their C++ part per torch version (own cache directory), so each
            # torch's ABI is exercised; bad inputs must raise, never crash the process
            kernels_junit = REPORTS / f"junit-kernels-torch-{torch_version}.xml"
            exit_codes["kernels"] = _pytest(
                session, ["tests/test_kernels.py", "-p", "no:cacheprovider", f"--junitxml={kernels_junit}"], env)
            if exit_codes["kernels"] < 0:
                status["kernels_crashed"] = f"killed by signal {-exit_codes['kernels']}"
        if os.environ.get("CONFORMANCE_NOX_BAD_INPUT_TESTS", "1") != "0":
            # the bad-input corpus (pathological specs among the real ones, locked results files,
            # contract violations) on this torch: one bad spec is one invalid-spec item everywhere
            bad_input_junit = REPORTS / f"junit-bad-input-torch-{torch_version}.xml"
            exit_codes["bad_input"] = _pytest(
                session, ["tests/test_bad_input.py", "tests/test_check_robustness.py",  # and check's probes
                          "-p", "no:cacheprovider", f"--junitxml={bad_input_junit}"], env)
        if torch_version in TORCH_XLA:
            xla_junit = REPORTS / f"junit-xla-tests-torch-{torch_version}.xml"
            exit_codes["xla_tests"] = _pytest(
                session, [*XLA_TESTS, "-p", "no:cacheprovider", f"--junitxml={xla_junit}"], env)
    finally:
        failed = {name: code for name, code in exit_codes.items() if code != 0}
        status.update(status="passed" if exit_codes and not failed else "failed", pytest_exit_codes=exit_codes,
                      test_seconds=round(time.monotonic() - ran, 1), seconds=round(time.monotonic() - started, 1))
        path = _write_status(torch_version, status)
        session.log(f"status: {path.relative_to(ROOT)}: {status['status']} {exit_codes}")
    if failed:
        session.error(f"pytest exited {failed} on torch {torch_version}")


def _pytest(session: nox.Session, args: list[str], env: dict) -> int:
    """Run pytest in the venv, output streamed; return its exit code (5: no tests collected)."""
    command = [_venv_python(session), "-m", "pytest", *args]
    session.log(" ".join(f"{k}={v}" for k, v in env.items()) + (" " if env else "") + " ".join(command[1:]))
    return subprocess.run(command, cwd=ROOT, env={**os.environ, **env}).returncode


@nox.session
def tests(session: nox.Session) -> None:
    """The harness's own tests (tests/), on the torch the suite is developed on."""
    try:
        _install(session, TESTS_TORCH)
    except InstallFailed as exc:
        session.error(str(exc))
    session.run("python", "-m", "pytest", "tests", "-p", "no:cacheprovider", *session.posargs)


# Outside libraries the shipped example candidates (examples/candidates/) adapt, pinned to the
# versions their verdicts were pinned on (examples/tests/). CPU wheels only.
EXAMPLES_REQUIREMENTS = ["tensorflow-cpu==2.21.0", "jax[cpu]==0.10.2", "optax==0.2.8", "pandas==3.1.1",
                         "torch_geometric==2.8.1"]
EXAMPLES_MODULES = {"tensorflow": "2.21.0", "jax": "0.10.2", "optax": "0.2.8", "pandas": "3.1.1",
                    "torch_geometric": "2.8.1"}  # skip pip when all match


@nox.session
def examples(session: nox.Session) -> None:
    """The example candidates (scipy, JAX, optax, TensorFlow, pandas, numpy.ma, PyG) and their pinned verdicts
    (examples/tests/), on the torch the suite is developed on. Not a default session.

    Writes reports/status-examples.json ("install failed" when a wheel could not be installed).
    """
    started = time.monotonic()
    (REPORTS / "status-examples.json").unlink(missing_ok=True)  # never judge CI by a stale one
    status: dict = {"torch_requested": TESTS_TORCH, "requirements": EXAMPLES_REQUIREMENTS}
    try:
        _install(session, TESTS_TORCH)
        if any(_installed(session, module) != version for module, version in EXAMPLES_MODULES.items()):
            _pip(session, *EXAMPLES_REQUIREMENTS)
    except InstallFailed as exc:
        status.update(status="install failed", error=str(exc), seconds=round(time.monotonic() - started, 1))
        REPORTS.mkdir(exist_ok=True)
        (REPORTS / "status-examples.json").write_text(json.dumps(status, indent=2) + "\n")
        session.error(f"install failed for the examples (recorded in reports/status-examples.json):\n{exc}")
    status["install_seconds"] = round(time.monotonic() - started, 1)
    if _install_only(session, REPORTS / "status-examples.json", status):
        return
    ran = time.monotonic()
    # a worker per core, each library's module on one worker (its pinned runs share one child process's
    # results, cached per process): one library's run is mostly one process, so two side by side keep
    # both cores busy where one left a core idle (and the XLA session runs beside this one in CI)
    code = _pytest(session, ["examples/tests", "-p", "no:cacheprovider", "-n", "auto", "--dist", "loadfile",
                             *session.posargs], {})
    status.update(status="passed" if code == 0 else "failed", pytest_exit_code=code,
                  test_seconds=round(time.monotonic() - ran, 1), seconds=round(time.monotonic() - started, 1))
    REPORTS.mkdir(exist_ok=True)
    (REPORTS / "status-examples.json").write_text(json.dumps(status, indent=2) + "\n")
    session.log(f"status: reports/status-examples.json: {status['status']} (pytest exit {code})")
    if code != 0:
        session.error(f"the examples' pinned verdicts failed (pytest exit {code})")


def _install_newest(session: nox.Session) -> dict[str, str]:
    """torch (the version the suite is developed on) and the newest releases of everything else this
    package and its test extras need, with no constraints; returns ``pip freeze``'s pins, torch left out."""
    if _installed(session, "torch") != TESTS_TORCH:
        _pip(session, f"torch=={TESTS_TORCH}", *_index_args())
    _pip(session, "--upgrade", "--upgrade-strategy", "eager", "-e", f"{ROOT}[test]")
    freeze = subprocess.run([_venv_python(session), "-m", "pip", "freeze", "--exclude-editable"],
                            capture_output=True, text=True, check=True).stdout
    return {name: line for name, line in _pinned(freeze).items() if name != "torch"}


@nox.session
def lock(session: nox.Session) -> None:
    """Refresh constraints.txt: the newest releases of what the package and its test extras need, beside
    torch, as pip freeze gives them (run nox -s newest first to see whether the tests pass on them)."""
    pins = _install_newest(session)
    CONSTRAINTS.write_text(CONSTRAINTS_HEADER + "\n".join(sorted(pins.values(), key=str.lower)) + "\n")
    session.log(f"constraints.txt: {len(pins)} pins")


@nox.session
def newest(session: nox.Session) -> None:
    """The fast tier on the newest releases of every dependency (not constraints.txt's pins): what moved
    and whether the tests still pass, in reports/status-newest.json. A failure here is news about a
    release, not about a change: the session reports it and exits 0."""
    started = time.monotonic()
    pins = _install_newest(session)
    locked = _pinned(CONSTRAINTS.read_text())
    moved = {name: {"pinned": locked[name].split("==", 1)[1] if name in locked else None,
                    "newest": line.split("==", 1)[1]}
             for name, line in sorted(pins.items()) if locked.get(name) != line}
    junit = REPORTS / "junit-newest.xml"
    code = _pytest(session, ["-p", "no:cacheprovider", f"--junitxml={junit}", *session.posargs], {})
    status = {"status": "passed" if code == 0 else "failed", "pytest_exit_code": code, "moved": moved,
              "junit": str(junit.relative_to(ROOT)), "seconds": round(time.monotonic() - started, 1)}
    REPORTS.mkdir(exist_ok=True)
    (REPORTS / "status-newest.json").write_text(json.dumps(status, indent=2) + "\n")
    for name, versions in moved.items():
        session.log(f"moved: {name} {versions['pinned']} -> {versions['newest']}")
    if code != 0:
        session.warn(f"the fast tier FAILED on the newest releases (pytest exit {code}; {len(moved)} moved from "
                     f"constraints.txt, listed above): see {junit.relative_to(ROOT)} before running nox -s lock")
    else:
        session.log(f"the fast tier passed on the newest releases ({len(moved)} moved from constraints.txt)")


# ------------------------------------------------------------------ the release matrix (nox -t releases)

# every torch release the suite claims (pyproject.toml: torch>=2.1), the newest patch of each minor on the
# package index (`pip index versions torch`, 2026-11-29); CONFORMANCE_TORCH_RELEASES replaces the list
RELEASES = [v.strip() for v in os.environ.get("CONFORMANCE_TORCH_RELEASES", "").split(",") if v.strip()] or [
    "2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.1",
    "2.13.0", "2.14.1", "2.15.0"]
RELEASES_DIR = REPORTS / "releases"
# releases built against NumPy 1: NumPy 2 cannot load them ("A module that was compiled using NumPy 1.x")
NUMPY_1_BEFORE = (2, 4)


def _ensure_pkg_resources(session: nox.Session) -> None:
    """torch 2.1's Inductor imports pkg_resources without declaring setuptools (a venv of nox's has none):
    every compiled item was "BackendCompilerFailed: No module named 'pkg_resources'"; installed where missing."""
    if subprocess.run([_venv_python(session), "-c", "import pkg_resources"], capture_output=True).returncode:
        _pip(session, "setuptools<81")


def _release_tuple(version: str) -> tuple[int, ...]:
    """(major, minor) of a torch version ("2.1.2+cu121" -> (2, 1))."""
    return tuple(int("".join(c for c in part if c.isdigit()) or 0) for part in version.split("+")[0].split(".")[:2])


def _suite_commit() -> str | None:
    """HEAD's commit when the checkout is clean (a release's results are reused only for the same suite)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return None if dirty.stdout.strip() else commit.stdout.strip()


def _already_run(results: Path, commit: str | None) -> bool:
    """Whether ``results`` is a complete run of this same suite commit (so the release need not run again)."""
    try:
        run = json.loads(results.read_text())["run"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    suite = run.get("suite") or {}
    return (commit is not None and run.get("status") == "complete" and suite.get("git_commit") == commit
            and not suite.get("git_dirty"))


@nox.session(tags=["releases"])
@nox.parametrize("torch_version", [nox.param(v, id=f"torch-{v}") for v in RELEASES])
def release(session: nox.Session, torch_version: str) -> None:
    """The spec suite on one torch release for the cross-release report (nox -t releases runs every
    release, one after another). Resumable: a release whose results exist for this clean suite commit is
    not run again. Its venv (several GB: torch and its CUDA libraries) is removed after the run unless
    CONFORMANCE_RELEASES_KEEP_VENVS=1; reports/releases/status-torch-<V>.json says what happened."""
    RELEASES_DIR.mkdir(parents=True, exist_ok=True)
    results = RELEASES_DIR / f"results-torch-{torch_version}.json"
    status_path = RELEASES_DIR / f"status-torch-{torch_version}.json"
    position = f"release {RELEASES.index(torch_version) + 1} of {len(RELEASES)}"
    commit = _suite_commit()
    if _already_run(results, commit):
        session.log(f"{position}: torch {torch_version} already ran at {commit[:12]} ({results.relative_to(ROOT)})")
        return
    session.log(f"{position}: torch {torch_version}")
    started = time.monotonic()
    status: dict = {"torch_requested": torch_version, "suite_commit": commit}
    try:
        _install(session, torch_version)  # NumPy 1 where the release needs it (_constraints_for)
        _ensure_pkg_resources(session)
    except InstallFailed as exc:
        status.update(status="install failed", error=str(exc), seconds=round(time.monotonic() - started, 1))
        status_path.write_text(json.dumps(status, indent=2) + "\n")
        session.error(f"install failed for torch {torch_version} ({status_path.relative_to(ROOT)}):\n{exc}")
    status.update(torch=_installed(session, "torch"), numpy=_installed(session, "numpy"),
                  install_seconds=round(time.monotonic() - started, 1))
    ran = time.monotonic()
    code = _pytest(session, ["specs", "-p", "no:cacheprovider", "-n", "auto", "--conformance-device", "cpu",
                             f"--conformance-results={results}", "--conformance-label", f"torch {torch_version}",
                             *session.posargs], {})
    # 0 or 1 (items failed: torch's differences, the report lists them) is a completed run; anything else
    # (an error of the suite's at startup, an interrupted run) is this release's failure
    status.update(status="completed" if code in (0, 1) else "failed", pytest_exit_code=code,
                  test_seconds=round(time.monotonic() - ran, 1))
    # the findings' reproducers in the same venv: the dates of docs/findings.md (nox -t findings: these alone)
    status["findings"] = _date_findings(session, torch_version)
    status["seconds"] = round(time.monotonic() - started, 1)
    if os.environ.get("CONFORMANCE_RELEASES_KEEP_VENVS", "0") in ("", "0"):
        import shutil

        shutil.rmtree(session.virtualenv.location, ignore_errors=True)
        status["venv_removed"] = True
    status_path.write_text(json.dumps(status, indent=2) + "\n")
    session.log(f"status: {status_path.relative_to(ROOT)}: {status['status']} (pytest exit {code})")
    if code not in (0, 1):
        session.error(f"the spec run on torch {torch_version} did not complete (pytest exit {code})")


def _date_findings(session: nox.Session, torch_version: str) -> str:
    """Run every reproducer of findings/reproducers/ in the session's venv into
    reports/releases/findings-torch-<V>.json; what happened, in words (a failure is said, never raised:
    the release's spec results stand)."""
    out = RELEASES_DIR / f"findings-torch-{torch_version}.json"
    command = [sys.executable, "-m", "conformance.entry_points.dating", "run", "--python", _venv_python(session),
               "-o", str(out)]
    session.log(" ".join(command[1:]))
    done = subprocess.run(command, cwd=ROOT)
    if done.returncode != 0:
        session.warn(f"the findings' reproducers did not run on torch {torch_version} (exit {done.returncode})")
        return f"failed (exit {done.returncode})"
    return str(out.relative_to(ROOT))


def _findings_already_dated(out: Path, torch_version: str) -> bool:
    """Whether ``out`` holds this release's run of the reproducers as they are now."""
    from conformance.entry_points.dating import fingerprint, release_of

    try:
        data = json.loads(out.read_text())
    except (OSError, ValueError):
        return False
    return (release_of(data.get("torch") or "") == torch_version
            and data.get("reproducers") == fingerprint(ROOT / "findings" / "reproducers"))


@nox.session(tags=["findings"])
@nox.parametrize("torch_version", [nox.param(v, id=f"torch-{v}") for v in RELEASES])
def findings(session: nox.Session, torch_version: str) -> None:
    """The findings' torch-only reproducers (findings/reproducers/) on one torch release, into
    reports/releases/findings-torch-<V>.json; nox -t findings runs every release, then findings_dates.
    Only torch and NumPy are installed (no suite); resumable: a release that ran the same reproducers is skipped."""
    RELEASES_DIR.mkdir(parents=True, exist_ok=True)
    out = RELEASES_DIR / f"findings-torch-{torch_version}.json"
    position = f"release {RELEASES.index(torch_version) + 1} of {len(RELEASES)}"
    if _findings_already_dated(out, torch_version):
        session.log(f"{position}: torch {torch_version}'s reproducers already ran ({out.relative_to(ROOT)})")
        return
    session.log(f"{position}: torch {torch_version}")
    try:
        if _installed(session, "torch") != torch_version:
            # NumPy too: torch 2.2's Dynamo imports it (the compiled reproducers "cannot run" without it), and
            # NumPy 1 where the release was built against it
            numpy = "numpy<2" if _release_tuple(torch_version) < NUMPY_1_BEFORE else "numpy"
            _pip(session, f"torch=={torch_version}", numpy, *_index_args())
        _ensure_pkg_resources(session)
    except InstallFailed as exc:
        session.error(f"install failed for torch {torch_version}:\n{exc}")
    outcome = _date_findings(session, torch_version)
    if os.environ.get("CONFORMANCE_RELEASES_KEEP_VENVS", "0") in ("", "0"):
        import shutil

        shutil.rmtree(session.virtualenv.location, ignore_errors=True)
    if outcome.startswith("failed"):
        session.error(f"the reproducers did not run on torch {torch_version}: {outcome}")


@nox.session(tags=["findings"], venv_backend="none")
def findings_dates(session: nox.Session) -> None:
    """Merge the releases' reproducer runs into findings/dates.json and docs/findings.md's table (runs last
    in nox -t findings; commit both: tests/test_findings_dates.py checks the registrations against them)."""
    files = sorted(RELEASES_DIR.glob("findings-torch-*.json"))
    if not files:
        session.error(f"no release's reproducers ran under {RELEASES_DIR.relative_to(ROOT)}: run nox -t findings")
    session.run(sys.executable, "-m", "conformance.entry_points.dating", "table", *map(str, files), external=True)


OLDEST_TORCH = "2.1.2"  # the oldest release pyproject.toml's torch>=2.1 claims (the newest patch of 2.1)
# the specs whose items all pass, are known divergences or unsupported on it (docs/findings.md): exit 0
OLDEST_RUN_SPECS = ("specs/coalesce.yaml", "specs/sparse_adam.yaml")


@nox.session
def oldest(session: nox.Session) -> None:
    """The plugin on the oldest torch the suite claims (CI runs it; issue 51): every spec collected with
    no error of the suite's own, and the specs of OLDEST_RUN_SPECS run to a complete results file with
    every item passed, a known divergence or unsupported ("not in torch 2.1: ..."). The whole release
    is `nox -s "release(torch-2.1.2)"`."""
    started = time.monotonic()
    status: dict = {"torch_requested": OLDEST_TORCH}
    status_path = REPORTS / "status-oldest.json"
    REPORTS.mkdir(exist_ok=True)
    try:
        _install(session, OLDEST_TORCH)
        _ensure_pkg_resources(session)
    except InstallFailed as exc:
        status.update(status="install failed", error=str(exc))
        status_path.write_text(json.dumps(status, indent=2) + "\n")
        session.error(f"install failed for torch {OLDEST_TORCH} ({status_path.relative_to(ROOT)}):\n{exc}")
    status.update(torch=_installed(session, "torch"), install_seconds=round(time.monotonic() - started, 1))
    if _install_only(session, status_path, status):
        return
    results = REPORTS / "results-oldest.json"
    codes = {"collect": _pytest(session, ["specs", "--collect-only", "-q", "-p", "no:cacheprovider"], {}),
             "run": _pytest(session, [*OLDEST_RUN_SPECS, "-p", "no:cacheprovider", "-n", "auto",
                                      "--conformance-device", "cpu", f"--conformance-results={results}"], {})}
    status.update(status="passed" if set(codes.values()) == {0} else "failed", pytest_exit_codes=codes,
                  seconds=round(time.monotonic() - started, 1))
    status_path.write_text(json.dumps(status, indent=2) + "\n")
    if status["status"] != "passed":
        session.error(f"the suite on torch {OLDEST_TORCH}: pytest exited {codes} ({status_path.relative_to(ROOT)})")


@nox.session(tags=["releases"])
def releases_report(session: nox.Session) -> None:
    """One report across the releases that ran (reports/releases/index.html), with what moved from each
    release to the next; runs last in nox -t releases."""
    from packaging.version import Version

    files = sorted(RELEASES_DIR.glob("results-torch-*.json"), key=lambda p: Version(p.stem.removeprefix("results-torch-")))
    if not files:
        session.error(f"no release has results under {RELEASES_DIR.relative_to(ROOT)}: run nox -t releases")
    session.run(sys.executable, "-m", "conformance", "report", *map(str, files), "-o",
                str(RELEASES_DIR / "index.html"), external=True)
