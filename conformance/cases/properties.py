"""The generated properties: the generic checks by property name (:data:`CHECKS`: the checks of
:mod:`conformance.cases.checks`, :mod:`~conformance.cases.input_layouts`,
:mod:`~conformance.cases.lifecycles` and :mod:`~conformance.cases.complex_dtypes`), and each
property an op record declares (``Op.properties``, a ``GeneratedProperty``), bound to its check
(:func:`property_of`), in :data:`PROPERTIES`."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

from dataclasses import replace

from conformance.backends.base import COMPILED_AGREES, PATHS_AGREE
from conformance.cases.checks import (PARAM_GROUPS, flat_outputs, grouped_runs,
                                      is_torch_path, check_agrees_with_reference, check_configuration, check_deterministic,
                                      check_param_groups, check_paths_agree, check_rejects_invalid,
                                      check_sizes, check_sparse_equals_dense,
                                      check_state_dict_resume, check_unspecified_unchanged, observe_param_groups)
from conformance.cases.complex_dtypes import COMPLEX_AGREES, SUPPORTS_COMPLEX, check_complex_agrees
from conformance.cases.grad_scaling import GRAD_SCALING, SUPPORTS_GRAD_SCALING, check_grad_scaling
from conformance.cases.input_layouts import layout_cases, check_layout_invariant
from conformance.cases.lifecycles import LIFECYCLE, check_lifecycle, observe_lifecycle
from conformance.cases.rounds_correctly import check_rounds_correctly
from conformance.cases.trial import Property, unbound
from conformance.core.dtypes import HALF_DTYPES
from conformance.ops import OPS
from conformance.ops.base import LAYOUT_INVARIANT, SIZES
from conformance.ops.optimizers.configurations import CONFIGURATIONS
from conformance.ops.optimizers.inputs import OptimizerInputs, ParamGroupsInputs
from conformance.ops.optimizers.reference import densified

if TYPE_CHECKING:  # annotations only: records are found in the OPS registry
    from conformance.ops.base import GeneratedProperty, Op


# ---------------------------------------------------------------- the generic checks, by property name

class _PathTwin(Property):
    """A property whose items are the torch path backends' only (:func:`is_torch_path`)."""

    def accepts(self, backend) -> bool:
        return is_torch_path(backend) and super().accepts(backend)


def _member_cases(inputs: ParamGroupsInputs, dtype: str):
    return [(f"param-{index}", member) for index, member in enumerate(inputs.members)]


def _dense_cases(inputs: OptimizerInputs, dtype: str):
    return [("sparse", inputs), ("densified", densified(inputs, dtype))]




# a generic check is a Property of no op yet (trial.unbound); property_of binds it to an op's declaration
CHECKS: Mapping[str, Property] = MappingProxyType({
    "agrees-with-reference": unbound(check_agrees_with_reference, skips_oracle=True),
    # the optimizers' long trajectories: the same check, on candidates only (a candidate is what may round a
    # hyperparameter once per step; the built-in backends are stock torch, whose items would cost the main job)
    "long-trajectory": unbound(check_agrees_with_reference, skips_oracle=True, candidates_only=True),
    # the optimizers' configuration spaces, covered pairwise (conformance/ops/optimizers/configurations.py)
    CONFIGURATIONS: unbound(check_configuration, skips_oracle=True),
    "rounds-correctly": unbound(check_rounds_correctly, skips_oracle=True, dtypes=HALF_DTYPES),
    "rejects-invalid": unbound(check_rejects_invalid, judges_values=False),
    # the suite's own backends are stock torch and its documented idioms: their determinism is torch's
    # (and the main job's minute); a candidate is what may hold a race or an uninitialised buffer
    "deterministic": unbound(check_deterministic, skips_oracle=True, candidates_only=True),
    "unspecified-unchanged": unbound(check_unspecified_unchanged),
    "sparse-equals-dense": unbound(check_sparse_equals_dense, to_cases=_dense_cases),
    PARAM_GROUPS: unbound(check_param_groups, to_cases=_member_cases,
                          needs_optimizer_object=True, observe=observe_param_groups),
    # the twins of torch's own code paths: on the torch path backends only (foreach, fused), against torch's
    # for-loop step on the same inputs
    PATHS_AGREE: _PathTwin("", "", "", None, check_paths_agree, skips_oracle=True),
    # the step under torch.compile (backends/compiled.py) against the same step run eagerly, the same check
    COMPILED_AGREES: _PathTwin("", "", "", None, check_paths_agree, skips_oracle=True),
    LIFECYCLE: unbound(check_lifecycle, needs_optimizer_object=True,
                       to_cases=lambda example, dtype: [(f"lifecycle: {example.events()}", example)],
                       observe=lambda trial, example: observe_lifecycle(trial, example)),
    COMPLEX_AGREES: unbound(check_complex_agrees, needs_optimizer_object=True),
    SIZES: unbound(check_sizes, skips_oracle=True),
    GRAD_SCALING: unbound(check_grad_scaling, needs_optimizer_object=True, needs_grad_scaling=True),
    LAYOUT_INVARIANT: unbound(check_layout_invariant, to_cases=layout_cases, skips_oracle=True,
                              layouts_of=lambda example: example[1]),
    "state-dict-resume": unbound(check_state_dict_resume,
                                 to_cases=lambda example, dtype: _member_cases(example[0], dtype),
                                 needs_optimizer_object=True,
                                 observe=lambda trial, example: flat_outputs(trial.op,
                                                                              grouped_runs(trial, *example)[0])),
})


# properties a candidate is judged on only where its class declares the attribute (True): otherwise its items
# are unsupported, the reason naming the attribute (most hand-written optimizers take real parameters only, and
# only torch's fused steps take GradScaler's grad_scale/found_inf)
OPT_IN: Mapping[str, str] = MappingProxyType({COMPLEX_AGREES: SUPPORTS_COMPLEX,
                                              GRAD_SCALING: SUPPORTS_GRAD_SCALING})


def opted_out(record: dict) -> bool:
    """A results record of a candidate item that is unsupported because the candidate did not opt in."""
    return record.get("outcome") == "unsupported" and any(
        (record.get("case") or "").endswith(f"-{prop}") and attribute in (record.get("message") or "")
        for prop, attribute in OPT_IN.items())


# ---------------------------------------------------------------- the declared properties


def _no_examples(dtype: str) -> list:
    return []


def property_of(op: Op, declared: GeneratedProperty) -> Property:
    """The runnable property an op record declares: its own check, or the generic one of that name
    (:data:`CHECKS`), bound to the declaration's op, name, summary,
    strategy and explicit examples. The declaration's ``skip_backends`` add to the check's, its
    ``dtypes`` and ``to_cases`` (where given) replace the check's."""
    examples = declared.examples
    if examples is None:
        examples = op.explicit_examples if declared.strategy == op.drawing(op.strategies.inputs) else _no_examples
    check = unbound(declared.check) if declared.check is not None else CHECKS.get(declared.name)
    if check is None:
        raise ValueError(f"op {op.name!r} declares property {declared.name!r} without a check, and no generic "
                         f"check has that name (known: {', '.join(CHECKS)})")
    return replace(check, op=op.name, name=declared.name, summary=declared.summary, strategy=declared.strategy,
                   examples=examples, skip_backends=(*check.skip_backends, *declared.skip_backends),
                   dtypes=declared.dtypes or check.dtypes, to_cases=declared.to_cases or check.to_cases,
                   max_examples=declared.max_examples or check.max_examples)


PROPERTIES: tuple[Property, ...] = tuple(property_of(op, declared) for op in OPS.values()
                                         for declared in op.all_properties())
