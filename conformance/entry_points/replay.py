"""conformance replay ITEM: re-run exactly one item of a run, from any directory.

Every failure the suite prints (the console, the report's "Re-run it", a counterexample's script
and spec) names its item in one form that works wherever you stand, with the suite installed from
a wheel or in a clone, on every pytest version the suite allows:

  python -m conformance replay 'specs/adagrad.yaml::duplicates-cancel[candidate-cpu-float32]' --impl adagrad=my_adagrad.py:MyAdagrad
  python -m conformance replay 'specs::generated::adagrad-agrees-with-reference[candidate-cpu-float16]' --impl adagrad=my_adagrad.py:MyAdagrad --seed 0

An item id is PATH::NAME[BACKEND-DEVICE-DTYPE]. specs/... names the suite's own spec files (inside
the installed package, or a clone's specs/) and specs::generated its generated properties; any
other path is a spec file of your own, relative to the current directory. The item runs in a fresh
python -m pytest from the current directory (so --impl targets import as they did in the run; a file
candidate's folder is on PYTHONPATH too, so one that imports a module beside it loads from anywhere),
narrowed to the item's backend, device, dtype and op, and selected by exact identity
(--conformance-item: pytest 9 refuses path::name selection parts on a directory, and -k matches
substrings). A generated item runs its saved failing example first (kept by the run under
reports/counterexamples/.failing/, outside any time budget: here, else in the reports/ of a file
candidate's folder or one above it), then searches from the seed.
The candidate is first imported in a child process, as check's probe does: an import that takes longer
than --import-timeout (120 s) is a usage error, its process ended. SIGINT and SIGTERM reach the
pytest (its own process group), and whatever is left of that group when it ends is killed.
Exit status: pytest's, 0 when the item passes (or shows its known divergence), 1 when it fails;
4 when there is no such item or the candidate cannot be imported (a one-line error says why);
2 when interrupted; 6 when a generated item's search
stopped at its time budget with no saved failing example still failing (not reproduced: the
message says how many examples ran).

Item ids and re-run commands are :mod:`conformance.results.rerun`'s; the pytest side
(--conformance-item, each record's rerun field) is :mod:`conformance.run.rerun`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Iterable

from conformance.core.arguments import seconds
from conformance.core.record import CANDIDATE
from conformance.core.target import CandidateTarget
from conformance.core.text import failing_example_path
from conformance.entry_points import supervise
from conformance.entry_points.check_args import UsageError, _validate, add_import_timeout, declared_op_names
from conformance.entry_points.probe import _probe
from conformance.results.rerun import ItemId, ReplayError, ReplayOptions, parse_item, suite_specs


def replay_args(item: ItemId, *, impls: Iterable[str] = (), seed: int | None = None, profile: str | None = None,
                   examples: int | None = None, shrink: bool = True, benchmark: bool = False,
                   timeout: float | None = None, extra: Iterable[str] = ()) -> list[str]:
    """The ``python -m pytest`` command line that replays ``item``."""
    specs = suite_specs()
    ours = item.generated or specs in item.path.resolve().parents
    # node ids read specs/... under the suite's specs; a file of your own reads as from here
    rootdir = specs.parent if ours else Path.cwd()
    command = [sys.executable, "-m", "pytest", str(item.path), "--rootdir", str(rootdir),
               "-p", "no:cacheprovider", "-o", "addopts=", "--assert=plain", "-q", "-rfEx", "--conformance-item", item.text]
    if item.generated:
        # the spec files under the specs root are not this item: leave them unread
        command += ["--ignore-glob", str(item.path / "*.yaml"), "--ignore-glob", str(item.path / "*.yml")]
        command += ["--conformance-op", property_op(item)]
        if item.device == "xla":
            command.append("--conformance-generated-on-xla")
    if item.backend:
        assert item.device is not None and item.dtype is not None  # (parse_item: the three together)
        command += ["--conformance-backend", item.backend, "--conformance-device", item.device,
                    "--conformance-dtype", item.dtype]
    command += ReplayOptions(impls=tuple(impls), seed=seed, profile=profile, examples=examples, shrink=shrink,
                             benchmark=benchmark, timeout=timeout).pytest_flags()
    if not benchmark:  # pytest-benchmark would make its storage folder (.benchmarks/) where the user stands
        command += ["-p", "no:benchmark"]
    return command + list(extra)


def property_op(item: ItemId) -> str:
    """The op of a generated item's property. A property's id starts with its op's name and a hyphen
    (``tests/test_replay.py`` holds every property to it), so the op records' declared names, read from
    their source, tell it without importing torch: a replay's own process then costs a fraction of a second
    instead of seconds. An id that no op's name starts is looked up among the properties themselves, whose
    error names the known ones."""
    names = declared_op_names() or frozenset()
    op = max((name for name in names if item.case.startswith(f"{name}-")), key=len, default=None)
    if op is not None:
        return op
    from conformance.cases.properties import PROPERTIES  # lazy: it imports torch; cli imports this module

    op = next((prop.op for prop in PROPERTIES if prop.id == item.case), None)
    if op is None:
        raise ReplayError(f"{item.text!r}: no generated property {item.case!r}; known: "
                          f"{', '.join(sorted(prop.id for prop in PROPERTIES))}")
    return op


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="conformance replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("item", metavar="ITEM",
                        help="the item's id as printed, e.g. 'specs/adagrad.yaml::tutorial-step-2[coo-cpu-float32]' "
                             "or 'specs::generated::adagrad-agrees-with-reference[candidate-cpu-float16]' "
                             "(quote it: the brackets are shell patterns)")
    parser.add_argument("--impl", action="append", default=[], metavar="OP=module:attr",
                        help="the candidate, as in the run (needed when the item's backend is candidate)")
    parser.add_argument("--seed", type=int, default=None, help="a generated item's base seed, as in the run")
    parser.add_argument("--profile", default=None, metavar="PROFILE",
                        help="a generated item's Hypothesis profile (ci, thorough), when the run's was not ci")
    parser.add_argument("--examples", type=int, default=None, metavar="N",
                        help="a generated item's examples, when the run's were not the profile's")
    parser.add_argument("--no-shrink", action="store_true", help="report the first failing example as drawn")
    parser.add_argument("--benchmark", action="store_true", help="the item is a benchmark (--conformance-benchmark)")
    parser.add_argument("--counterexamples", default=None, metavar="DIR",
                        help="where the run kept a generated item's failing example (default: reports/counterexamples "
                             "here, else in a file candidate's folder or one above it; the printed command "
                             "names it when the run kept it elsewhere)")
    parser.add_argument("--timeout", type=seconds(False), default=None, metavar="SECONDS",
                        help="the run's per-item timeout (--conformance-timeout), when it was not the default "
                             "(the printed command names it)")
    add_import_timeout(parser)
    parser.add_argument("--pytest-args", default="", metavar="ARGS",
                        help="more pytest options, one string (e.g. \"--conformance-results reports/replay.json\")")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    try:
        item = parse_item(args.item)
        if item.backend == CANDIDATE and not args.impl:
            raise ReplayError(f"{args.item!r} runs a candidate: give it with --impl OP=module:attr, as in the run")
        command = replay_args(item, impls=args.impl, seed=args.seed, profile=args.profile,
                                 examples=args.examples, shrink=not args.no_shrink, benchmark=args.benchmark,
                                 timeout=args.timeout, extra=shlex.split(args.pytest_args or ""))
        targets = _validate(args.impl) if args.impl else []
    except (ReplayError, UsageError) as exc:
        print(f"conformance replay: {exc}", file=sys.stderr)
        return 4  # pytest's usage error: no such item
    folders = candidate_folders(args.impl)
    try:
        with importable(folders):
            imported = _probe(targets, args.import_timeout) if targets else None
    except UsageError as exc:
        print(f"conformance replay: usage error: {exc}", file=sys.stderr)
        return 4
    except supervise.Interrupted as exc:
        print(f"conformance replay: {exc} received while importing the candidate; its process was ended and "
              "nothing was run", file=sys.stderr)
        return 2  # pytest's "interrupted"
    if not item.generated or any(a.startswith("--conformance-results") for a in command):
        return _run(command, folders, imported)
    kept = kept_examples(item, args.counterexamples, folders)
    with tempfile.TemporaryDirectory(prefix="conformance-replay-") as folder:
        results = Path(folder) / "replay.json"
        # the record says how the search went; the saved failing example is where the run left it
        command += ["--conformance-results", str(results), "--conformance-counterexamples", str(kept)]
        code = _run(command, folders, imported)
        return _judged(item, code, results, kept)


def _run(command: list[str], folders: list[str], imported: float | None) -> int:
    """The replay's pytest, as check runs its own (conformance.entry_points.supervise): in its own process
    group, SIGINT and SIGTERM passed on, nothing of it left behind; the probe's import time sets the
    candidate's first-call limit there, as under check."""
    print("conformance replay:", shlex.join(command[1:]), flush=True)
    with importable(folders), supervise._environment(supervise._import_measure(imported)):
        return supervise.run_pytest(command)[0]


