"""The README and docs/ can't go stale: their commands and samples are run, and the reference in
docs/ builds (``mkdocs build --strict`` fails on a broken link, a page missing from mkdocs.yml's nav
or a nav entry without a page).

Every fenced ``bash``/``sh``/``yaml``/``python`` block of README.md and docs/*.md carries a marker
on the line before it, an HTML comment that Markdown does not show:

* ``<!-- runnable: exit=1 expect="RESULT: FAIL" -->``: the block runs (bash) in a directory of its
  own, with the checkout's ``specs``, ``tests`` and ``examples`` linked there (so the commands read
  as from a clone, and what they write stays out of it); its exit status and each ``expect`` text
  in its output are asserted. Several specs separated by ``|`` stand for the block's command lines,
  one each, in order. ``timeout=SECONDS`` (default 600) bounds a command: ``check`` at its defaults
  on a failing candidate took over 600 s on the 2-core VM beside another job. Such a block runs in
  the slow tier; ``tier=acceptance`` puts it in the acceptance tier instead (conftest.py): the
  blocks that run ``check`` at its defaults, a minute or more a command.
* ``<!-- runnable: kind=spec -->``: a YAML spec, loaded and validated as ``specs/*.yaml`` are.
* ``<!-- runnable: kind=workflow -->``: a workflow calling one of this repository's reusable
  workflows; it must name the workflow file and only inputs it declares.
* ``<!-- not run: why -->``: the long main job, nox sessions, installs from the network,
  placeholders such as ``mypkg.optim:FusedAdagrad``; the reason is required.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import filelock
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKED_LANGUAGES = {"bash", "sh", "shell", "console", "yaml", "yml", "python"}
LINKED = ("specs", "tests", "examples")  # what the commands read from the checkout

FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"<!--\s*(?P<kind>runnable|not run)\s*:?\s*(?P<spec>.*?)\s*-->\s*\Z", re.S)
OPTION = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    body: str
    marker: str | None  # "runnable" / "not run" / None
    spec: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO).as_posix()}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n")
        last = before.rsplit("\n", 1)[-1] if before else ""
        marker = MARKER.search(last)
        found.append(Block(page, text[:match.start()].count("\n") + 1, match.group("lang").lower(),
                           match.group("body"), marker.group("kind") if marker else None,
                           marker.group("spec") if marker else ""))
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks(page)]
RUNNABLE = [block for block in ALL_BLOCKS if block.marker == "runnable"]


def options(spec: str) -> list[dict[str, list[str]]]:
    """``exit=1 expect="a" | exit=0`` -> one {name: [values]} per ``|``-separated part."""
    parts = []
    for part in spec.split("|"):
        found: dict[str, list[str]] = {}
        for name, value in OPTION.findall(part):
            if value.startswith('"'):
                value = bytes(value[1:-1], "utf-8").decode("unicode_escape")
            found.setdefault(name, []).append(value)
        parts.append(found)
    return parts


def command_lines(body: str) -> list[str]:
    """The block's commands: one a line (a trailing ``\\`` continues it), comment lines left out."""
    lines, current = [], ""
    for raw in body.splitlines():
        line = raw.rstrip()
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        lines.append(current + line)
        current = ""
    return lines


def test_every_command_block_is_marked_runnable_or_says_why_not():
    unmarked = [b.id for b in ALL_BLOCKS if b.lang in MARKED_LANGUAGES and b.marker is None]
    assert not unmarked, f"fenced blocks without <!-- runnable: ... --> or <!-- not run: why -->: {unmarked}"
    no_reason = [b.id for b in ALL_BLOCKS if b.marker == "not run" and not b.spec]
    assert not no_reason, f"<!-- not run --> needs its reason: {no_reason}"
    assert len(RUNNABLE) >= 5, [b.id for b in RUNNABLE]


def _workspace(tmp_path: Path) -> Path:
    """A directory of its own that reads like a clone: the checkout's specs, tests and examples linked."""
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=True)
    return tmp_path


def _environment() -> dict[str, str]:
    """A user's shell: none of this session's conformance, Hypothesis or pytest settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONFORMANCE_", "HYPOTHESIS_", "PYTEST_"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@pytest.fixture(scope="session")
def shared_runs(tmp_path_factory) -> Path:
    """Where a command's run is kept for the other blocks of this test session that give the same command:
    one folder for all of pytest-xdist's workers (they share the base temporary folder's parent and
    ``PYTEST_XDIST_TESTRUNUID``), none shared with another session."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    folder = tmp_path_factory.getbasetemp().parent / f"docs-runs-{run}"
    folder.mkdir(exist_ok=True)
    return folder


