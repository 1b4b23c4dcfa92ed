"""The generated properties: each property an op record declares (``Op.properties``, a
``GeneratedProperty``), bound to its check (:func:`property_of`), in :data:`PROPERTIES`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dataclasses import replace

from conformance.cases.checks import CHECKS
from conformance.cases.trial import Property, unbound
from conformance.ops import OPS

if TYPE_CHECKING:  # annotations only: records are found in the OPS registry
    from conformance.ops.base import GeneratedProperty, Op


def _no_examples(dtype: str) -> list:
    return []


def property_of(op: Op, declared: GeneratedProperty) -> Property:
    """The runnable property an op record declares: its own check, or the generic one of that name
    (:data:`conformance.cases.checks.CHECKS`), bound to the declaration's op, name, summary,
    strategy and explicit examples. The declaration's ``skip_backends`` add to the check's, its
    ``dtypes`` and ``to_cases`` (where given) replace the check's."""
    examples = declared.examples
    if examples is None:
        examples = op.explicit_examples if declared.strategy == op.inputs_strategy else _no_examples
    check = unbound(declared.check) if declared.check is not None else CHECKS.get(declared.name)
    if check is None:
        raise ValueError(f"op {op.name!r} declares property {declared.name!r} without a check, and no generic "
                         f"check has that name (known: {', '.join(CHECKS)})")
    return replace(check, op=op.name, name=declared.name, summary=declared.summary, strategy=declared.strategy,
                   examples=examples, skip_backends=(*check.skip_backends, *declared.skip_backends),
                   dtypes=declared.dtypes or check.dtypes, to_cases=declared.to_cases or check.to_cases,
                   max_examples=declared.max_examples or check.max_examples)


PROPERTIES: list[Property] = [property_of(op, declared) for op in OPS.values() for declared in op.all_properties()]
