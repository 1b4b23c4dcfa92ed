"""``conformance`` (also ``python -m conformance``): check, replay, report, gate, select, merge, schema.

  conformance report RESULTS... -o reports/index.html
  conformance gate --baseline A.json --candidate B.json [--base-ref origin/main | --changed-files F...]
  conformance select --base-ref origin/main        # the pytest options that run only the touched ops
  conformance merge SHARD.json... -o merged.json   # join the shards of a run (--conformance-shard K/N)
  conformance schema [spec|results]                # print a JSON Schema
  conformance check adagrad=mypkg:MyAdagrad        # gate your implementation against the specs and stock torch
  conformance replay 'specs/adagrad.yaml::tutorial-step-2[coo-cpu-float32]'  # re-run one item, from anywhere

Exit codes: report 0 (1 when no results file could be read, 2 when the report cannot be written or -o is a device, a
folder or a file that is not one of the suite's reports); gate 0 pass, 1 regression, 2 not comparable or unusable input
(an option that is NaN or out of range, a --markdown path that is a device or a folder) or an error of its own;
select 0; merge 0 (2 when the files are not the shards of one run or -o may not be replaced); check 0 pass, 1 fail, 2 could not judge, 3 all
unsupported, 4 usage error; replay: pytest's (0 passes, 1 fails, 2 interrupted, 4 no such item or a usage error), 6 a generated item not reproduced within its time budget. A usage error is reported before
torch is imported. Results files larger than 64 MiB are not read.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from conformance.core.text import safe_to_show
from conformance.results import gate as gate_module
from conformance.results.merge import DESCRIPTION as merge_description
from conformance.results.merge import MergeError, write_merged
from conformance.results.store import ResultsError, load_results, output_problem, results_schema, write_output


def _report(args: argparse.Namespace) -> int:
    from conformance.results.report import build_report  # lazy: the report's modules import torch

    try:
        build = build_report(args.results, args.output, title=args.title, speed_baseline=args.speed_baseline)
    except OSError as exc:  # -o names a folder's index.html that is a folder, a path under a file, no permission
        _say(f"conformance report: cannot write {exc.filename or args.output}: {exc.strerror or exc}", sys.stderr)
        return 2
    for problem in build.problems:
        _say(f"conformance report: left out {problem}", sys.stderr)
    if not build.runs:
        _say(f"conformance report: no readable results file; wrote an empty report to {build.path}", sys.stderr)
        return 1
    _say(f"conformance report: {build.path} ({len(build.runs)} run(s), {sum(len(r.records) for r in build.runs)} "
         "records)")
    return 0


def _scope(args: argparse.Namespace):
    """(ops or None, note) from --changed-files / --base-ref, or (None, None) when neither is given."""
    from conformance.results.selection import changed_files_from_git, read_changed_files  # lazy: yaml, see _gate

    files: list[str] | None = None
    if args.changed_files:
        files = read_changed_files(args.changed_files)
    if args.base_ref:
        files = (files or []) + changed_files_from_git(args.base_ref, args.repo)
    if files is None:
        return None, None
    return gate_module.scope_from_files(files, args.paths_map, args.repo)


def _say(text: str, file=None) -> None:
    """Print ``text``, which may hold a results file's or a candidate's text, safe to show (escaped)."""
    print(safe_to_show(text), file=file or sys.stdout)


def _gate(args: argparse.Namespace) -> int:
    """Exit 0/1 as the gate judges; 2, one line and no traceback, for anything it cannot compare,
    or for anything else that goes wrong (never 1, which is a regression)."""
    try:
        return _gate_or_raise(args)
    except Exception as exc:  # noqa: BLE001
        _say(f"conformance gate: NOT COMPARABLE: {type(exc).__name__}: {exc}"[:500], sys.stderr)
        return 2


def _gate_or_raise(args: argparse.Namespace) -> int:
    from conformance.results.selection import SelectionError  # lazy: it imports yaml (~35 ms), for gate and select only

    problem = args.markdown and output_problem(args.markdown, "append")
    if problem:  # before anything is compared, so that no verdict goes unrecorded
        _say(f"conformance gate: cannot write --markdown {args.markdown}: {problem}", sys.stderr)
        return 2
    try:
        base = load_results(args.baseline)
        head = load_results(args.candidate)
        ops, note = _scope(args)
    except (ResultsError, SelectionError) as exc:
        return _cannot_compare(args, str(exc))
    if ops is not None and not ops:
        text = f"conformance gate\n  scope:     {note}\nRESULT: PASS (no changed file selects an op: nothing to gate)"
        _say(text)
        return _write_markdown(args.markdown, text, 0)
    try:
        result = gate_module.run_gate(base, head, ops=ops, scope_note=note, ratio=args.ratio, alpha=args.alpha,
                                      min_duration=args.min_duration,
                                      allow_different_machine=args.allow_different_machine,
                                      skip_timing=args.skip_timing,
                                      allow_incomplete_baseline=args.allow_incomplete_baseline)
    except Exception as exc:  # noqa: BLE001 - a schema-valid file the gate cannot read is still exit 2
        return _cannot_compare(args, f"{args.baseline} and {args.candidate}: {type(exc).__name__} while comparing "
                                     f"them: {exc}"[:500])
    _say(result.text)
    return _write_markdown(args.markdown, result.text, result.exit_code)


def _cannot_compare(args: argparse.Namespace, why: str) -> int:
    text = f"conformance gate: NOT COMPARABLE: cannot compare: {why}"
    _say(text, sys.stderr)
    return _write_markdown(args.markdown, text, 2)


def _write_markdown(path: str | None, text: str, code: int) -> int:
    """Append the summary to ``path`` (a regular file only, through a temporary file and a rename);
    ``code``, or 2 when a passing gate's summary could not be written."""
    if not path:
        return code
    try:
        write_output(path, gate_module.markdown(text), "append")
    except OSError as exc:
        _say(f"conformance gate: cannot write --markdown {exc.filename or path}: {exc.strerror or exc}", sys.stderr)
        return code or 2
    return code