def candidate_folders(impls: Iterable[str]) -> list[str]:
    """The folders of the file candidates among ``impls`` (``OP=path/to/file.py:attr``, relative to the
    current directory or absolute), each once."""
    folders: list[str] = []
    for text in impls:
        target = CandidateTarget.parse_or_none(text)
        if target is not None and target.is_file:
            folder = os.path.dirname(os.path.abspath(target.module))
            if folder not in folders:
                folders.append(folder)
    return folders


@contextlib.contextmanager
def importable(folders: list[str]):
    """``folders`` on PYTHONPATH (after what it held) while the replay's pytest starts and runs: a file
    candidate that imports a module beside it (``from my_helpers import x``) loads from any directory,
    as it did in its run from its own folder."""
    if not folders:
        yield
        return
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([*filter(None, [before]), *folders])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def kept_examples(item: ItemId, given: str | None, folders: list[str]) -> Path:
    """Where the run kept ``item``'s failing example: ``--counterexamples``, else ``./reports/counterexamples``
    when it holds one for the item, else the first ``reports/counterexamples`` in a file candidate's folder
    or a folder above it that holds one (the run's directory, for a replay command run from elsewhere),
    else ``./reports/counterexamples``."""
    if given:
        return Path(given).absolute()
    here = (Path("reports") / "counterexamples").absolute()
    if failing_example_path(here, item.name).is_file():
        return here
    for folder in map(Path, folders):
        for above in (folder, *folder.parents):
            kept = above / "reports" / "counterexamples"
            if failing_example_path(kept, item.name).is_file():
                return kept
    return here


