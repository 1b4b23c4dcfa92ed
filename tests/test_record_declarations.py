"""An op record is a declaration, ``Op(name=..., ...)``, checked as it is made (conformance/ops/declared.py): it
sets only the fields its kind declares, each of the declared kind (code: a function taking the default's
arguments, handed the record first where its first parameter is ``op``), consistent with each other, and is
frozen; a misspelt, mistyped or inconsistent field is a TypeError naming the record and the field
(tests/test_new_op.py: the documented new optimizer, and a misspelling of it)."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import numpy as np
import pytest

from conformance.core.tensors import TENSOR
from conformance.ops import OPS
from conformance.ops.base import FOREACH, Op, TorchPath
from conformance.ops.declared import InvalidRecord

SCHEMA = {"type": "object", "properties": {"param": TENSOR, "state_sum": TENSOR}}


def record(**fields):
    """An op record declared with ``fields`` (made, hence checked, here)."""
    return Op(**{"name": "toy", "expected_schema": SCHEMA, **fields})


def test_every_shipped_record_is_a_valid_declaration_of_a_kind_never_a_subclass_of_its_own():
    from conformance.ops.optimizers.base import OptimizerOp

    assert {"adagrad", "coalesce", "masked_mean", "sgd", "sparse_adam"} <= set(OPS)
    assert {name: type(op).__name__ for name, op in OPS.items()} == {
        "adagrad": "OptimizerOp", "coalesce": "Op", "masked_mean": "Op", "masked_mean_compiles": "Op",
        "sgd": "OptimizerOp", "sparse_adam": "OptimizerOp"}
    assert all(type(op) in (Op, OptimizerOp) and op.record_file.startswith("conformance/ops/")
               and op.record_file.endswith(f"/{name}.py") for name, op in OPS.items())  # where its counterexamples point
    record()  # the fields Op declares, at their kinds


@pytest.mark.parametrize("fields, message", [
    ({"exact_output": frozenset({"param"})}, r"op record 'toy' \(.*test_record_declarations.py\): 'exact_output' is not a field of an op record "
                                         r"\(did you mean 'exact_outputs'\?\)"),
    ({"repro_run": "optimizer"}, r"'repro_run' is not a field of an op record; the fields are declared in"),
    ({"exact_outputs": {"param"}}, r"'exact_outputs' is declared as a frozenset .* set to a set"),
    ({"rounding_sensitive": 1}, r"'rounding_sensitive' is declared as a bool .* set to an int"),
    ({"reference": {"param": 1.0}}, r"'reference' is code of an op record \(a function\); it is set to"),
    ({"reference": lambda: {}}, r"'reference' is called with \(inputs\), and handed the record first where its first "
                                r"parameter is 'op' \(op, inputs\); .*<lambda>\(\) takes neither"),
    ({"error_bounds": lambda op, inputs: {}}, r"'error_bounds' is called with \(inputs, dtype, sensitivity\)"),
    ({"name": ""}, r"'name' is the op's name, a non-empty str"),
    ({"state_outputs": {"exp_avg": "exp_avg"}}, r"state_outputs names 'exp_avg', which expected_schema has no output of"),
    ({"state_outputs": {"state_sum": "sum"}, "root_outputs": {"param": ("std", "eps", 1e-10)}},
     r"root_outputs\['param'\] is read from 'std', which is not one of its state_outputs \(state_sum\)"),
    ({"torch_paths": (TorchPath(FOREACH), TorchPath(FOREACH))}, r"torch_paths has 'foreach' twice"),
    ({"torch_paths": (TorchPath("jit"),)}, r"torch_paths has 'jit' \(a path is one of foreach, fused, compiled\)"),
    ({"torch_paths": (TorchPath(FOREACH, twins=("paths-agreee",)),)},
     r"the foreach path's twins have 'paths-agreee', not a twin property \(paths-agree, grad-scaling, compiled-agrees\)"),
    ({"dimensions_left_out": MappingProxyType({"layout": "why"})}, r"dimensions_left_out names 'layout', not one of"),
    ({"input_layouts": {"param": ("contiguous", "diagonal")}}, r"input_layouts\['param'\] has 'diagonal', not a layout"),
])
def test_a_field_no_base_declares_or_of_another_kind_or_inconsistent_is_refused_naming_it(fields, message):
    with pytest.raises(InvalidRecord, match=message):
        record(**fields)


def test_a_kind_of_record_declares_fields_of_its_own_and_a_record_is_frozen():
    @dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
    class ToyKind(Op):
        toy_field: int = 3

    assert ToyKind(name="toy", toy_field=4).toy_field == 4
    with pytest.raises(InvalidRecord, match="'toy_field' is declared as an int"):
        ToyKind(name="toy", toy_field="four")
    with pytest.raises(InvalidRecord, match="'toy_feld' is not a field of an op record \\(did you mean 'toy_field'"):
        ToyKind(name="toy", toy_feld=4)
    with pytest.raises(InvalidRecord, match="an op record's fields are keywords"):
        Op("toy")
    with pytest.raises(dataclasses.FrozenInstanceError):
        OPS["sgd"].summary = "changed"  # type: ignore[misc]


def test_code_is_called_as_the_records_method_handed_the_record_where_it_takes_op():
    """``reference=f``: ``op.reference(inputs)`` calls ``f(inputs)``; a function whose first parameter is ``op``
    is handed the record first, as OpInfo's sample_inputs_func is handed the OpInfo; references run quiet."""
    def doubled(inputs):
        return {"param": np.float64(inputs) * 2}

    def named(op, inputs):
        return {"param": np.float64(len(op.name) + inputs)}

    def divides_by_zero(inputs):
        return {"param": np.float64(1.0) / np.float64(inputs)}

    assert record(reference=doubled).reference(3)["param"] == 6
    assert record(reference=named).reference(1)["param"] == 4  # len("toy") + 1
    assert record(reference=divides_by_zero).reference(0)["param"] == np.inf  # no RuntimeWarning: quiet
    replaced = dataclasses.replace(record(reference=named), name="toys")
    assert replaced.reference(1)["param"] == 5 and replaced.record_file.endswith("test_record_declarations.py")


def test_every_registered_divergence_names_backends_ops_properties_and_dtypes_that_exist():
    """A registration names its places through what the registries declare: a misspelt backend, op, property
    or dtype would make it apply nowhere, silently (an item it was meant for would fail or pass unexplained)."""
    import conformance.cases.lowprec  # noqa: F401 - registers stock torch's half-precision arithmetic
    from conformance.backends import builtin_backends
    from conformance.core.divergences import _REGISTERED
    from conformance.core.dtypes import DTYPES

    declared = {"backends": set(builtin_backends()), "ops": set(OPS), "dtypes": set(DTYPES),
                "properties": {p.name for op in OPS.values() for p in op.all_properties()},
                "devices": {"cpu", "cuda", "xla"}}
    unknown = [(divergence.key, field, name) for divergence in _REGISTERED.values() for field, names in declared.items()
               for name in getattr(divergence, field) or () if name not in names]
    assert len(_REGISTERED) >= 25 and unknown == []