def _select(args: argparse.Namespace) -> int:
    # lazy: yaml (see _gate)
    from conformance.results.selection import (SelectionError, changed_files_from_git, load_rules, pytest_args,
                                       read_changed_files, select_ops)

    try:
        files = read_changed_files(args.changed_files or [])
        if args.base_ref:
            files += changed_files_from_git(args.base_ref, args.repo)
        selection = select_ops(files, load_rules(args.paths_map), args.repo)
    except SelectionError as exc:
        print(f"conformance select: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps({"ops": sorted(selection.ops), "everything": selection.everything,
                          "pytest_args": pytest_args(selection), "files": selection.reasons}, indent=1))
    elif args.format == "ops":
        print(",".join(sorted(selection.ops)))
    else:
        if not selection.ops:
            print("")  # nothing to run
        else:
            print(" ".join(pytest_args(selection)))
    for path, ops in selection.reasons.items():
        print(f"  {path}: {', '.join(ops) or '(no op)'}", file=sys.stderr)
    return 0


def _merge(args: argparse.Namespace) -> int:
    try:
        merged = write_merged(args.results, args.output)
    except MergeError as exc:
        _say(f"conformance merge: {exc}", sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - valid files merge cannot join: one line and 2, never a traceback
        _say(f"conformance merge: cannot merge {', '.join(args.results)}: {type(exc).__name__}: {exc}"[:500],
             sys.stderr)
        return 2
    for warning in merged.warnings:
        _say(f"conformance merge: warning: {warning}", sys.stderr)
    run = merged.document["run"]
    _say(f"conformance merge: {args.output} ({len(merged.shards)} shards, {len(merged.records)} records; "
         f"status {run['status']}, exit status {run['exit_status']})")
    return 0


def _schema(args: argparse.Namespace) -> int:
    if args.which == "results":
        print(json.dumps(results_schema(), indent=2))
    else:
        from conformance.specs.load import spec_schema  # lazy: the spec loader imports torch and the op records

        print(json.dumps(spec_schema(), indent=2))
    return 0


def _add_scope_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--changed-files", nargs="+", metavar="PATH",
                        help="files a pull request changes (paths, comma-separated lists, or @FILE with one a line)")
    parser.add_argument("--base-ref", metavar="REF",
                        help="take the changed files from `git diff --name-only REF...HEAD` (e.g. origin/main)")
    parser.add_argument("--paths-map", metavar="YAML",
                        help="file -> ops rules (default: the suite's conformance/results/paths.yaml)")
    parser.add_argument("--repo", default=".", help="the repository the paths are relative to (default: .)")


