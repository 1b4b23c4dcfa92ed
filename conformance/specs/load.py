"""YAML spec files -> validated Spec and Case objects; every error names ``file:line``.

Loading cannot take a session down (docs/robustness.md): a file that is not UTF-8, YAML whose
aliases expand beyond :data:`MAX_YAML_NODES` nodes (or refer to themselves), nesting too deep for
the parser, tensors beyond the :data:`ELEMENT_BUDGET` (checked from the spec's numbers before
anything is allocated), an unknown device or backend, and a non-finite golden value on a case
without ``nonfinite: true`` are all a :class:`SpecError` naming file, line and field.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import jsonschema
import yaml

from conformance.core.compare import Tolerance
from conformance.core.divergences import Divergence, InvalidTorchVersions, lookup, torch_specifier
from conformance.core.layouts import Layout
from conformance.ops import OPS

if TYPE_CHECKING:  # annotations only: records are found in the OPS registry
    from conformance.ops.base import Op


# a spec's YAML may expand to at most this many nodes, aliases expanded (a billion-laughs
# document is rejected after this much work, before anything is built from it)
MAX_YAML_NODES = 1_000_000
# at most this many tensor elements per case (inputs and golden values together) and per
# benchmark size: {fill, shape} and {arange, shape} count prod(shape), a sparse tensor its
# dense size prod(size) (backends and the reference densify it) plus its indices and values,
# masked_mean_compiles prod(shape) per mask, nested lists their numbers
ELEMENT_BUDGET = 10_000_000
# a sparse tensor stores only its entries; its logical size may be far larger (an index space beyond 32 bits)
SPARSE_SIZE_BUDGET = 2**36


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


# ---------------------------------------------------------------- YAML with line numbers

class _YamlTooBig(Exception):
    def __init__(self, path: tuple, line: int, message: str):
        self.path, self.line, self.message = path, line, message


def _children(node: yaml.Node) -> list[tuple[Any, yaml.Node]]:
    if isinstance(node, yaml.MappingNode):
        return [(k.value if isinstance(k, yaml.ScalarNode) else str(k.start_mark), v) for k, v in node.value]
    if isinstance(node, yaml.SequenceNode):
        return list(enumerate(node.value))
    return []


def _check_expansion(node: yaml.Node, limit: int = MAX_YAML_NODES) -> None:
    """Raise _YamlTooBig when the document, aliases expanded, has more than ``limit`` nodes or
    an alias contains itself. Linear in the nodes as written (each shared node is sized once)."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, tuple, bool]] = [(node, (), False)]
    while stack:
        current, path, leaving = stack.pop()
        if leaving:
            on_path.discard(id(current))
            size[id(current)] = 1 + sum(size[id(child)] for _, child in _children(current))
            continue
        if id(current) in size:
            continue
        if id(current) in on_path:
            raise _YamlTooBig(path, current.start_mark.line + 1,
                              "an alias refers to a node that contains it (a recursive structure)")
        on_path.add(id(current))
        stack.append((current, path, True))
        for key, child in reversed(_children(current)):
            stack.append((child, path + (key,), False))
    if size[id(node)] <= limit:
        return
    path = ()
    while True:  # the deepest field that alone expands beyond the limit
        bigger = [(key, child) for key, child in _children(node) if size[id(child)] > limit]
        if not bigger:
            break
        key, node = bigger[0]
        path += (key,)
    raise _YamlTooBig(path, node.start_mark.line + 1,
                      f"expands to {size[id(node)]:,} YAML nodes with its aliases expanded, more than the "
                      f"{limit:,} a spec may have (an alias bomb?)")


def _check_duplicate_keys(path: Path, root: yaml.Node) -> None:
    """A key given twice in one mapping is an error naming both lines (PyYAML keeps the last silently)."""
    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value != "<<":
                    key = (key_node.tag, key_node.value)
                    if key in first:
                        raise SpecError(path, key_node.start_mark.line + 1,
                                        f"duplicate key {key_node.value!r} (first given on line {first[key]})")
                    first[key] = key_node.start_mark.line + 1
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            stack.extend(child for pair in node.value for child in (pair if isinstance(pair, tuple) else (pair,)))


