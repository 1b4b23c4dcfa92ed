"""check's command line and what it checks before anything runs: the options (:func:`build_parser`), the
targets' syntax and op names (read from the records' source, before torch is imported), the output
paths, and the previous check's files moved aside."""

from __future__ import annotations

import argparse
import ast
import functools
import os
import shlex
import sys
from pathlib import Path
from typing import Callable

from conformance.core.arguments import MAX_EXAMPLES, examples_count, seconds, whole_number
from conformance.core.target import CandidateTarget, TargetError, parse_targets
from conformance.entry_points import reproducers
from conformance.entry_points.check_verdict import USAGE
from conformance.results.store import (ResultsLocked, _complete_run_id, holding_lock, junit_beside, output_problem,
                                       previous_path, set_aside)

PROBE_TIMEOUT = 120.0  # seconds the candidate's import may take (--import-timeout)


DEFAULT_RUN_TIMEOUT = 4 * 3600.0  # seconds the whole pytest run may take (--run-timeout)


DEFAULT_MAX_CRASHES = 5  # the candidate's first items in a row that crash or hang before check stops (--max-crashes)


DEFAULT_EXAMPLES = 100  # Hypothesis examples per generated item: a gate looks harder than CI's 8


DEFAULT_WORKERS = "auto"


IMPL_HELP = ("your implementation of OP (one of: {ops}), e.g. adagrad=mypkg.optim:FusedAdagrad or "
             "adagrad=path/to/file.py:FusedAdagrad")


def build_parser(parser: argparse.ArgumentParser | None = None, *, func: Callable[[argparse.Namespace], int] | None = None,
                 description: str | None = None) -> argparse.ArgumentParser:
    """The command line of check. Building and parsing it imports neither torch nor the op records
    (a usage error is reported at once); ``--help`` loads the op names when it is printed."""
    parser = parser or argparse.ArgumentParser(prog="conformance check", description=description,
                                               formatter_class=argparse.RawDescriptionHelpFormatter)
    impl = parser.add_argument("impl", nargs="+", metavar="OP=module:attr", help=IMPL_HELP.format(ops="see --help"))
    format_help = parser.format_help

    def help_with_the_op_names() -> str:
        from conformance.ops import OPS  # lazy: the op records import torch (see build_parser)

        impl.help = IMPL_HELP.format(ops=", ".join(OPS)) + ". What each op's candidate must be: " + "; ".join(
            f"{name}: {op.candidate_contract}" for name, op in OPS.items())
        return format_help()

    setattr(parser, "format_help", help_with_the_op_names)  # (this parser's own: setattr, as mypy refuses a method)
    parser.add_argument("--specs", nargs="+", metavar="PATH", default=None,
                        help="spec files or folders to run instead of the suite's own (e.g. your own cases)")
    parser.add_argument("--device", default="cpu", help="device(s) to run on, comma-separated (default: %(default)s)")
    parser.add_argument("--results", default="reports/candidate.json",
                        help="results JSON (default: %(default)s; the previous one is moved to .previous/ beside it)")
    parser.add_argument("--report", default="reports/check.html",
                        help="HTML report of this check (default: %(default)s; the main job's reports/index.html "
                             "is left alone)")
    parser.add_argument("--label", default=None, help="the run's name in the report (default: the candidate)")
    parser.add_argument("--markdown", metavar="FILE", default=None,
                        help="append a summary to FILE (e.g. $GITHUB_STEP_SUMMARY)")
    parser.add_argument("--examples", type=examples_count, default=DEFAULT_EXAMPLES, metavar="N",
                        help="Hypothesis examples per generated item (default: %(default)s; 0 runs the spec cases "
                             f"only; at most {MAX_EXAMPLES:,}; an item also stops at its time budget, --conformance-budget)")
    parser.add_argument("--workers", type=_workers, default=DEFAULT_WORKERS, metavar="N",
                        help="pytest-xdist worker processes, a number or 'auto' (default: %(default)s, one per CPU "
                             "core); each crashed or hung worker is replaced and costs one item")
    add_import_timeout(parser)
    parser.add_argument("--run-timeout", type=_positive_seconds, default=DEFAULT_RUN_TIMEOUT, metavar="SECONDS",
                        help="how long the whole pytest run may take (default: %(default)g); then it is stopped "
                             "as by SIGTERM (its results are written, interrupted) and the verdict is COULD NOT "
                             "JUDGE, or FAIL for what failed before")
    parser.add_argument("--max-crashes", type=whole_number, default=DEFAULT_MAX_CRASHES, metavar="N",
                        help="stop early when the candidate's first N items in a row crash or hang and none "
                             "passed: it crashes or hangs on every input tried (default: %(default)s; 0: never)")
    parser.add_argument("--pytest-args", default="", metavar="ARGS",
                        help="more pytest options, one string (e.g. \"-k 'not generated'\", \"-rx\" for the "
                             "reasons of xfail items, \"-n 0\" to run in one process without crash isolation)")
    parser.set_defaults(func=func)
    setattr(parser, "error", _usage_error(parser))  # a bad option is a usage error (4), not "could not judge" (2)
    return parser