def _normalised(command: str) -> str:
    """A command line as bash reads its words (spacing and a trailing ``# comment`` left out)."""
    try:
        return " ".join(shlex.split(command, comments=True))
    except ValueError:  # not one command's words (a here-document, an open quote): the text as it is
        return command.strip()


def _run_once(commands: list[str], index: int, script: str, cwd: Path, timeout: float, shared: Path) -> tuple[int, str]:
    """(exit status, output) of ``script``, the block's ``commands[index]``, run in ``cwd`` (a workspace of
    :func:`_workspace`'s). Two blocks that give the same command after the same earlier commands (the
    README's ``check`` of torch's Adagrad at its defaults is also docs/candidates.md's) run it once in a test
    session: a block whose last command it is reads the other block's run, kept under ``shared``, instead of
    running it again (each block's exit status and expected texts are still asserted, on a run of exactly its
    command in the same kind of workspace). A command that later commands of its block follow always runs in
    the block's own workspace, since they may read what it wrote; its run is kept for the others. Under
    pytest-xdist the first worker to take the command's lock runs it; a reader waits for it."""
    key = hashlib.sha256("\n".join(map(_normalised, commands[:index + 1])).encode()).hexdigest()[:20]
    kept, lock = shared / f"{key}.json", filelock.FileLock(str(shared / f"{key}.lock"))
    last = index == len(commands) - 1
    try:
        lock.acquire(timeout=-1 if last else 0)
    except filelock.Timeout:  # another block is running it, and this one needs its own run: no wait
        lock = None
    try:
        if last and kept.is_file():
            run = json.loads(kept.read_text(encoding="utf-8"))
            return run["returncode"], run["output"]
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=_environment(),
                              capture_output=True, text=True, timeout=timeout)
        output = proc.stdout + proc.stderr
        if lock is not None and not kept.is_file():
            kept.write_text(json.dumps({"returncode": proc.returncode, "output": output}),
                            encoding="utf-8")
        return proc.returncode, output
    finally:
        if lock is not None:
            lock.release()


def _run_commands(block: Block, cwd: Path, shared: Path) -> None:
    specs = options(block.spec)
    commands = command_lines(block.body)
    if len(specs) == 1:
        runs = [(block.body, specs[0])]
        if len(commands) != 1:  # several lines run as one script: not one command another block could give
            commands = [block.body]
    else:
        assert len(commands) == len(specs), f"{block.id}: {len(specs)} specs for {len(commands)} commands"
        runs = list(zip(commands, specs))
    for index, (script, spec) in enumerate(runs):
        returncode, output = _run_once(commands, index, script, cwd, float(spec.get("timeout", ["600"])[0]), shared)
        want = int(spec.get("exit", ["0"])[0])
        assert returncode == want, (f"{block.id}: {script.strip()[:200]!r} exited {returncode}, "
                                    f"the docs say {want}\n{output[-4000:]}")
        for text in spec.get("expect", []):
            assert text in output, f"{block.id}: {script.strip()[:200]!r} did not print {text!r}\n{output[-4000:]}"