def _line_map(node: yaml.Node) -> dict[tuple, int]:
    """Map each JSON path in the document to the 1-based line where its value starts
    (aliases expanded: call :func:`_check_expansion` first)."""
    lines: dict[tuple, int] = {}
    stack: list[tuple[yaml.Node, tuple]] = [(node, ())]
    while stack:
        node, path = stack.pop()
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.start_mark)
                lines[path + (key,)] = key_node.start_mark.line + 1
        for key, child in reversed(_children(node)):
            stack.append((child, path + (key,)))
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
    schema["properties"]["op"]["description"] = f"name of the op under test: {', '.join(sorted(OPS))}"
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
        extra = sorted((key for key in error.instance if key not in allowed), key=str)  # `on:` reads as True
        if extra:  # point at the unexpected key itself
            return SpecError(path, _line_of(lines, where + (extra[0],)),
                             f"{_format_path(where + (extra[0],))}: unexpected field {extra[0]!r}"
                             f"{' (YAML reads a bare on/off/yes/no as a boolean)' if isinstance(extra[0], bool) else ''}; "
                             f"allowed here: {', '.join(sorted(allowed))}")
    return SpecError(path, _line_of(lines, where), f"{_format_path(where)}: {message}")


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


# libyaml's parser where PyYAML has it (5-10x faster, the same nodes and marks), else PyYAML's own
_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _compose(loader_class, text: str) -> yaml.Node | None:
    loader = loader_class(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def _load_spec(path: Path) -> Spec:
    text = _read_text(path)
    try:
        try:
            node = _compose(_COMPOSER, text)
        except yaml.YAMLError:
            node = _compose(yaml.SafeLoader, text)  # PyYAML's messages name the character libyaml's leave out
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(path, mark.line + 1 if mark else None, f"invalid YAML: {problem}") from None
    if node is None:
        raise SpecError(path, 1, "a spec file must be a mapping with 'op' and 'cases'")
    try:
        _check_expansion(node)  # before anything is built from the aliases
    except _YamlTooBig as exc:
        raise SpecError(path, exc.line, f"{_format_path(exc.path)}: {exc.message}") from None
    _check_duplicate_keys(path, node)
    lines = _line_map(node)
    constructor = yaml.SafeLoader("")  # builds the data from the node already composed: one parse, not two
    try:
        data = constructor.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(path, mark.line + 1 if mark else None, f"invalid YAML: {problem}") from None
    finally:
        constructor.dispose()
    if not isinstance(data, dict):
        raise SpecError(path, 1, "a spec file must be a mapping with 'op' and 'cases'")
    error = _schema_error(path, lines, data)
    if error:
        raise error
    _check_budget(path, lines, data)
    _check_names(path, lines, data)
    _check_finite_golden(path, lines, data)
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
        from conformance.specs.benchmark import expand

        for index, raw in enumerate(data["benchmark"]):
            spec.benchmarks.extend(expand(raw, _line_of(lines, ("benchmark", index))))
    return spec


# ---------------------------------------------------------------- checks before decoding

def _fail(path: Path, lines: dict, where: tuple, message: str) -> SpecError:
    return SpecError(path, _line_of(lines, where), f"{_format_path(where)}: {message}")


def _is_shape(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _tensor_elements(node: Any, where: tuple):
    """(path, elements) for every tensor the spec notation ``node`` will allocate."""
    if isinstance(node, dict):
        count = None
        if _is_shape(node.get("shape")):
            count = math.prod(node["shape"])
            if "counts" in node and isinstance(node["counts"], list):  # masked_mean_compiles: one per mask
                count *= max(1, len(node["counts"]))
        if isinstance(node.get("arange"), int):
            count = max(count or 0, node["arange"])
        if count:
            yield where, count
        if _is_shape(node.get("size")):  # sparse: only the entries are stored (backends that densify refuse)
            yield where, -math.prod(node["size"])
        for key, value in node.items():
            if key not in ("shape", "size", "counts", "arange", "fill"):
                yield from _tensor_elements(value, where + (key,))
    elif isinstance(node, list):
        if node and not any(isinstance(v, (list, dict)) for v in node):
            yield where, len(node)
        else:
            for index, value in enumerate(node):
                yield from _tensor_elements(value, where + (index,))


def _check_budget(path: Path, lines: dict, data: dict) -> None:
    """Sizes from the spec's numbers, before any array is allocated (ELEMENT_BUDGET)."""
    budget = f"the element budget is {ELEMENT_BUDGET:,} per case (docs/robustness.md)"
    for index, case in enumerate(data.get("cases", [])):
        total = 0
        for field_name in ("inputs", "expected"):
            for where, count in _tensor_elements(case.get(field_name), ("cases", index, field_name)):
                if count < 0:  # a sparse tensor's logical size
                    if -count > SPARSE_SIZE_BUDGET:
                        raise _fail(path, lines, where, f"this sparse tensor's size has {-count:,} elements; the "
                                    f"sparse size budget is {SPARSE_SIZE_BUDGET:,} (docs/robustness.md)")
                    continue
                total += count
                if count > ELEMENT_BUDGET:
                    raise _fail(path, lines, where, f"this tensor has {count:,} elements; {budget}")
                if total > ELEMENT_BUDGET:
                    raise _fail(path, lines, where, f"the case's tensors reach {total:,} elements here; {budget}")
    for index, bench in enumerate(data.get("benchmark", []) or []):
        for size_index, size in enumerate(bench.get("sizes", [])):
            count = math.prod(size)
            if count > ELEMENT_BUDGET:
                raise _fail(path, lines, ("benchmark", index, "sizes", size_index),
                            f"this size has {count:,} elements; the element budget is {ELEMENT_BUDGET:,} "
                            "per benchmark size (docs/robustness.md)")


@lru_cache(maxsize=None)
def known_backends() -> tuple[str, ...]:
    """The backend names a spec may name: the built-in ones (and entry points) and ``candidate``."""
    from conformance.backends import builtin_backends

    return tuple(builtin_backends()) + ("candidate",)


def _check_names(path: Path, lines: dict, data: dict) -> None:
    """Typos are errors: a device, backend or dtype no one knows would silently drop a case."""
    from conformance.core.devices import DEVICES
    from conformance.core.dtypes import DTYPES

    kinds = {"devices": ("device", tuple(DEVICES)), "dtypes": ("dtype", tuple(DTYPES))}

    def check(node: dict, where: tuple) -> None:
        for key in ("devices", "backends", "dtypes"):
            names = node.get(key)
            if not isinstance(names, list):
                continue
            kind, known = kinds.get(key) or ("backend", known_backends())
            for position, name in enumerate(names):
                if name not in known:
                    raise _fail(path, lines, where + (key, position),
                                f"unknown {kind} {name!r}; known: {', '.join(known)}")

    for index, case in enumerate(data.get("cases", [])):
        check(case, ("cases", index))
        for d_index, divergence in enumerate(case.get("known_divergences", []) or []):
            check(divergence, ("cases", index, "known_divergences", d_index))
            if isinstance(divergence, dict) and isinstance(divergence.get("torch"), str):
                try:  # a typo must not make it apply on no torch at all
                    torch_specifier(divergence["torch"])
                except InvalidTorchVersions as exc:
                    raise _fail(path, lines, ("cases", index, "known_divergences", d_index, "torch"),
                                str(exc)) from None
    for index, bench in enumerate(data.get("benchmark", []) or []):
        check(bench, ("benchmark", index))
    if isinstance(data.get("defaults"), dict):
        check(data["defaults"], ("defaults",))


def nonfinite_values(node: Any, where: tuple):
    if isinstance(node, float) and not math.isfinite(node):
        yield where, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from nonfinite_values(value, where + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from nonfinite_values(value, where + (index,))


def _check_finite_golden(path: Path, lines: dict, data: dict) -> None:
    """Golden values are finite unless the case says ``nonfinite: true`` (NaN/inf meant)."""
    for index, case in enumerate(data.get("cases", [])):
        if case.get("nonfinite") is True:
            continue
        for where, value in nonfinite_values(case.get("expected"), ("cases", index, "expected")):
            raise _fail(path, lines, where, f"golden value {value} is not finite; if NaN/inf is meant, "
                                            "say so with `nonfinite: true` on the case")


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
                      torch=entry.get("torch"))
