"""conformance replay ITEM: re-run exactly one item of a run, from any directory.

Every failure the suite prints (the console, the report's "Re-run it", a counterexample's script
and spec) names its item in one form that works wherever you stand, with the suite installed from
a wheel or in a clone, on every pytest version the suite allows:

  python -m conformance replay 'specs/adagrad.yaml::duplicates-cancel[candidate-cpu-float32]' --impl adagrad=my_adagrad.py:MyAdagrad
  python -m conformance replay 'specs::generated::adagrad-agrees-with-reference[candidate-cpu-float16]' --impl adagrad=my_adagrad.py:MyAdagrad --seed 0

An item id is PATH::NAME[BACKEND-DEVICE-DTYPE]. specs/... names the suite's own spec files (inside
the installed package, or a clone's specs/) and specs::generated its generated properties; any
other path is a spec file of your own, relative to the current directory. The item runs in a fresh
python -m pytest from the current directory (so --impl targets import as they did in the run),
narrowed to the item's backend, device, dtype and op, and selected by exact identity
(--conformance-item: pytest 9 refuses path::name selection parts on a directory, and -k matches
substrings). Exit status: pytest's, 0 when the item passes (or shows its known divergence), 1 when
it fails; 4 when there is no such item (a one-line error says why).

This module is also the pytest plugin behind --conformance-item and each results record's rerun
field (the command above, for each item of a run).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pytest

SUITE_SPECS = "specs"  # an item id whose path starts with specs/ names the suite's own specs
GENERATED = "generated"  # the collector of the generated properties under the specs root


class ReplayError(Exception):
    """An item id or option that names no item: one line, for the user."""


@dataclass(frozen=True)
class ItemId:
    """One item, as :func:`parse_item` read it."""

    text: str
    path: Path  # the spec file; for a generated item, the specs root directory
    generated: bool
    name: str  # ``case[backend-device-dtype]``: pytest's item name
    case: str
    backend: str | None
    device: str | None
    dtype: str | None


def suite_specs() -> Path:
    from conformance.check import specs_dir

    return specs_dir()


def parse_item(text: str, *, cwd: Path | None = None) -> ItemId:
    """Read an item id (see the module docstring); a ReplayError names what is wrong."""
    cwd = cwd or Path.cwd()
    text = text.strip()
    where, sep, name = text.rpartition("::")
    if not sep or not where or not name:
        raise ReplayError(f"{text!r} is not an item id: expected PATH::NAME[BACKEND-DEVICE-DTYPE], e.g. "
                          f"'specs/adagrad.yaml::tutorial-step-2[coo-cpu-float32]' or "
                          f"'specs::generated::adagrad-agrees-with-reference[coo-cpu-float32]'")
    case, backend, device, dtype = name, None, None, None
    if name.endswith("]") and "[" in name:
        case, _, params = name[:-1].partition("[")
        backend, _, rest = params.rpartition("-")
        backend, _, device = backend.rpartition("-")
        dtype = rest
        if not backend or not device or not dtype:
            raise ReplayError(f"{text!r}: the part in brackets should read BACKEND-DEVICE-DTYPE, e.g. coo-cpu-float32")
    generated = where.endswith("::" + GENERATED)
    if generated:
        root = where[: -len("::" + GENERATED)]
        path = suite_specs() if root == SUITE_SPECS else _local(root, cwd)
        if not path.is_dir():
            raise ReplayError(f"{text!r}: no specs directory {path}")
    elif "::" in where:
        raise ReplayError(f"{text!r} is not an item id: only the generated items have a second '::' "
                          f"(specs::generated::NAME)")
    else:
        path = _spec_file(where, cwd)
        if not path.is_file():
            looked = f"{path}" if not where.startswith(SUITE_SPECS + "/") else \
                f"the suite's specs ({suite_specs()})"
            raise ReplayError(f"{text!r}: no spec file {where} in {looked}")
    return ItemId(text, path, generated, name, case, backend, device, dtype)


def _local(where: str, cwd: Path) -> Path:
    path = Path(where)
    return path if path.is_absolute() else cwd / path


def _spec_file(where: str, cwd: Path) -> Path:
    """``specs/<file>`` in the suite's specs; anything else relative to ``cwd`` (or absolute)."""
    if where.startswith(SUITE_SPECS + "/"):
        return suite_specs() / where[len(SUITE_SPECS) + 1:]
    return _local(where, cwd)