def test_a_command_two_blocks_give_runs_once_and_a_command_followed_by_others_runs_in_its_own_workspace(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    stamp = 'date +%s%N; touch made-here   # one run'

    def block(body: str, spec: str) -> Block:
        return Block(REPO / "README.md", 1, "bash", body, "runnable", spec)

    def ran(name: str, body: str, spec: str) -> Path:
        cwd = tmp_path / name
        cwd.mkdir()
        _run_commands(block(body, spec), cwd, shared)
        return cwd

    first = ran("first", stamp + "\n", "exit=0")
    assert (first / "made-here").is_file()
    printed = json.loads(next(shared.glob("*.json")).read_text())["output"]
    # the same command (spacing and comment aside), last of its block: the kept run is read, nothing runs here
    again = ran("again", "date  +%s%N; touch made-here\n", f'exit=0 expect="{printed.strip()}"')
    assert not (again / "made-here").exists()
    # followed by another command that may read what it wrote: it runs in the block's own workspace
    followed = ran("followed", stamp + "\nls made-here\n", "exit=0 | exit=0")
    assert (followed / "made-here").is_file()
    # a different command is not the kept one
    other = ran("other", "date +%s%N; touch made-elsewhere\n", "exit=0")
    assert (other / "made-elsewhere").is_file()
    with pytest.raises(AssertionError, match="exited 0, the docs say 1"):  # a kept run's status is asserted too
        ran("status", stamp + "\n", "exit=1")


def _load_spec(block: Block, cwd: Path) -> None:
    from conformance.specs.load import load_spec

    path = cwd / "sample.yaml"
    path.write_text(block.body, encoding="utf-8")
    spec = load_spec(path)  # raises SpecError naming the field if the sample is not a valid spec
    assert spec.cases, f"{block.id}: the sample spec has no case"


def _check_workflow(block: Block, cwd: Path) -> None:
    document = yaml.safe_load(block.body)
    for name, job in document["jobs"].items():
        uses = job["uses"]
        path = re.sub(r"^[^/]+/[^/]+/", "", uses.split("@")[0])
        workflow = REPO / path
        assert workflow.is_file(), f"{block.id}: job {name} uses {uses}: no {path} here"
        declared = yaml.safe_load(workflow.read_text(encoding="utf-8"))
        trigger = declared.get("on", declared.get(True))  # YAML 1.1 reads the key `on` as True
        inputs = trigger["workflow_call"].get("inputs", {})
        unknown = set(job.get("with", {})) - set(inputs)
        assert not unknown, f"{block.id}: {path} has no input(s) {sorted(unknown)}; it has {sorted(inputs)}"
        required = {k for k, v in inputs.items() if v.get("required")}
        assert required <= set(job.get("with", {})), f"{block.id}: missing required input(s) {required}"
        for line in block.body.splitlines():  # "# optional; also a, b, c": those must be inputs too
            if "also " in line and "#" in line:
                named = [w.strip(" ,") for w in line.split("also ", 1)[1].split(",")]
                missing = [w for w in named if w and w not in inputs]
                assert not missing, f"{block.id}: the comment names input(s) {missing} that {path} lacks"


def _param(block: Block):
    """A block that runs commands (each a child process: replay, sharded runs, ``check``) is in the
    slow tier, or in the acceptance tier when its marker says ``tier=acceptance`` (``check`` at its
    defaults); a spec or workflow sample is checked in process, in the fast tier."""
    first = options(block.spec)[0]
    if first.get("kind", ["commands"])[0] in ("spec", "workflow"):
        return pytest.param(block, id=block.id)
    tier = first.get("tier", ["slow"])[0]
    assert tier in ("slow", "acceptance"), f"{block.id}: tier={tier}: a command block's tier is slow or acceptance"
    return pytest.param(block, id=block.id, marks=getattr(pytest.mark, tier))


@pytest.mark.parametrize("block", [_param(block) for block in RUNNABLE])
def test_the_docs_commands_and_samples_do_what_they_say(block, tmp_path, shared_runs):
    cwd = _workspace(tmp_path)
    kind = options(block.spec)[0].get("kind", ["commands"])[0]
    if kind == "spec":
        _load_spec(block, cwd)
    elif kind == "workflow":
        _check_workflow(block, cwd)
    elif kind == "python":
        proc = subprocess.run([sys.executable, "-c", block.body], cwd=cwd, env=_environment(), capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == int(options(block.spec)[0].get("exit", ["0"])[0]), proc.stdout + proc.stderr
    else:
        assert block.lang in ("bash", "sh", "shell"), f"{block.id}: runnable commands must be a bash/sh block"
        _run_commands(block, cwd, shared_runs)


def test_the_marker_grammar():
    assert options('exit=1 expect="RESULT: FAIL" expect="a \\"b\\""') == [
        {"exit": ["1"], "expect": ["RESULT: FAIL", 'a "b"']}]
    assert options("exit=0 | exit=1") == [{"exit": ["0"]}, {"exit": ["1"]}]
    assert command_lines("# c\npython a \\\n  --b\n\nls  # x\n") == ["python a    --b", "ls  # x"]


def test_the_readme_is_short_and_points_at_pages_that_exist():
    assert len(README.splitlines()) <= 200
    for page in re.findall(r"`(docs/[\w./-]+\.md)`", README):
        assert (REPO / page).is_file() or page == "docs/architecture.md", page
    # the two commands, and the command that gives a pull request's pass/fail
    assert README.count("pip install torch==2.13.0 -c constraints.txt -e \".[test]\" && ") == 2
    assert "python -m conformance check adagrad=" in README and "exits 0 when your" in README


def test_mkdocs_build_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and MkDocs is not installed (pip install -e '.[test]')")
        pytest.skip("MkDocs is not installed (pip install -e '.[test]')")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "candidates" / "index.html").is_file()


TIMING = re.compile(r"(?<![\w.-])\d+(?:\.\d+)?(?:[-\u2013]\d+(?:\.\d+)?)? ?(?:s|ms|min|minutes|seconds)\b")
WHEN = re.compile(r"20\d\d-\d\d-\d\d|\bat [0-9a-f]{7}\b")  # a date, or the commit it was measured at
SETTING = re.compile(r"timeout|limit|budget|default|at most|within|grace|--[a-z]|bound|deadline|watchdog|every|"
                     r"sleep|waits?\b|cap", re.I)


def undated_timings(page: Path) -> list[str]:
    """The paragraphs of ``page`` (outside fenced blocks) that state a duration with no date or commit in them
    or in their section's heading, and no word of a setting (a timeout, a limit, a budget...)."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found = []
    for section in re.split(r"\n(?=#{1,6} )", text):
        heading = section.split("\n", 1)[0] if section.startswith("#") else ""
        for paragraph in re.split(r"\n\s*\n", section):
            if TIMING.search(paragraph) and not WHEN.search(paragraph) and not WHEN.search(heading) \
                    and not SETTING.search(paragraph):
                found.append(f"{page.relative_to(REPO).as_posix()}: {TIMING.search(paragraph).group(0)!r} in "
                             f"{' '.join(paragraph.split())[:120]!r}")
    return found


def test_every_duration_the_docs_state_says_when_it_was_measured():
    """Machines differ 2-3x from day to day: a duration in README.md or docs/ is a measurement with its date
    (or the commit it was measured at) in its paragraph or its section's heading, unless it is a setting."""
    found = [line for page in PAGES for line in undated_timings(page)]
    assert not found, "durations with no date:\n" + "\n".join(found)


def test_an_undated_duration_is_found(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("# Speed\n\nThe main job took 85.5 s on the 2-core VM.\n\n## Later (2026-11-28)\n\nIt took 90 s.\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert [line.split(":")[0] for line in undated_timings(page)] == ["page.md"]
    assert "85.5 s" in undated_timings(page)[0]


REPO_PATH = re.compile(r"`((?:conformance|tests|specs|examples|benchmarks|docs|\.github|\.ci)/[\w./-]+)(?![\w<*{])")
NOT_OURS = {"specs/openapi.yaml": "docs/running.md: a file of a user's project, in an example"}


def test_every_file_of_this_repository_the_docs_name_exists():
    """A path the README or docs/ name in code (`conformance/...`, `tests/...`, `specs/...`) is a file or folder of
    the checkout: a module renamed or a test moved fails here, not in a reader's hands."""
    missing = sorted({f"{page.relative_to(REPO).as_posix()}: {path}" for page in PAGES
                      for path in (m.group(1).rstrip(".,:;") for m in REPO_PATH.finditer(page.read_text("utf-8")))
                      if path not in NOT_OURS and not (REPO / path).exists()})
    assert not missing, "named in the docs, not in the checkout:\n" + "\n".join(missing)


def _section(page: str, heading: str) -> str:
    """The text of ``page`` (relative to the checkout) from ``heading`` to the next heading of any level."""
    text = (REPO / page).read_text(encoding="utf-8")
    start = text.index(heading + "\n")
    following = re.search(r"^#{1,6} ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + following.start()] if following else text[start:]


def test_the_option_lists_of_the_docs_name_every_option_and_no_other():
    """docs/running.md's "Options" block lists every ``--conformance-*`` option the plugin registers (the
    README calls it "all options"), with the ops, dtypes and devices they take; docs/candidates.md names
    every option of ``conformance check``. Neither import torch: a fraction of a second."""
    from conformance.entry_points.check_args import build_parser, declared_op_names
    from conformance.run import options

    class _Group:
        def __init__(self):
            self.names: list[str] = []

        def addoption(self, *names, **_):
            self.names.extend(names)

    class _Parser:
        def __init__(self):
            self.group = _Group()

        def getgroup(self, *_, **__):
            return self.group

        def addini(self, *_, **__):
            pass

    parser = _Parser()
    options.pytest_addoption(parser)
    block = FENCE.search(_section("docs/running.md", "## Options")).group("body")
    listed = {line.split()[0]: line for line in block.splitlines() if line.startswith("--")}
    assert set(listed) == set(parser.group.names), (
        f"docs/running.md's options: missing {sorted(set(parser.group.names) - set(listed))}, "
        f"not options {sorted(set(listed) - set(parser.group.names))}")
    for option, names in (("--conformance-op", sorted(declared_op_names())),
                          ("--conformance-dtype", list(options.DTYPE_NAMES)),
                          ("--conformance-device", list(options.DEVICE_NAMES))):
        assert ", ".join(names) in listed[option], (option, names)

    check = {o for action in build_parser()._actions for o in action.option_strings if o.startswith("--")} - {"--help"}
    paragraph = _section("docs/candidates.md", "# Gating a candidate implementation").split("| verdict |")[0]
    unnamed = sorted(o for o in check if f"`{o}" not in paragraph)
    assert not unnamed, f"docs/candidates.md's first paragraph does not name check's {unnamed}"
