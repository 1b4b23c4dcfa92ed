"""YAML spec files -> validated Spec and Case objects; every error names ``file:line``.

Loading cannot take a session down (docs/robustness.md): a file that is not UTF-8, YAML whose
aliases expand beyond :data:`MAX_YAML_NODES` nodes (or refer to themselves), nesting too deep for
the parser, tensors beyond the :data:`ELEMENT_BUDGET` (checked from the spec's numbers before
anything is allocated), an unknown device or backend, and a non-finite golden value on a case
without ``nonfinite: true`` are all a :class:`SpecError` naming file, line and field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

import yaml

from conformance.core.compare import Tolerance
from conformance.core.divergences import Divergence, lookup
from conformance.core.layouts import Layout
from conformance.ops import OPS
from conformance.specs.benchmark import expand
# the checks before decoding and the YAML machinery, and the names importers take from here
from conformance.specs.validation import (ELEMENT_BUDGET, SPARSE_SIZE_BUDGET, check_budget,  # noqa: F401
                                          check_finite_golden, check_names, nonfinite_values, schema_problem,
                                          spec_schema)
from conformance.specs.yaml_lines import (COMPOSER, MAX_YAML_NODES, YamlTooBig, check_expansion,  # noqa: F401
                                          compose, duplicate_key, format_path, line_map, line_of)

if TYPE_CHECKING:  # annotations only: records are found in the OPS registry
    from conformance.ops.base import Op


class SpecError(Exception):
    """A spec file that cannot be loaded, with the file and line it concerns."""

    def __init__(self, path: Path | str, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


CONTRACT_ERROR = "contract"
TORCH_LIMITATION = "torch-limitation"


@dataclass(frozen=True)
class ExpectedError:
    """An error a case expects: ``kind`` says whether it is the documented contract (every
    implementation must raise it) or a limitation of torch (raising it is same-as-torch; computing
    the documented algorithm's value is an improvement: conformance.judging.runner)."""

    type: str
    match: str | None = None
    kind: str = CONTRACT_ERROR

    def describe(self) -> str:
        return self.type + (f" matching {self.match!r}" if self.match else "")


@dataclass(frozen=True)
class Case:
    """One documented example: inputs, golden outputs (or an expected error) and their source."""

    spec_path: Path
    op: Op
    id: str
    line: int | None  # (line_of: None only for a path outside the file's line map)
    inputs: dict
    expected: dict | None
    expected_error: ExpectedError | None
    dtypes: tuple[str, ...]
    source: dict | None = None
    description: str = ""
    derivation: str = ""
    tolerance: Tolerance | None = None
    devices: tuple[str, ...] | None = None
    backends: tuple[str, ...] | None = None
    known_divergences: tuple[Divergence, ...] = ()
    # how the inputs are handed over, by role (conformance.core.layouts; absent: contiguous)
    layouts: Mapping[str, Layout] = field(default_factory=dict)

    def divergence_for(self, backend: str, device: str, dtype: str) -> Divergence | None:
        """The recorded divergence of ``backend``'s own idiom here, if any (stock torch's are judged
        on what a backend returns, not on its name: :meth:`torch_divergence_for`)."""
        found = lookup(self.known_divergences, backend=backend, device=device, dtype=dtype)
        return next((divergence for divergence in found if not divergence.is_torch_behaviour), None)

    def torch_divergence_for(self, device: str, dtype: str) -> Divergence | None:
        """The recorded divergence of stock torch itself on this device and dtype, if any."""
        found = lookup(self.known_divergences, device=device, dtype=dtype)
        return next((divergence for divergence in found if divergence.is_torch_behaviour), None)


@dataclass
class Spec:
    path: Path
    op: Op
    title: str
    cases: list[Case] = field(default_factory=list)
    benchmarks: list = field(default_factory=list)  # conformance.specs.benchmark.Benchmark instances


# ---------------------------------------------------------------- loading

def load_spec(path: Path | str) -> Spec:
    """Read, validate and decode one spec file. Raises SpecError naming file and line."""
    path = Path(path)
    try:
        return _load_spec(path)
    except SpecError:
        raise
    except RecursionError:
        raise SpecError(path, None, "nested too deeply to load (the YAML parser ran out of recursion depth)") from None
    except MemoryError:
        raise SpecError(path, None, "ran out of memory while loading; see the element budget in "
                                    "docs/robustness.md") from None


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecError(path, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise SpecError(path, line, f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
                                    f"cannot be decoded ({exc.reason}); spec files must be UTF-8") from None


def _load_spec(path: Path) -> Spec:
    node = _composed(path, _read_text(path))
    lines = line_map(node)
    data = _constructed(path, node)
    fail = _failing(path, lines)
    error = schema_problem(data, fail)
    if error:
        raise error
    check_budget(data, fail)
    check_names(data, fail)
    check_finite_golden(data, fail)
    op = OPS[data["op"]]
    sources = data.get("sources", {})
    defaults = data.get("defaults", {})
    spec = Spec(path, op, data.get("title", path.stem))
    seen: dict[str, int | None] = {}
    for index, raw in enumerate(data["cases"]):
        line = line_of(lines, ("cases", index))
        case_id = raw["id"]
        if case_id in seen:
            raise SpecError(path, line, f"cases[{index}]: duplicate case id {case_id!r} (first on line {seen[case_id]})")
        seen[case_id] = line
        spec.cases.append(_build_case(path, lines, index, raw, op, sources, defaults))
    if "benchmark" in data:
        for index, raw in enumerate(data["benchmark"]):
            spec.benchmarks.extend(expand(raw, line_of(lines, ("benchmark", index))))
    return spec


def _composed(path: Path, text: str) -> yaml.Node:
    """The spec's YAML node tree, checked before anything is built from it: not empty, its aliases
    expanding to at most MAX_YAML_NODES nodes and containing no node that contains them, no key twice."""
    try:
        try:
            node = compose(COMPOSER, text)
        except yaml.YAMLError:
            node = compose(yaml.SafeLoader, text)  # PyYAML's messages name the character libyaml's leave out
    except yaml.YAMLError as exc:
        raise _invalid_yaml(path, exc) from None
    if node is None:
        raise SpecError(path, 1, "a spec file must be a mapping with 'op' and 'cases'")
    try:
        check_expansion(node)  # before anything is built from the aliases
    except YamlTooBig as exc:
        raise SpecError(path, exc.line, f"{format_path(exc.path)}: {exc.message}") from None
    duplicate = duplicate_key(node)
    if duplicate is not None:
        raise SpecError(path, *duplicate)
    return node


def _constructed(path: Path, node: yaml.Node) -> dict:
    """The spec's data built from the node already composed (one parse, not two): a mapping."""
    constructor = yaml.SafeLoader("")
    try:
        data = constructor.construct_document(node)
    except yaml.YAMLError as exc:
        raise _invalid_yaml(path, exc) from None
    finally:
        constructor.dispose()
    if not isinstance(data, dict):
        raise SpecError(path, 1, "a spec file must be a mapping with 'op' and 'cases'")
    return data


def _invalid_yaml(path: Path, exc: yaml.YAMLError) -> SpecError:
    """PyYAML's error as a SpecError at the line of its problem."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return SpecError(path, mark.line + 1 if mark else None, f"invalid YAML: {problem}")


def _failing(path: Path, lines: dict) -> Callable[[tuple, str], SpecError]:
    """The checks' ``fail``: the SpecError at a field of this file."""
    return lambda where, message: _fail(path, lines, where, message)


def _fail(path: Path, lines: dict, where: tuple, message: str) -> SpecError:
    return SpecError(path, line_of(lines, where), f"{format_path(where)}: {message}")


def _build_case(path: Path, lines: dict, index: int, raw: dict, op: Op, sources: dict, defaults: dict) -> Case:
    where = ("cases", index)
    line = line_of(lines, where)

    def fail(field_path: tuple, message: str) -> SpecError:
        return SpecError(path, line_of(lines, where + field_path),
                         f"{format_path(where + field_path)}: {message}")

    source = raw.get("source", defaults.get("source"))
    if isinstance(source, str):
        if source not in sources:
            raise fail(("source",), f"unknown source {source!r}; declared sources: {sorted(sources) or 'none'}")
        source = {"key": raw.get("source", defaults.get("source")), **sources[source]}
    dtypes = tuple(raw.get("dtypes", defaults.get("dtypes", ["float32", "float64"])))
    try:
        op.decode_inputs(raw["inputs"], "float64")
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        raise fail(("inputs",), str(exc)) from None
    expected = raw.get("expected")
    if expected is not None:
        try:
            op.decode_expected(expected)
        except (ValueError, TypeError, OverflowError) as exc:
            raise fail(("expected",), str(exc)) from None
    expected_error = None
    if "expected_error" in raw:
        expected_error = ExpectedError(raw["expected_error"]["type"], raw["expected_error"].get("match"),
                                       raw["expected_error"].get("kind", CONTRACT_ERROR))
        if expected_error.match is not None:
            try:
                re.compile(expected_error.match)
            except re.error as exc:
                raise fail(("expected_error", "match"), f"invalid regular expression: {exc}") from None
    tolerance_raw = raw.get("tolerance", defaults.get("tolerance"))
    tolerance = None
    if tolerance_raw:
        tolerance = Tolerance(float(tolerance_raw.get("rtol", 0.0)), float(tolerance_raw.get("atol", 0.0)))
    divergences = tuple(_divergence(raw["id"], index, op, entry)
                        for index, entry in enumerate(raw.get("known_divergences", [])))
    layouts = {}
    for role, node in (raw.get("layouts") or {}).items():
        if role not in op.input_layouts:
            raise fail(("layouts", role), f"op {op.name!r} has no input role {role!r} (its roles: "
                                          f"{', '.join(op.input_layouts) or 'none'})")
        try:
            layout = Layout.parse(node)
        except (ValueError, TypeError) as exc:
            raise fail(("layouts", role), str(exc)) from None
        if layout.kind not in op.input_layouts[role]:
            raise fail(("layouts", role), f"{op.name}'s {role} takes {', '.join(op.input_layouts[role])}, "
                                          f"not {layout.kind}")
        layouts[role] = layout
    return Case(
        spec_path=path, op=op, id=raw["id"], line=line, inputs=raw["inputs"], expected=expected,
        expected_error=expected_error, dtypes=dtypes, source=source, description=raw.get("description", ""),
        derivation=raw.get("derivation", ""), tolerance=tolerance,
        devices=tuple(raw["devices"]) if "devices" in raw else None,
        backends=tuple(raw["backends"]) if "backends" in raw else None,
        known_divergences=divergences, layouts=layouts,
    )


def _divergence(case_id: str, index: int, op: Op, entry: dict) -> Divergence:
    """A case's ``known_divergences`` entry: a divergence of this op and case."""
    def names(key: str) -> tuple[str, ...] | None:
        return tuple(entry[key]) if key in entry else None

    return Divergence(f"{case_id}/{index}", entry["reason"], entry.get("link"), ops=(op.name,),
                      backends=names("backends"), devices=names("devices"), dtypes=names("dtypes"),
                      properties=(case_id,), behaviour=entry.get("behaviour"), kind=entry.get("kind", "mismatch"),
                      torch=entry.get("torch"), raises=entry.get("raises"), match=entry.get("match"),
                      finding=entry.get("finding"))
