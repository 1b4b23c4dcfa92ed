"""Item ids and re-run commands: how an item is named so that ``python -m conformance replay ID``
finds it from any directory (:func:`parse_item`, :func:`portable_id`), and the one re-run command
line of an item or of a results record (:func:`command`, :func:`command_from_record`). Used by the
plugin (each record's ``rerun``), the report and ``conformance replay``."""

from __future__ import annotations

import functools
import shlex
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from conformance.core.arguments import DEFAULT_TIMEOUT
from conformance.core.profiles import DEFAULT_PROFILE
from conformance.core.target import CandidateTarget
from conformance.core.record import CANDIDATE, ItemRecord

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


@functools.cache  # fixed for the process; every collected item's re-run command asks
def suite_specs() -> Path:
    """The suite's spec files: ``conformance/specs_data/specs`` in an installed package (in a
    checkout it links to the repository's ``specs/``)."""
    return Path(str(resources.files("conformance").joinpath("specs_data", "specs"))).resolve()


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


@functools.lru_cache(maxsize=256)
def _resolved(path: Path) -> Path:
    """``path.resolve()``, once per spec file (each of its items asks)."""
    return path.resolve()


def portable_id(path: Path, name: str, *, generated: bool, cwd: Path | None = None) -> str:
    """The id of the item ``name`` of spec file ``path`` (of the specs root ``path`` when
    ``generated``) that :func:`parse_item` reads back from any directory."""
    if generated:
        return f"{SUITE_SPECS}::{GENERATED}::{name}"
    path = _resolved(Path(path))
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


@dataclass(frozen=True)
class ReplayOptions:
    """What a replay keeps of its run beside the item: declared once, spelled two ways -- the
    ``conformance replay`` command's flags (:meth:`replay_flags`) and the pytest options they
    stand for (:meth:`pytest_flags`)."""

    impls: tuple[str, ...] = ()
    seed: int | str | None = None  # (a results record's seed may be a string: results.schema.json)
    profile: str | None = None
    examples: int | None = None
    shrink: bool = True
    benchmark: bool = False
    counterexamples: str | None = None
    timeout: float | None = None  # the run's --conformance-timeout, where not the default

    # field, replay's flag, pytest's option (valued fields first, then the switches)
    VALUED = (("impls", "--impl", "--conformance-impl"), ("seed", "--seed", "--conformance-seed"),
              ("profile", "--profile", "--conformance-hypothesis-profile"),
              ("examples", "--examples", "--conformance-examples"),
              ("counterexamples", "--counterexamples", "--conformance-counterexamples"),
              ("timeout", "--timeout", "--conformance-timeout"))
    NO_SHRINK = ("--no-shrink", "--conformance-no-shrink")
    BENCHMARK = ("--benchmark", "--conformance-benchmark")

    def _flags(self, spelling: int) -> list[str]:
        flags: list[str] = []
        for field, *names in self.VALUED:
            value = getattr(self, field)
            for one in value if isinstance(value, tuple) else (() if value is None else (value,)):
                flags += [names[spelling], f"{one:g}" if isinstance(one, float) else str(one)]
        if not self.shrink:
            flags.append(self.NO_SHRINK[spelling])
        if self.benchmark:
            flags.append(self.BENCHMARK[spelling])
        return flags

    def replay_flags(self) -> list[str]:
        return self._flags(0)

    def pytest_flags(self) -> list[str]:
        return self._flags(1)


def command(item_id: str, *, impl: str | None = None, seed: int | str | None = None, profile: str | None = None,
            examples: int | None = None, shrink: bool = True, benchmark: bool = False,
            counterexamples: str | None = None, timeout: float | None = None) -> str:
    """The one re-run command line of an item (``counterexamples``: where the run kept a generated
    item's failing example, when not ``./reports/counterexamples``; ``timeout``: the run's per-item
    timeout, when not the default: an item that timed out under it replays under it)."""
    options = ReplayOptions(impls=(impl,) if impl else (), seed=seed, profile=profile, examples=examples,
                            shrink=shrink, benchmark=benchmark, counterexamples=counterexamples, timeout=timeout)
    return shlex.join(["python", "-m", "conformance", "replay", item_id, *options.replay_flags()])


def command_from_record(record: ItemRecord, run: dict | None = None) -> str:
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
    if record.get("backend") == CANDIDATE:
        targets = [CandidateTarget.parse_or_none(value) for value in options.get("conformance_impl") or []]
        impl = next((str(target) for target in targets if target and target.op == record.get("op")), None)
    timeout = options.get("conformance_timeout")
    timeout = float(timeout) if isinstance(timeout, (int, float)) and timeout != DEFAULT_TIMEOUT \
        and not options.get("timeout") else None
    if not record.get("generated"):
        return command(item_id, impl=impl, benchmark=record.get("kind") == "benchmark", timeout=timeout)
    profile = record.get("profile") or options.get("conformance_hypothesis_profile")
    return command(item_id, impl=impl, timeout=timeout, seed=record.get("seed", options.get("conformance_seed")),
                   profile=profile if profile and profile != DEFAULT_PROFILE else None,
                   examples=options.get("conformance_examples"),
                   shrink=not options.get("conformance_no_shrink"),
                   counterexamples=options.get("conformance_counterexamples") or None)
