"""``conformance check OP=module:attr ...``: gate your own implementation against the specs and
stock torch, from your own repository, after ``pip install`` of this suite.

It runs the suite's specs (packaged with it: :func:`specs_dir`) in a fresh ``python -m pytest``
from the current directory (so ``mypkg:MyAdagrad`` or ``path/to/file.py:MyAdagrad`` imports as it
would in your tests), with two implementations side by side: your candidate and stock torch's
own backend for the op (``coo``; ``masked`` for masked_mean). It writes the results file and the
HTML report, and exits with pytest's status: 0 when the candidate conforms, 1 when an item failed
or errored. That exit status is the pass/fail of a pull request that changes your implementation.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib import resources
from pathlib import Path

def specs_dir() -> Path:
    """The suite's spec files: ``conformance/specs_data/specs`` in an installed package (in a
    checkout it links to the repository's ``specs/``)."""
    return Path(str(resources.files("conformance").joinpath("specs_data", "specs"))).resolve()


def pytest_command(impls: list[str], *, results: Path, devices: str = "cpu", extra: list[str] = ()) -> list[str]:
    """The ``python -m pytest`` command line that :func:`main` runs."""
    ops = []
    for impl in impls:
        op = impl.partition("=")[0].strip()
        if op and op not in ops:
            ops.append(op)
    from conformance.ops import OPS  # stock torch's backend beside the candidate: Op.stock_backend

    backends = ["candidate"] + sorted({OPS[op].stock_backend for op in ops if op in OPS and OPS[op].stock_backend})
    specs = specs_dir()
    command = [sys.executable, "-m", "pytest", str(specs), "--rootdir", str(specs.parent),
               "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-rfEx",
               "--conformance-device", devices, "--conformance-backend", ",".join(backends),
               "--conformance-results", str(results)]
    if ops:
        command += ["--conformance-op", ",".join(ops)]
    for impl in impls:
        command += ["--conformance-impl", impl]
    return command + list(extra)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="conformance check", description=__doc__.split("\n\n")[0])
    parser.add_argument("impl", nargs="+", metavar="OP=module:attr",
                        help="your implementation of OP (adagrad, sparse_adam, coalesce, masked_mean), e.g. "
                             "adagrad=mypkg.optim:FusedAdagrad or adagrad=path/to/file.py:FusedAdagrad")
    parser.add_argument("--device", default="cpu", help="device(s) to run on, comma-separated (default: %(default)s)")
    parser.add_argument("--results", default="reports/candidate.json", help="results JSON (default: %(default)s)")
    parser.add_argument("--report", default="reports/index.html", help="HTML report (default: %(default)s)")
    parser.add_argument("--label", default=None, help="the run's name in the report (default: the candidate)")
    parser.add_argument("--markdown", metavar="FILE", default=None,
                        help="append a summary to FILE (e.g. $GITHUB_STEP_SUMMARY)")
    parser.add_argument("--pytest-args", default="", metavar="ARGS",
                        help="more pytest options, one string (e.g. \"-k 'not generated'\")")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    import shlex

    from conformance.results.report import build_report
    from conformance.results.store import ResultsError, load_results

    results = Path(args.results).resolve()
    results.parent.mkdir(parents=True, exist_ok=True)
    extra = ["--conformance-label", args.label or "candidate " + " ".join(args.impl)]
    extra += shlex.split(args.pytest_args or "")
    command = pytest_command(args.impl, results=results, devices=args.device, extra=extra)
    print("conformance check:", shlex.join(command[1:]), flush=True)
    status = subprocess.call(command)
    try:
        records = load_results(results).records
    except ResultsError as exc:
        print(f"conformance check: no usable results ({exc}); pytest exited {status}", file=sys.stderr)
        return status or 2
    report = build_report([results], args.report).path
    counts: dict[str, int] = {}
    for record in records:
        if record.get("backend") == "candidate":
            counts[record["outcome"]] = counts.get(record["outcome"], 0) + 1
    verdict = "PASS" if status == 0 else "FAIL"
    summary = (f"RESULT: {verdict} ({', '.join(f'{n} {o}' for o, n in sorted(counts.items())) or 'no candidate item'}; "
               f"pytest exit status {status})\nresults: {results}\nreport:  {Path(report).resolve()}")
    print(f"conformance check: {' '.join(args.impl)}\n{summary}")
    if args.markdown:
        with open(args.markdown, "a", encoding="utf-8") as handle:
            handle.write(f"### Conformance check: `{' '.join(args.impl)}`\n\n```\n{summary}\n```\n")
    return status


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
