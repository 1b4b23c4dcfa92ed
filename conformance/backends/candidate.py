"""``candidate``: a user's implementation of one op, given as ``OP=module:attr``, run as a
backend of its own through that op's candidate contract.

Every call is checked against the contract beyond the numbers (a violation is a
:class:`~conformance.core.compare.Mismatch`, outcome ``failed``, one line naming the clause:
``contract violated (<op>: <clause>): got ...``), before the harness reads any output. The clauses
are the op record's (``Op.watch_candidate`` wraps the candidate, ``Op.check_candidate_outputs``
reads what it returned: the result's layout, dtype, device and size, the tensors handed to it left
unchanged; every optimizer's in ``conformance/ops/optimizers/contract.py``); this backend adds that
the candidate works on its own copy of the decoded inputs, so a mutation cannot reach the reference
check or another item.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

from conformance.core.forks import leave_if_forked
from conformance.core.target import CandidateTarget, TargetError, parse_targets
from conformance.core.tensors import masked_tensor_refusal
from conformance.core.types import RunContext, Unsupported, exception_text
from conformance.backends.base import Backend, torch_kernels_missing_are_unsupported
from conformance.ops import OPS


class CandidateError(ValueError):
    """A ``--conformance-impl`` value that cannot be turned into a candidate backend."""


def load_object(target: CandidateTarget) -> Any:
    """Import the target's module (dotted, or a ``path/to/file.py``) and get its (dotted) attribute."""
    where = repr(target.target)
    if target.is_file:
        path = Path(target.module)
        if not path.is_file():
            raise CandidateError(f"{where}: no such file {path}")
        spec = importlib.util.spec_from_file_location(f"conformance_candidate_{path.stem}", path)
        assert spec is not None and spec.loader is not None  # (a .py file's: Python's source loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # sys.exit() or Ctrl-C in its import too
            raise CandidateError(f"{where}: importing {path} raised {exception_text(exc)}") from exc
    else:
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(target.module)
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # sys.exit() or Ctrl-C in its import too
            raise CandidateError(f"{where}: importing {target.module} raised {exception_text(exc)}") from exc
    obj: Any = module
    for part in target.attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CandidateError(f"{where}: {target.module} has no attribute {target.attribute!r}") from None
    return obj


class CandidateBackend(Backend):
    """Runs user-supplied implementations, one per op, through each op's candidate contract.

    Unlike the built-in backends it gets items only for the ops it was given.
    """

    lists_unimplemented_ops = False
    judged_against_torch = True
    takes_grad_scaling = True  # a candidate class says so itself (supports_grad_scaling; cases/grad_scaling.py)

    def __init__(self, name: str, candidates: dict[str, Any], description: str = ""):
        self.name = name
        self.description = description or "user-supplied implementation"
        self.candidates = dict(candidates)
        super().__init__({op: self._runner(op, obj) for op, obj in candidates.items()})

    def run(self, op: str, inputs: Any, ctx: RunContext) -> dict[str, Any]:
        # a candidate built on torch meets torch's missing kernels (float16 sparse adds on cpu): it
        # cannot run this example, as stock torch cannot
        with back_in_the_harness(), torch_kernels_missing_are_unsupported(ctx.device, "the candidate"), \
                masked_tensor_refusals_are_unsupported():
            return super().run(op, inputs, ctx)

    def drive_optimizer(self, op: str, ctx: RunContext, use):
        with back_in_the_harness(), torch_kernels_missing_are_unsupported(ctx.device, "the candidate"), \
                masked_tensor_refusals_are_unsupported():
            return super().drive_optimizer(op, ctx, use)

    def candidate(self, op: str) -> Any | None:
        return self.candidates.get(op)

    def optimizer_class(self, op: str):
        if op not in self.candidates or not OPS[op].is_optimizer:
            return None
        return OPS[op].watch_candidate(self.candidates[op])

    @staticmethod
    def _runner(op_name: str, candidate: Any):
        return checked_runner(op_name, candidate)


@contextlib.contextmanager
def back_in_the_harness():
    """A forked copy of the run's process that comes back from the candidate ends there
    (:func:`~conformance.core.forks.leave_if_forked`)."""
    try:
        yield
    finally:
        leave_if_forked()


@contextlib.contextmanager
def masked_tensor_refusals_are_unsupported():
    """A candidate written with ``torch.masked.MaskedTensor`` (torch's tutorials: a masked mean, an
    Adagrad) on what MaskedTensor itself cannot run -- a dtype it refuses (``torch.bfloat16 is not
    supported in MaskedTensor.``), an aten op it has no working implementation of for these tensors
    (:func:`~conformance.core.tensors.masked_tensor_refusal`): Unsupported with MaskedTensor's reason,
    and how a candidate says so itself. Any other exception, the candidate's own included, stays."""
    try:
        yield
    except Exception as exc:
        reason = masked_tensor_refusal(exc)
        if reason is None:
            raise
        raise Unsupported(f"{reason} (raised in torch.masked, which the candidate uses; a candidate declares what "
                          "it does not support by raising conformance.Unsupported(\"why\"), docs/candidates.md)") from exc


# ------------------------------------------------------------------ contract checks (the op records')


def checked_runner(op_name: str, candidate: Any) -> Callable[[Any, RunContext], dict[str, Any]]:
    """``run(inputs, ctx)``: the op's ``run_candidate`` on its own copy of the inputs, the candidate
    wrapped in the record's contract watch (``Op.watch_candidate``) and the outputs checked by the
    record (``Op.check_candidate_outputs``)."""
    op = OPS[op_name]

    def run(inputs: Any, ctx: RunContext):
        own = copy.deepcopy(inputs)  # the runner's inputs feed the reference check: keep them out of reach
        outputs = op.run_candidate(op.watch_candidate(candidate), own, ctx)
        op.check_candidate_outputs(outputs, ctx)
        return outputs

    return run


def load_candidates(targets: list[CandidateTarget], *, option: str = "--conformance-impl") -> dict[str, tuple[CandidateTarget, Any]]:
    """Each target's op checked against the records, its object imported and checked against the
    op's candidate contract: {op: (target, object)}, or a :class:`CandidateError` naming the value."""
    candidates: dict[str, tuple[CandidateTarget, Any]] = {}
    for target in targets:
        if target.op not in OPS:
            raise CandidateError(f"{option} {str(target)!r}: unknown op {target.op!r}; "
                                 f"known ops: {', '.join(sorted(OPS))}")
        if target.op in candidates:
            raise CandidateError(f"{option} given twice for op {target.op!r}")
        obj = load_object(target)
        problem = OPS[target.op].candidate_problem(obj)
        if problem:
            raise CandidateError(f"{option} {str(target)!r}: {problem}; "
                                 f"{target.op} needs {OPS[target.op].candidate_contract}")
        candidates[target.op] = (target, obj)
    return candidates


def parse_impl_options(values: list[str], *, option: str = "--conformance-impl") -> dict[str, tuple[CandidateTarget, Any]]:
    """``["adagrad=pkg.mod:MyAdagrad", ...]`` parsed (:func:`parse_targets`) and loaded (:func:`load_candidates`)."""
    try:
        targets = parse_targets(values)
    except TargetError as exc:
        raise CandidateError(f"{option} {exc}") from None
    return load_candidates(targets, option=option)