def portable_id(path: Path, name: str, *, generated: bool, cwd: Path | None = None) -> str:
    """The id of the item ``name`` of spec file ``path`` (of the specs root ``path`` when
    ``generated``) that :func:`parse_item` reads back from any directory."""
    if generated:
        return f"{SUITE_SPECS}::{GENERATED}::{name}"
    path = Path(path).resolve()
    try:
        return f"{SUITE_SPECS}/{path.relative_to(suite_specs()).as_posix()}::{name}"
    except ValueError:
        pass
    cwd = (cwd or Path.cwd()).resolve()
    try:
        where = path.relative_to(cwd).as_posix()
    except ValueError:
        return f"{path.as_posix()}::{name}"
    # a file of your own under ./specs/ must not read as the suite's specs/...
    return f"./{where}::{name}" if where.startswith(SUITE_SPECS + "/") else f"{where}::{name}"


def command(item_id: str, *, impl: str | None = None, seed: int | None = None, profile: str | None = None,
            examples: int | None = None, shrink: bool = True, benchmark: bool = False) -> str:
    """The one re-run command line of an item."""
    args = ["python", "-m", "conformance", "replay", item_id]
    if impl:
        args += ["--impl", impl]
    if seed is not None:
        args += ["--seed", str(seed)]
    if profile:
        args += ["--profile", profile]
    if examples is not None:
        args += ["--examples", str(examples)]
    if not shrink:
        args.append("--no-shrink")
    if benchmark:
        args.append("--benchmark")
    return shlex.join(args)


def command_for(item: pytest.Item) -> str | None:
    """The re-run command of a collected item, with the options of its run that change what it
    does: the candidate of its op, and for a generated item the seed, profile and examples."""
    record = getattr(item, "record", None)
    if not isinstance(record, dict):
        return None
    config = item.config
    generated = bool(record.get("generated"))
    item_id = portable_id(Path(item.path), item.name, generated=generated, cwd=config.invocation_params.dir)
    impl = None
    if record.get("backend") == "candidate" and record.get("op"):
        for value in config.getoption("conformance_impl", None) or []:
            op, _, target = value.partition("=")
            if op.strip() == record["op"]:
                impl = f"{op.strip()}={target.strip()}"
    if not generated:
        return command(item_id, impl=impl, benchmark=record.get("kind") == "benchmark")
    from conformance.run.generated_plugin import DEFAULT_PROFILE, GENERATED as GENERATED_CONFIG, PROFILES

    gen = config.stash.get(GENERATED_CONFIG, None)
    if gen is None:
        return command(item_id, impl=impl)
    return command(item_id, impl=impl, seed=gen.seed,
                   profile=gen.profile if gen.profile != DEFAULT_PROFILE else None,
                   examples=gen.examples if gen.examples != PROFILES[gen.profile]["examples"] else None,
                   shrink=gen.shrink)


def command_from_record(record: dict, run: dict | None = None) -> str:
    """A results record's re-run command: its ``rerun`` field, or for a record written before
    records carried one, the same form rebuilt from the record and its run's options."""
    if record.get("rerun"):
        return record["rerun"]
    options = (run or {}).get("options") or {}
    params = f"[{record['backend']}-{record['device']}-{record['dtype']}]" if record.get("backend") else ""
    if record.get("generated"):
        item_id = f"{SUITE_SPECS}::{GENERATED}::{record.get('case')}{params}"
    else:
        item_id = record.get("nodeid") or f"{record.get('spec')}::{record.get('case')}{params}"
    impl = None
    if record.get("backend") == "candidate":
        impl = next((value for value in options.get("conformance_impl") or []
                     if value.partition("=")[0].strip() == record.get("op")), None)
    if not record.get("generated"):
        return command(item_id, impl=impl, benchmark=record.get("kind") == "benchmark")
    from conformance.run.generated_plugin import DEFAULT_PROFILE

    profile = record.get("profile") or options.get("conformance_hypothesis_profile")
    return command(item_id, impl=impl, seed=record.get("seed", options.get("conformance_seed")),
                   profile=profile if profile and profile != DEFAULT_PROFILE else None,
                   examples=options.get("conformance_examples"),
                   shrink=not options.get("conformance_no_shrink"))


# ---------------------------------------------------------------- the pytest plugin: --conformance-item


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("conformance").addoption(
        "--conformance-item", action="append", metavar="ITEM",
        help="run exactly this item (an id as the suite prints it, e.g. "
             "specs::generated::adagrad-agrees-with-reference[coo-cpu-float32]); repeatable. "
             "python -m conformance replay ITEM is the command that uses it.")