def _finite(low: float, high: float | None):
    """An argparse type: a finite number in [low, high] (NaN compares false with every bound: a
    ``--ratio nan`` would pass every timing)."""
    def number(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value < low or (high is not None and value > high):
            where = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
            raise argparse.ArgumentTypeError(f"expected a finite number {where}, got {text!r}")
        return value
    number.__name__ = "number"
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="conformance", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_report(sub)
    _add_gate(sub)

    select = sub.add_parser("select", help="the pytest options that run only the ops changed files touch")
    _add_scope_options(select)
    select.add_argument("--format", choices=["pytest", "ops", "json"], default="pytest")
    select.set_defaults(func=_select)

    # imported here: check and replay stand on the level cli does, and a module-level import would lift cli
    # and __main__ above the levels tests/test_layout.py allows
    from conformance.entry_points import check, replay

    check.build_parser(sub.add_parser("check", help="gate your implementation (OP=module:attr) against the specs "
                                                    "and stock torch; writes results and its HTML report",
                                      description=check.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter))
    replay.build_parser(sub.add_parser("replay", help="re-run one item (its id as printed), from any directory",
                                       description=replay.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter))

    merge = sub.add_parser("merge", help="join the results files of a run split with --conformance-shard K/N",
                           description=merge_description, formatter_class=argparse.RawDescriptionHelpFormatter)
    merge.add_argument("results", nargs="+", metavar="SHARD.json", help="the results files of shards 1/N ... N/N")
    merge.add_argument("-o", "--output", required=True, metavar="MERGED.json", help="the merged results file to write")
    merge.set_defaults(func=_merge)

    schema = sub.add_parser("schema", help="print the spec or results JSON Schema")
    schema.add_argument("which", nargs="?", choices=["spec", "results"], default="spec")
    schema.set_defaults(func=_schema)
    for name, command_parser in sub.choices.items():
        command_parser.set_defaults(command_parser=command_parser)
    return parser


def _add_report(sub: argparse._SubParsersAction) -> None:
    """The ``report`` command's parser."""
    report = sub.add_parser("report", help="merge results files into one self-contained HTML report")
    report.add_argument("results", nargs="+",
                        help="results JSON files (several torch versions, devices, machines), e.g. reports/*.json; "
                             "the last complete run a path held is kept in reports/.previous/, which that glob "
                             "leaves out. Unreadable files (corrupt, not UTF-8, another schema) are named and left out")
    report.add_argument("-o", "--output", default="reports/index.html", help="HTML file to write, or a folder (one that exists, or a path ending in /) to write "
                             "index.html in (default: %(default)s)")
    report.add_argument("--title", default=None)
    report.add_argument("--speed-baseline", default="reference",
                        help="backend the speed charts are relative to (default: %(default)s)")
    report.set_defaults(func=_report)


def _add_gate(sub: argparse._SubParsersAction) -> None:
    """The ``gate`` command's parser."""
    gate = sub.add_parser("gate", help="fail when a candidate run regressed against a baseline run",
                          description=gate_module.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    gate.add_argument("--baseline", required=True, metavar="A.json",
                      help="the run to compare with, e.g. reports/.previous/results.json: the last complete run "
                           "that wrote reports/results.json (kept there only when it was complete)")
    gate.add_argument("--candidate", required=True, metavar="B.json")
    _add_scope_options(gate)
    gate.add_argument("--ratio", type=_finite(0.0, None), default=gate_module.DEFAULT_RATIO,
                      help="slower means the median grew by more than this fraction (default: %(default)s)")
    gate.add_argument("--alpha", type=_finite(0.0, 1.0), default=gate_module.DEFAULT_ALPHA,
                      help="significance level of the one-sided Mann-Whitney U test (default: %(default)s)")
    gate.add_argument("--min-duration", type=_finite(0.0, None), default=gate_module.DEFAULT_MIN_DURATION,
                      metavar="SECONDS",
                      help="ignore benchmarks whose baseline median is shorter (default: %(default)s)")
    gate.add_argument("--allow-different-machine", action="store_true",
                      help="compare timings even when the runs' machines differ")
    gate.add_argument("--skip-timing", action="store_true", help="gate correctness only")
    gate.add_argument("--allow-incomplete-baseline", action="store_true",
                      help="compare against a baseline whose run is not complete (interrupted, still running) or "
                           "empty, gating only the items it has; the summary says so (default: exit 2)")
    gate.add_argument("--markdown", metavar="FILE", help="also append the summary as Markdown (e.g. $GITHUB_STEP_SUMMARY)")
    gate.set_defaults(func=_gate)


def _attach_pytest_args(argv: list[str]) -> list[str]:
    """``--pytest-args "--durations=10"`` as ``--pytest-args=--durations=10``: argparse reads a value
    that starts with "-" as an option of its own and would stop with "expected one argument"."""
    joined: list[str] = []
    rest = iter(argv)
    for arg in rest:
        if arg == "--pytest-args":
            value = next(rest, None)
            joined.append(arg if value is None else f"{arg}={value}")
        else:
            joined.append(arg)
    return joined


def main(argv: list[str] | None = None) -> int:
    """Parse, then run the command. Nothing heavy is imported before the arguments are parsed: a
    usage error comes at once, torch unloaded. An option the command does not know is that
    command's usage error (check's is 4), not the top-level parser's 2."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(_attach_pytest_args(sys.argv[1:] if argv is None else list(argv)))
    if unknown:
        getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
