"""A spec's data checked before anything is decoded: against the JSON Schema (:func:`spec_schema`,
its op enum filled in from the registry), the element budgets (sizes from the spec's numbers, before
any array is allocated), the names of devices, backends and dtypes, and finite golden values. Each
check reports through ``fail(where, message)``, which the loader (:mod:`conformance.specs.load`)
turns into a SpecError naming ``file:line`` and the field."""

from __future__ import annotations

import re

import copy
import json
import math
from functools import lru_cache
from importlib import resources
from typing import Any, Callable

import jsonschema

from conformance.core.devices import DEVICES
from conformance.core.divergences import InvalidTorchVersions, torch_specifier
from conformance.core.dtypes import DTYPES
from conformance.core.record import CANDIDATE
from conformance.ops import OPS

# at most this many tensor elements per case (inputs and golden values together) and per
# benchmark size: {fill, shape} and {arange, shape} count prod(shape), a sparse tensor its
# dense size prod(size) (backends and the reference densify it) plus its indices and values,
# masked_mean_compiles prod(shape) per mask, nested lists their numbers
ELEMENT_BUDGET = 10_000_000
# a sparse tensor stores only its entries; its logical size may be far larger (an index space beyond 32 bits)
SPARSE_SIZE_BUDGET = 2**36

# the error at a field of the spec (its JSON path) with a message: the loader's SpecError
Fail = Callable[[tuple, str], Exception]


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


def schema_problem(data: Any, fail: Fail) -> Exception | None:
    """The spec's most helpful error against :func:`spec_schema` (the deepest; an unexpected key named
    itself), as ``fail`` makes it, or None when the data is valid."""
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
            return fail(where + (extra[0],),
                        f"unexpected field {extra[0]!r}"
                        f"{' (YAML reads a bare on/off/yes/no as a boolean)' if isinstance(extra[0], bool) else ''}; "
                        f"allowed here: {', '.join(sorted(allowed))}")
    return fail(where, message)


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


def check_budget(data: dict, fail: Fail) -> None:
    """Sizes from the spec's numbers, before any array is allocated (ELEMENT_BUDGET)."""
    budget = f"the element budget is {ELEMENT_BUDGET:,} per case (docs/robustness.md)"
    for index, case in enumerate(data.get("cases", [])):
        total = 0
        for field_name in ("inputs", "expected"):
            for where, count in _tensor_elements(case.get(field_name), ("cases", index, field_name)):
                if count < 0:  # a sparse tensor's logical size
                    if -count > SPARSE_SIZE_BUDGET:
                        raise fail(where, f"this sparse tensor's size has {-count:,} elements; the "
                                    f"sparse size budget is {SPARSE_SIZE_BUDGET:,} (docs/robustness.md)")
                    continue
                total += count
                if count > ELEMENT_BUDGET:
                    raise fail(where, f"this tensor has {count:,} elements; {budget}")
                if total > ELEMENT_BUDGET:
                    raise fail(where, f"the case's tensors reach {total:,} elements here; {budget}")
    for index, bench in enumerate(data.get("benchmark", []) or []):
        for size_index, size in enumerate(bench.get("sizes", [])):
            count = math.prod(size)
            if count > ELEMENT_BUDGET:
                raise fail(("benchmark", index, "sizes", size_index),
                            f"this size has {count:,} elements; the element budget is {ELEMENT_BUDGET:,} "
                            "per benchmark size (docs/robustness.md)")


@lru_cache(maxsize=None)
def known_backends() -> tuple[str, ...]:
    """The backend names a spec may name: the built-in ones (and entry points) and ``candidate``."""
    # imported here: a module-level import would lift the loader, and every stage above it, a level
    from conformance.backends import builtin_backends

    return tuple(builtin_backends()) + (CANDIDATE,)


def check_names(data: dict, fail: Fail) -> None:
    """Typos are errors: a device, backend or dtype no one knows would silently drop a case."""
    kinds = {"devices": ("device", tuple(DEVICES)), "dtypes": ("dtype", tuple(DTYPES))}

    def check(node: dict, where: tuple) -> None:
        for key in ("devices", "backends", "dtypes"):
            names = node.get(key)
            if not isinstance(names, list):
                continue
            kind, known = kinds.get(key) or ("backend", known_backends())
            for position, name in enumerate(names):
                if name not in known:
                    raise fail(where + (key, position),
                                f"unknown {kind} {name!r}; known: {', '.join(known)}")

    for index, case in enumerate(data.get("cases", [])):
        check(case, ("cases", index))
        for d_index, divergence in enumerate(case.get("known_divergences", []) or []):
            check(divergence, ("cases", index, "known_divergences", d_index))
            if isinstance(divergence, dict) and isinstance(divergence.get("torch"), str):
                try:  # a typo must not make it apply on no torch at all
                    torch_specifier(divergence["torch"])
                except InvalidTorchVersions as exc:
                    raise fail(("cases", index, "known_divergences", d_index, "torch"),
                                str(exc)) from None
            if isinstance(divergence, dict) and isinstance(divergence.get("match"), str):
                try:  # a pattern that cannot compile would pin nothing
                    re.compile(divergence["match"])
                except re.error as exc:
                    raise fail(("cases", index, "known_divergences", d_index, "match"),
                                f"invalid regular expression: {exc}") from None
    for index, bench in enumerate(data.get("benchmark", []) or []):
        check(bench, ("benchmark", index))
    if isinstance(data.get("defaults"), dict):
        check(data["defaults"], ("defaults",))


def nonfinite_values(node: Any, where: tuple):
    """(path, value) for every NaN or infinity in the spec notation ``node``."""
    if isinstance(node, float) and not math.isfinite(node):
        yield where, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from nonfinite_values(value, where + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from nonfinite_values(value, where + (index,))


def check_finite_golden(data: dict, fail: Fail) -> None:
    """Golden values are finite unless the case says ``nonfinite: true`` (NaN/inf meant)."""
    for index, case in enumerate(data.get("cases", [])):
        if case.get("nonfinite") is True:
            continue
        for where, value in nonfinite_values(case.get("expected"), ("cases", index, "expected")):
            raise fail(where, f"golden value {value} is not finite; if NaN/inf is meant, "
                                            "say so with `nonfinite: true` on the case")
