"""``candidate``: a user's implementation of one op, given as ``OP=module:attr``, run as a
backend of its own through that op's candidate contract."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from conformance.types import RunContext
from conformance.backends.base import Backend
from conformance.ops import OPS


class CandidateError(ValueError):
    """A ``--conformance-impl`` value that cannot be turned into a candidate backend."""


def load_object(target: str) -> Any:
    """Import ``module:attr`` (dotted attr allowed) or ``path/to/file.py:attr``."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise CandidateError(f"{target!r} is not of the form module:attr or path/to/file.py:attr")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise CandidateError(f"{target!r}: no such file {path}")
        spec = importlib.util.spec_from_file_location(f"conformance_candidate_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise CandidateError(f"{target!r}: importing {path} raised {type(exc).__name__}: {exc}") from exc
    else:
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise CandidateError(f"{target!r}: importing {module_name} raised {type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CandidateError(f"{target!r}: {module_name} has no attribute {attr!r}") from None
    return obj


class CandidateBackend(Backend):
    """Runs user-supplied implementations, one per op, through each op's candidate contract.

    Unlike the built-in backends it gets items only for the ops it was given.
    """

    lists_unimplemented_ops = False
    judged_against_torch = True

    def __init__(self, name: str, candidates: dict[str, Any], description: str = ""):
        self.name = name
        self.description = description or "user-supplied implementation"
        self.candidates = dict(candidates)
        super().__init__({op: self._runner(op, obj) for op, obj in candidates.items()})

    @staticmethod
    def _runner(op_name: str, candidate: Any):
        op = OPS[op_name]

        def run(inputs: Any, ctx: RunContext):
            return op.run_candidate(candidate, inputs, ctx)

        return run


def parse_impl_options(values: list[str]) -> dict[str, tuple[str, Any]]:
    """``["adagrad=pkg.mod:MyAdagrad", ...]`` -> {op: (target, object)}, with clear errors."""
    candidates: dict[str, tuple[str, Any]] = {}
    for value in values:
        op_name, sep, target = value.partition("=")
        op_name = op_name.strip()
        if not sep:
            raise CandidateError(f"--conformance-impl {value!r}: expected OP=module:attr")
        if op_name not in OPS:
            raise CandidateError(f"--conformance-impl {value!r}: unknown op {op_name!r}; "
                                 f"known ops: {', '.join(sorted(OPS))}")
        if op_name in candidates:
            raise CandidateError(f"--conformance-impl given twice for op {op_name!r}")
        obj = load_object(target.strip())
        problem = OPS[op_name].candidate_problem(obj)
        if problem:
            raise CandidateError(f"--conformance-impl {value!r}: {problem}; "
                                 f"{op_name} needs {OPS[op_name].candidate_contract}")
        candidates[op_name] = (target.strip(), obj)
    return candidates