NOT_REPRODUCED = 6  # a generated item's search ran out of time before it could tell


def _judged(item: ItemId, code: int, results: Path, kept: Path) -> int:
    """A generated item's exit status: pytest's, except that a search cut short by its time budget,
    with no saved failing example still failing, is "not reproduced" (6), never a pass."""
    try:
        records = json.loads(results.read_text(encoding="utf-8"))["records"]
    except Exception:  # noqa: BLE001 - no results (a usage error, an interrupted run): pytest's status says why
        return code
    record = next((r for r in records if r.get("spec") == "generated"), None)
    if record is None or record.get("outcome") in ("failed", "error"):
        return code
    saved = failing_example_path(kept, item.name)
    said = {"passes now": f"the saved failing example ({saved}) passes now",
            None: f"the saved failing example {saved} was not run (the warning above says why)" if saved.exists()
            else f"no saved failing example at {saved} (run replay from the directory of the run)"}
    ran = f"{record.get('examples', 0)} examples ran"
    if record.get("budget_reached"):
        print(f"conformance replay: NOT REPRODUCED -- {said[record.get('saved_example')]}, and the search stopped at "
              f"its time budget: {ran} ({record['budget_reached']}). The failure may still be there: run it with "
              f"--pytest-args '--conformance-budget 0' on a quieter machine (exit {NOT_REPRODUCED})", flush=True)
        return NOT_REPRODUCED
    print(f"conformance replay: {said[record.get('saved_example')]}, and the whole search passed ({ran}): the "
          f"failure is gone", flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