def add_import_timeout(parser: argparse.ArgumentParser) -> None:
    """``--import-timeout``, check's and replay's: the bound of the candidate's import probe
    (:mod:`conformance.entry_points.probe`)."""
    parser.add_argument("--import-timeout", type=_positive_seconds, default=PROBE_TIMEOUT, metavar="SECONDS",
                        help="how long importing the candidate (in a child process, before the run) may take "
                             "(default: %(default)g); longer is a usage error")


def _usage_error(parser: argparse.ArgumentParser):
    def error(message: str):
        parser.print_usage(sys.stderr)
        parser.exit(USAGE, f"{parser.prog}: error: {message}\n")
    return error


_positive_seconds = seconds(True)  # at most a week: --import-timeout 1e300 overflowed poll() in a traceback


def _workers(text: str) -> str:
    if text == "auto" or (text.isdigit() and int(text) >= 1):
        return text
    raise argparse.ArgumentTypeError(f"expected a number >= 1 or 'auto', got {text!r}")


class UsageError(Exception):
    pass


@functools.lru_cache(maxsize=1)  # the records' sources, parsed once a process
def declared_op_names() -> frozenset[str] | None:
    """The op names the records declare, read from their source without importing them (nor
    torch): each module of ``conformance/ops`` that declares ``OP = Op(name="<literal>", ...)`` (or
    ``OptimizerOp(...)``). None when a record does not read so (then only
    :data:`conformance.ops.OPS` knows)."""

    names: set[str] = set()
    try:
        for path in sorted((Path(__file__).resolve().parents[1] / "ops").rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            made = [node.value for node in tree.body if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "OP" for t in node.targets)]
            if not made:
                continue
            if len(made) != 1 or not isinstance(made[0], ast.Call):
                return None
            literal = [keyword.value.value for keyword in made[0].keywords if keyword.arg == "name"
                       and isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str)]
            if len(literal) != 1:
                return None
            names.add(literal[0])
    except (OSError, SyntaxError, ValueError):
        return None
    return frozenset(names) or None


def _validate(impls: list[str]) -> list[CandidateTarget]:
    """What can be checked without running the candidate's code: syntax, op names, files; the parsed
    targets. An op name no record declares is reported before torch is imported
    (:func:`declared_op_names`)."""
    try:
        targets = parse_targets(impls)
    except TargetError as exc:
        raise UsageError(str(exc)) from None
    declared = declared_op_names()
    if declared is None:
        from conformance.ops import OPS  # lazy: the op records import torch (see the module docstring)

        declared = frozenset(OPS)
    for target in targets:
        if target.op not in declared:
            raise UsageError(f"{str(target)!r}: unknown op {target.op!r}; known ops: {', '.join(sorted(declared))}")
        if target.is_file and not Path(target.module).is_file():
            raise UsageError(f"{str(target)!r}: no such file {target.module}")
    return targets


def _check_specs(paths: list[str] | None) -> None:
    """--specs: each a file or folder that is there (pytest collects nothing from one that is not, and the
    verdict was COULD NOT JUDGE after the whole run)."""
    for path in paths or []:
        if not Path(path.split("::")[0]).exists():
            raise UsageError(f"--specs {path}: no such file or folder")


def _check_outputs(report: Path, markdown: str | None) -> None:
    """--report and --markdown: files check may write (never a device, a folder, or a file that is
    not one of this suite's reports; --markdown is appended to, so any regular file)."""
    for option, path, kind in (("--report", report, "report"), ("--markdown", markdown, "append")):
        problem = path and output_problem(path, kind)
        if problem:
            raise UsageError(f"{option} {path}: {problem}")


def _split_args(text: str | None) -> list[str]:
    try:
        return shlex.split(text or "")
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"--pytest-args {text!r}: {exc}") from None


def _set_aside(results: Path, report: Path, counterexamples: Path | None = None) -> list[str]:
    """Move the previous check's results and report out of the way (to .previous/ beside them; an
    incomplete run's results are removed), and its counterexample scripts to .previous/ in their
    folder (conformance.entry_points.reproducers); what was moved, one line each, to be said. Nothing
    moves while a run holds the results file's lock (a check still running there)."""
    problem = output_problem(results, "results")
    if problem:
        raise UsageError(f"--results {results}: {problem}")
    moved = []
    try:
        results.parent.mkdir(parents=True, exist_ok=True)
        with holding_lock(results):
            kept = results.is_file() and _complete_run_id(results) is not None  # set_aside keeps a complete run's
            set_aside(results, [junit_beside(results)])
            if kept:
                moved.append(f"moved the previous results to {_shown(previous_path(results))}")
            if report.is_file():
                target = previous_path(report)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(report, target)
                moved.append(f"moved the previous report to {_shown(target)}")
            if counterexamples is not None:
                moved += reproducers.set_aside_counterexamples(counterexamples, shown=_shown)
    except ResultsLocked as exc:
        raise UsageError(f"--results {results}: {exc.message}; nothing was moved or run (wait for it to finish, "
                         "or give this check another --results path)") from None
    except OSError as exc:
        raise UsageError(f"cannot move the previous results aside ({exc.filename or results}): "
                         f"{exc.strerror or exc}") from None
    return moved


def _shown(path: Path) -> str:
    """``path`` relative to the current directory when inside it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
