"""YAML spec files -> validated Spec and Case objects; every error names ``file:line``."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import torch
import yaml

from conformance.compare import Tolerance
from conformance.ops import OPS, Op

ERROR_KINDS = ("mismatch", "error", "any")


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


@dataclass(frozen=True)
class KnownDivergence:
    """A documented way stock torch (or a backend's idiom) departs from the spec, reported as xfail.

    ``behaviour: stock-torch`` describes what torch does: it applies to any implementation whose
    result is the same as stock torch's on the same inputs (checked at run time), and is stale when
    torch no longer shows it. Otherwise it names the ``backends`` whose idiom diverges.
    """

    reason: str
    link: str | None = None
    backends: tuple[str, ...] | None = None
    devices: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    kind: str = "mismatch"
    behaviour: str | None = None

    @property
    def is_torch_behaviour(self) -> bool:
        return self.behaviour == "stock-torch"

    def applies_to(self, backend: str, device: str, dtype: str) -> bool:
        if self.is_torch_behaviour:
            return False  # judged on what the backend returns, not on its name (conformance.verdict)
        return ((self.backends is None or backend in self.backends)
                and (self.devices is None or device in self.devices)
                and (self.dtypes is None or dtype in self.dtypes))


@dataclass(frozen=True)
class ExpectedError:
    type: str
    match: str | None = None


@dataclass(frozen=True)
class Case:
    """One documented example: inputs, golden outputs (or an expected error) and their source."""

    spec_path: Path
    op: Op
    id: str
    line: int
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
    known_divergences: tuple[KnownDivergence, ...] = ()

    def divergence_for(self, backend: str, device: str, dtype: str) -> KnownDivergence | None:
        for divergence in self.known_divergences:
            if divergence.applies_to(backend, device, dtype):
                return divergence
        return None

    def torch_divergence_for(self, device: str, dtype: str) -> KnownDivergence | None:
        """The recorded divergence of stock torch itself on this device and dtype, if any."""
        for divergence in self.known_divergences:
            if divergence.is_torch_behaviour and (divergence.devices is None or device in divergence.devices) \
                    and (divergence.dtypes is None or dtype in divergence.dtypes):
                return divergence
        return None


@dataclass
class Spec:
    path: Path
    op: Op
    title: str
    cases: list[Case] = field(default_factory=list)
    benchmarks: list = field(default_factory=list)  # conformance.run.benchmark.Benchmark instances


# ---------------------------------------------------------------- YAML with line numbers

def _line_map(node: yaml.Node, path: tuple = (), lines: dict | None = None) -> dict[tuple, int]:
    """Map each JSON path in the document to the 1-based line where its value starts."""
    lines = {} if lines is None else lines
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            _line_map(value_node, path + (key_node.value,), lines)
            lines[path + (key_node.value,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _line_map(item, path + (index,), lines)
    return lines


def _line_of(lines: dict[tuple, int], path) -> int | None:
    path = tuple(path)
    while path not in lines and path:
        path = path[:-1]
    return lines.get(path)


def _format_path(path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


@lru_cache(maxsize=None)
def spec_schema() -> dict:
    """The spec schema file, with each registered op's inputs/expected schemas added."""
    base = json.loads(resources.files("conformance.specs.schema").joinpath("spec.schema.json").read_text())
    schema = copy.deepcopy(base)
    schema["properties"]["op"]["enum"] = sorted(OPS)
    schema["allOf"] = [
        {
            "if": {"properties": {"op": {"const": name}}, "required": ["op"]},
            "then": {"properties": {"cases": {"items": {"properties": {
                "inputs": op.inputs_schema, "expected": op.expected_schema}}},
                "benchmark": {"items": {"properties": {"hyperparameters": op.inputs_schema.get(
                    "properties", {}).get("hyperparameters", {"maxProperties": 0})}}}}},
        }
        for name, op in OPS.items()
    ]
    return schema


def _schema_error(path: Path, lines: dict, data: Any) -> SpecError | None:
    validator = jsonschema.Draft202012Validator(spec_schema())
    errors = list(validator.iter_errors(data))
    if not errors:
        return None
    error = jsonschema.exceptions.best_match(errors)
    # the deepest error is usually the most helpful one
    error = max(errors, key=lambda e: (len(e.absolute_path), e is error))
    while error.context:
        error = max(error.context, key=lambda e: len(e.absolute_path))
    message = error.message if len(error.message) < 300 else error.message[:300] + "..."
    where = tuple(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(key for key in error.instance if key not in allowed)
        if extra:  # point at the unexpected key itself
            return SpecError(path, _line_of(lines, where + (extra[0],)),
                             f"{_format_path(where + (extra[0],))}: unexpected field {extra[0]!r}; "
                             f"allowed here: {', '.join(sorted(allowed))}")
    return SpecError(path, _line_of(lines, where), f"{_format_path(where)}: {message}")


# ---------------------------------------------------------------- loading

def load_spec(path: Path | str) -> Spec:
    """Read, validate and decode one spec file. Raises SpecError naming file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(path, None, f"cannot read: {exc}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(path, mark.line + 1 if mark else None, f"invalid YAML: {problem}") from None
    if node is None or not isinstance(data, dict):
        raise SpecError(path, 1, "a spec file must be a mapping with 'op' and 'cases'")
    lines = _line_map(node)
    error = _schema_error(path, lines, data)
    if error:
        raise error
    op = OPS[data["op"]]
    sources = data.get("sources", {})
    defaults = data.get("defaults", {})
    spec = Spec(path, op, data.get("title", path.stem))
    seen: dict[str, int] = {}
    for index, raw in enumerate(data["cases"]):
        line = _line_of(lines, ("cases", index))
        case_id = raw["id"]
        if case_id in seen:
            raise SpecError(path, line, f"cases[{index}]: duplicate case id {case_id!r} (first on line {seen[case_id]})")
        seen[case_id] = line
        spec.cases.append(_build_case(path, lines, index, raw, op, sources, defaults))
    if "benchmark" in data:
        from conformance.run.benchmark import expand

        for index, raw in enumerate(data["benchmark"]):
            spec.benchmarks.extend(expand(raw, _line_of(lines, ("benchmark", index))))
    return spec


def _build_case(path: Path, lines: dict, index: int, raw: dict, op: Op, sources: dict, defaults: dict) -> Case:
    where = ("cases", index)
    line = _line_of(lines, where)

    def fail(field_path: tuple, message: str) -> SpecError:
        return SpecError(path, _line_of(lines, where + field_path),
                         f"{_format_path(where + field_path)}: {message}")

    source = raw.get("source", defaults.get("source"))
    if isinstance(source, str):
        if source not in sources:
            raise fail(("source",), f"unknown source {source!r}; declared sources: {sorted(sources) or 'none'}")
        source = {"key": raw.get("source", defaults.get("source")), **sources[source]}
    dtypes = tuple(raw.get("dtypes", defaults.get("dtypes", ["float32", "float64"])))
    try:
        op.decode_inputs(raw["inputs"], torch.float64)
    except (ValueError, KeyError, TypeError) as exc:
        raise fail(("inputs",), str(exc)) from None
    expected = raw.get("expected")
    if expected is not None:
        try:
            op.decode_expected(expected)
        except (ValueError, TypeError) as exc:
            raise fail(("expected",), str(exc)) from None
    expected_error = None
    if "expected_error" in raw:
        expected_error = ExpectedError(raw["expected_error"]["type"], raw["expected_error"].get("match"))
        if expected_error.match is not None:
            try:
                re.compile(expected_error.match)
            except re.error as exc:
                raise fail(("expected_error", "match"), f"invalid regular expression: {exc}") from None
    tolerance_raw = raw.get("tolerance", defaults.get("tolerance"))
    tolerance = None
    if tolerance_raw:
        tolerance = Tolerance(float(tolerance_raw.get("rtol", 0.0)), float(tolerance_raw.get("atol", 0.0)))
    divergences = tuple(
        KnownDivergence(
            reason=d["reason"], link=d.get("link"),
            backends=tuple(d["backends"]) if "backends" in d else None,
            devices=tuple(d["devices"]) if "devices" in d else None,
            dtypes=tuple(d["dtypes"]) if "dtypes" in d else None,
            kind=d.get("kind", "mismatch"), behaviour=d.get("behaviour"),
        )
        for d in raw.get("known_divergences", [])
    )
    return Case(
        spec_path=path, op=op, id=raw["id"], line=line, inputs=raw["inputs"], expected=expected,
        expected_error=expected_error, dtypes=dtypes, source=source, description=raw.get("description", ""),
        derivation=raw.get("derivation", ""), tolerance=tolerance,
        devices=tuple(raw["devices"]) if "devices" in raw else None,
        backends=tuple(raw["backends"]) if "backends" in raw else None,
        known_divergences=divergences,
    )
