"""What an op record may declare, checked as it is made (:class:`conformance.ops.base.Op`'s ``__new__`` and
``__post_init__``), as torch's ``OpInfo`` refuses an unknown keyword: a record sets only the fields its kind
declares (:class:`~conformance.ops.base.Op`, or :class:`~conformance.ops.optimizers.base.OptimizerOp` for an
optimizer), each a value of the declared default's kind -- code (:func:`~conformance.ops.base.code`) a function
that takes the default's arguments -- and the fields agree with each other (the outputs they name are outputs
of the record's schema). A misspelt, mistyped or inconsistent field is an InvalidRecord (a TypeError) naming
the record, the field and, for a misspelling, the declared name it is closest to."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Mapping
from typing import Any, Callable

from conformance.core.layouts import LAYOUT_KINDS


CODE = "code"  # the metadata key of an op record's field that is code (conformance.ops.base.code)


class InvalidRecord(TypeError):
    """An op record that sets a field its kind does not declare, or a field of the wrong kind, or inconsistent."""


def takes_op(function: Callable[..., Any]) -> bool:
    """Whether ``function`` (a code field's value) is handed the record first: its first parameter is ``op``."""
    try:
        parameters = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return False
    return bool(parameters) and parameters[0] == "op"


def _where(name: Any, module: str) -> str:
    return f"op record {name!r} ({module.replace('.', '/')}.py)"


def check_names(cls: type, given: Mapping[str, Any], module: str, *, positional: tuple = ()) -> None:
    """Raise InvalidRecord where ``given`` (a record's keywords, made in ``module``) names a field ``cls``
    does not declare, or a field is given by position."""
    where = _where(given.get("name"), module)
    if positional:
        raise InvalidRecord(f"{where}: an op record's fields are keywords (name=..., summary=...); "
                            f"{len(positional)} given by position")
    declared = [spec.name for spec in dataclasses.fields(cls) if spec.init]
    for name in given:
        if name not in declared:
            close = difflib.get_close_matches(name, declared, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            kinds = " and ".join(f"{kind.__module__.replace('.', '/')}.py ({kind.__name__})"
                                 for kind in reversed(cls.__mro__) if dataclasses.is_dataclass(kind))
            raise InvalidRecord(f"{where}: {name!r} is not a field of an op record{hint}; the fields are declared "
                                f"in {kinds}")


def check_record(record: Any, *, paths: tuple[str, ...], twins: tuple[str, ...], dimensions: tuple[str, ...]) -> None:
    """Raise InvalidRecord where a field of ``record`` (an Op, as made) is of another kind than its declared
    default's, or its fields disagree (``paths``, ``twins``, ``dimensions``: the names a TorchPath, its twins and
    dimensions_left_out may take)."""
    where = _where(record.name, getattr(record, "_declared_in", type(record).__module__))
    if not isinstance(record.name, str) or not record.name:
        raise InvalidRecord(f"{where}: 'name' is the op's name, a non-empty str; it is {record.name!r}")
    for spec in dataclasses.fields(record):
        default: Any = spec.default if spec.default is not dataclasses.MISSING else (
            spec.default_factory() if spec.default_factory is not dataclasses.MISSING else None)
        if spec.metadata.get(CODE):
            _check_code(where, spec.name, getattr(record, spec.name), default)
        else:
            _check_kind(where, spec.name, getattr(record, spec.name), default)
    _check_consistent(where, record, paths, twins, dimensions)


def _check_code(where: str, name: str, function: Any, default: Callable[..., Any]) -> None:
    """``function`` is callable with the arguments its ``default`` is (beyond the record, where it takes it)."""
    if not callable(function):
        raise InvalidRecord(f"{where}: {name!r} is code of an op record (a function); it is set to {function!r}")
    wanted = [p for p in inspect.signature(default).parameters.values()
              if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    wanted = wanted[1:] if takes_op(default) else wanted
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # (a builtin without a signature: called as declared)
    arguments = (["op"] if takes_op(function) else []) + [p.name for p in wanted]
    try:
        signature.bind(*arguments)
    except TypeError:
        shown = ", ".join(["op", *(p.name for p in wanted)])
        raise InvalidRecord(f"{where}: {name!r} is called with ({', '.join(p.name for p in wanted)}), and handed the "
                            f"record first where its first parameter is 'op' ({shown}); "
                            f"{getattr(function, '__qualname__', function)}{signature} takes neither") from None


def _check_kind(where: str, name: str, value: Any, default: Any) -> None:
    """``value`` is of the kind of the declared ``default`` (a mapping for a mapping; ...)."""
    if default is None:
        return  # a field declared None takes any value
    kinds: tuple[type, ...]
    if isinstance(default, bool):
        kinds = (bool,)
    elif isinstance(default, Mapping):
        kinds = (Mapping,)
    elif isinstance(default, (int, float)):
        kinds = (int, float)
    else:
        kinds = (type(default),)
    ok = not (isinstance(value, bool) and bool not in kinds) and isinstance(value, kinds)
    if not ok:
        raise InvalidRecord(f"{where}: {name!r} is declared as {_a(type(default).__name__)} "
                            f"(default {default!r}); it is set to {_a(type(value).__name__)}: {value!r}")


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _check_consistent(where: str, record: Any, path_names: tuple[str, ...], twin_names: tuple[str, ...],
                      dimensions: tuple[str, ...]) -> None:
    """The fields that name outputs, state, paths, dimensions and layouts name ones that exist."""
    outputs = set((record.expected_schema or {}).get("properties", {}))
    named = {"state_outputs": set(record.state_outputs), "root_outputs": set(record.root_outputs),
             "exact_outputs": set(record.exact_outputs), "layout_reordered_outputs": set(record.layout_reordered_outputs)}
    if outputs:
        for field, names in named.items():
            unknown = sorted(names - outputs)
            if unknown:
                raise InvalidRecord(f"{where}: {field} names {', '.join(map(repr, unknown))}, which expected_schema "
                                    f"has no output of (its outputs: {', '.join(sorted(outputs))})")
    for output, (state, _hyperparameter, _default) in record.root_outputs.items():
        if state not in named["state_outputs"]:
            raise InvalidRecord(f"{where}: root_outputs[{output!r}] is read from {state!r}, which is not one of its "
                                f"state_outputs ({', '.join(sorted(named['state_outputs'])) or 'none'})")
    paths = [path.name for path in record.torch_paths]
    for path in paths:
        if path not in path_names or paths.count(path) > 1:
            raise InvalidRecord(f"{where}: torch_paths has {path!r} "
                                + ("twice" if path in path_names else f"(a path is one of {', '.join(path_names)})"))
    for path in record.torch_paths:
        unknown = [twin for twin in path.twins if twin not in twin_names]
        if unknown:
            raise InvalidRecord(f"{where}: the {path.name} path's twins have {', '.join(map(repr, unknown))}, not a "
                                f"twin property ({', '.join(twin_names)})")
    for dimension in record.dimensions_left_out:
        if dimension not in dimensions:
            raise InvalidRecord(f"{where}: dimensions_left_out names {dimension!r}, not one of the input space's "
                                f"dimensions ({', '.join(dimensions)})")
    for role, kinds in record.input_layouts.items():
        unknown = [kind for kind in kinds if kind not in LAYOUT_KINDS]
        if unknown:
            raise InvalidRecord(f"{where}: input_layouts[{role!r}] has {', '.join(map(repr, unknown))}, not a layout "
                                f"({', '.join(LAYOUT_KINDS)})")
