"""What an op record may declare, checked as its class is made (:meth:`conformance.ops.base.Op.__init_subclass__`),
as torch's ``OpInfo`` refuses an unknown keyword: a record sets only the fields and methods its bases
declare (:class:`~conformance.ops.base.Op`, and the shared base of its kind, ``OptimizerOp``), each field a
value of the declared default's kind, and the fields agree with each other (the outputs they name are
outputs of the record's schema). A misspelt or inconsistent field is a TypeError naming the record, the
field and, for a misspelling, the declared name it is closest to. Names with a leading underscore are
the record's own helpers."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from conformance.core.layouts import LAYOUT_KINDS

_CODE = (staticmethod, classmethod, property)


class InvalidRecord(TypeError):
    """An op record that sets a field no base declares, or a field of the wrong kind or inconsistent."""


def check_record(cls: type, bases: tuple[type, ...], *, paths: tuple[str, ...], twins: tuple[str, ...],
                 dimensions: tuple[str, ...]) -> None:
    """Raise InvalidRecord where ``cls`` (an op record) sets a name none of ``bases`` (its op-record bases,
    nearest first) declares, or a field of another kind than the declared default's, or fields that disagree
    (``paths``, ``twins``, ``dimensions``: the names a TorchPath, its twins and dimensions_left_out may take)."""
    declared: dict[str, Any] = {}
    for base in reversed(bases):
        declared.update({name: value for name, value in vars(base).items() if not name.startswith("__")})
    where = f"op record {cls.__module__}.{cls.__qualname__}"
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if name not in declared:
            close = difflib.get_close_matches(name, [n for n in declared if not n.startswith("_")], n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidRecord(f"{where}: {name!r} is not a field of an op record{hint}; the fields are declared "
                                f"in conformance/ops/base.py (Op) and conformance/ops/optimizers/base.py (OptimizerOp)")
        _check_kind(where, name, value, declared[name])
    _check_consistent(where, cls, paths, twins, dimensions)


def _is_code(value: Any) -> bool:
    return callable(value) or isinstance(value, _CODE)


def _check_kind(where: str, name: str, value: Any, default: Any) -> None:
    """``value`` is of the kind of the declared ``default`` (code for code; a mapping for a mapping; ...)."""
    if _is_code(default) and not isinstance(default, type):
        if not _is_code(value):
            raise InvalidRecord(f"{where}: {name!r} is a method of an op record; it is set to {value!r}")
        return
    if default is None or _is_code(value) and not isinstance(default, (str, bool, int, float, tuple, frozenset)):
        return  # a field declared None takes any value; a computed field may be a property
    kinds: tuple[type, ...]
    if isinstance(default, bool):
        kinds = (bool,)
    elif isinstance(default, Mapping):
        kinds = (Mapping,)
    elif isinstance(default, (int, float)):
        kinds = (int, float)
    else:
        kinds = (type(default),)
    if isinstance(value, bool) and bool not in kinds:
        ok = False
    else:
        ok = isinstance(value, kinds)
    if not ok:
        raise InvalidRecord(f"{where}: {name!r} is declared as {_a(type(default).__name__)} "
                            f"(default {default!r}); it is set to {_a(type(value).__name__)}: {value!r}")


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _check_consistent(where: str, cls: type, path_names: tuple[str, ...], twin_names: tuple[str, ...],
                      dimensions: tuple[str, ...]) -> None:
    """The fields that name outputs, state, paths, dimensions and layouts name ones that exist."""
    outputs = set((getattr(cls, "expected_schema", None) or {}).get("properties", {}))
    named = {"state_outputs": set(getattr(cls, "state_outputs", {})), "root_outputs": set(getattr(cls, "root_outputs", {})),
             "exact_outputs": set(getattr(cls, "exact_outputs", ())),
             "layout_reordered_outputs": set(getattr(cls, "layout_reordered_outputs", ()))}
    if outputs:
        for field, names in named.items():
            unknown = sorted(names - outputs)
            if unknown:
                raise InvalidRecord(f"{where}: {field} names {', '.join(map(repr, unknown))}, which expected_schema "
                                    f"has no output of (its outputs: {', '.join(sorted(outputs))})")
    for output, (state, _hyperparameter, _default) in getattr(cls, "root_outputs", {}).items():
        if state not in named["state_outputs"]:
            raise InvalidRecord(f"{where}: root_outputs[{output!r}] is read from {state!r}, which is not one of its "
                                f"state_outputs ({', '.join(sorted(named['state_outputs'])) or 'none'})")
    paths = [path.name for path in getattr(cls, "torch_paths", ())]
    for path in paths:
        if path not in path_names or paths.count(path) > 1:
            raise InvalidRecord(f"{where}: torch_paths has {path!r} "
                                + ("twice" if path in path_names else f"(a path is one of {', '.join(path_names)})"))
    for path in getattr(cls, "torch_paths", ()):
        unknown = [twin for twin in path.twins if twin not in twin_names]
        if unknown:
            raise InvalidRecord(f"{where}: the {path.name} path's twins have {', '.join(map(repr, unknown))}, not a "
                                f"twin property ({', '.join(twin_names)})")
    for dimension in getattr(cls, "dimensions_left_out", {}):
        if dimension not in dimensions:
            raise InvalidRecord(f"{where}: dimensions_left_out names {dimension!r}, not one of the input space's "
                                f"dimensions ({', '.join(dimensions)})")
    for role, kinds in getattr(cls, "input_layouts", {}).items():
        unknown = [kind for kind in kinds if kind not in LAYOUT_KINDS]
        if unknown:
            raise InvalidRecord(f"{where}: input_layouts[{role!r}] has {', '.join(map(repr, unknown))}, not a layout "
                                f"({', '.join(LAYOUT_KINDS)})")