def _matches(item: pytest.Item, wanted: ItemId) -> bool:
    if item.name != wanted.name:
        return False
    if wanted.generated:
        return getattr(item.parent, "name", None) == GENERATED and bool(getattr(item, "record", {}).get("generated"))
    return not getattr(item, "record", {}).get("generated") and Path(item.path).resolve() == wanted.path.resolve()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    texts = config.getoption("conformance_item", None)
    if not texts:
        return
    cwd = config.invocation_params.dir
    try:
        wanted = [parse_item(text, cwd=cwd) for text in texts]
    except ReplayError as exc:
        raise pytest.UsageError(f"--conformance-item {exc}") from None
    kept = [item for item in items if any(_matches(item, w) for w in wanted)]
    missing = [w.text for w in wanted if not any(_matches(item, w) for item in kept)]
    if missing:
        raise pytest.UsageError(f"--conformance-item: no item {', '.join(missing)} in this run "
                                f"(collected {len(items)} item(s) under the given paths and options)")
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


@pytest.hookimpl(trylast=True)
def pytest_itemcollected(item: pytest.Item) -> None:
    """Each record carries its re-run command (the results file's ``rerun``; the report shows it)."""
    record = getattr(item, "record", None)
    if isinstance(record, dict) and "rerun" not in record:
        try:
            rerun = command_for(item)
        except Exception:  # noqa: BLE001 - a convenience: never fail collection over it
            rerun = None
        if rerun:
            record["rerun"] = rerun


# ---------------------------------------------------------------- the command


def replay_args(item: ItemId, *, impls: Iterable[str] = (), seed: int | None = None, profile: str | None = None,
                   examples: int | None = None, shrink: bool = True, benchmark: bool = False,
                   extra: Iterable[str] = ()) -> list[str]:
    """The ``python -m pytest`` command line that replays ``item``."""
    specs = suite_specs()
    ours = item.generated or specs in item.path.resolve().parents
    # node ids read specs/... under the suite's specs; a file of your own reads as from here
    rootdir = specs.parent if ours else Path.cwd()
    command = [sys.executable, "-m", "pytest", str(item.path), "--rootdir", str(rootdir),
               "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-rfEx", "--conformance-item", item.text]
    if item.generated:
        # the spec files under the specs root are not this item: leave them unread
        command += ["--ignore-glob", str(item.path / "*.yaml"), "--ignore-glob", str(item.path / "*.yml")]
        from conformance.cases.generated import PROPERTIES

        op = next((prop.op for prop in PROPERTIES if prop.id == item.case), None)
        if op is None:
            raise ReplayError(f"{item.text!r}: no generated property {item.case!r}; known: "
                              f"{', '.join(sorted(prop.id for prop in PROPERTIES))}")
        command += ["--conformance-op", op]
        if item.device == "xla":
            command.append("--conformance-generated-on-xla")
    if item.backend:
        command += ["--conformance-backend", item.backend, "--conformance-device", item.device,
                    "--conformance-dtype", item.dtype]
    for impl in impls:
        command += ["--conformance-impl", impl]
    if seed is not None:
        command += ["--conformance-seed", str(seed)]
    if profile:
        command += ["--conformance-hypothesis-profile", profile]
    if examples is not None:
        command += ["--conformance-examples", str(examples)]
    if not shrink:
        command.append("--conformance-no-shrink")
    if benchmark:
        command.append("--conformance-benchmark")
    else:  # pytest-benchmark would make its storage folder (.benchmarks/) where the user stands
        command += ["-p", "no:benchmark"]
    return command + list(extra)


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
    parser.add_argument("--pytest-args", default="", metavar="ARGS",
                        help="more pytest options, one string (e.g. \"--conformance-results reports/replay.json\")")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    try:
        item = parse_item(args.item)
        if item.backend == "candidate" and not args.impl:
            raise ReplayError(f"{args.item!r} runs a candidate: give it with --impl OP=module:attr, as in the run")
        command = replay_args(item, impls=args.impl, seed=args.seed, profile=args.profile,
                                 examples=args.examples, shrink=not args.no_shrink, benchmark=args.benchmark,
                                 extra=shlex.split(args.pytest_args or ""))
    except ReplayError as exc:
        print(f"conformance replay: {exc}", file=sys.stderr)
        return 4  # pytest's usage error: no such item
    print("conformance replay:", shlex.join(command[1:]), flush=True)
    return subprocess.call(command)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
