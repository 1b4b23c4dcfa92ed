"""Every tolerance is built in one module, conformance/core/tolerances.py (issue 42, item 3): the op
records declare their error bounds as data, no record calls back into the harness, and no other
module makes a tolerance of its own."""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from conformance.core import tolerances
from conformance.core.dtypes import Tolerance
from conformance.core.tensors import CooArray
from conformance.core.tolerances import ErrorBound
from conformance.ops import OPS

PACKAGE = Path(__file__).resolve().parents[1] / "conformance"
HOME = "core/tolerances.py"
# where else a Tolerance value may be written out: the value type and the dtypes' facts (assert_close's
# defaults, the agreement tolerance), and a spec file's declared tolerance read as written
VALUES = {"core/dtypes.py", "specs/load.py"}
# attributes only the tolerance module reads or calls: the records' declared bounds and the dtype facts
# a tolerance is made of, and Tolerance.scaled
HOME_ONLY = {"error_bounds", "reference_error_bound", "default_tolerance", "agreement_tolerance", "scaled"}


def _uses() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Tolerance" \
                    and where not in VALUES | {HOME}:
                found.append((where, node.lineno, "Tolerance(...)"))
            elif isinstance(node, ast.Attribute) and node.attr in HOME_ONLY and where != HOME:
                found.append((where, node.lineno, f".{node.attr}"))
    return found


def test_no_module_but_the_tolerance_module_builds_a_tolerance():
    assert _uses() == [], "tolerances are built in conformance/core/tolerances.py only"


def test_the_check_sees_a_tolerance_built_elsewhere(tmp_path, monkeypatch):
    """The check above is not vacuous: a module that scales a default, or writes a Tolerance, is caught."""
    me = sys.modules[__name__]
    (tmp_path / "judging").mkdir()
    (tmp_path / "judging" / "x.py").write_text("def f(op, t, i):\n    return t.scaled(op.reference_error_bound(i))\n"
                                               "def g():\n    return Tolerance(0.0, 0.0)\n")
    monkeypatch.setattr(me, "PACKAGE", tmp_path)
    assert sorted(use[2] for use in me._uses()) == [".reference_error_bound", ".scaled", "Tolerance(...)"]


def test_a_bound_is_never_below_the_default_and_its_beyond_floor_part_adds_to_it():
    floor = tolerances.default("float32")
    made = tolerances._from_bounds("float32", {"a": ErrorBound(0.0, 0.0, 1e-3), "b": ErrorBound(1.0, 2.0), "c": None})
    assert made == {"a": Tolerance(floor.rtol, floor.atol + 1e-3), "b": Tolerance(1.0, 2.0), "c": None}


def test_the_rounding_sensitivity_is_computed_only_for_a_record_that_reads_it():
    """coalesce's bounds never read it: its half-precision model is not run for them; an optimizer's
    record receives the values (a dict), not a function to call back."""
    coalesce = dataclasses.replace(OPS["coalesce"], half_precision_model=lambda *args: pytest.fail(
        "coalesce's bounds do not read the rounding sensitivity"))
    coo = CooArray(np.array([[0, 0, 1]]), np.array([1.0, 2.0, 3.0]), (2,))
    assert not coalesce.rounding_sensitive
    assert tolerances.generated(coalesce, coo, "float16")["values"] is not None

    from conformance.ops.optimizers import OptimizerInputs

    seen = []
    real = OPS["adagrad"].error_bounds
    adagrad = dataclasses.replace(OPS["adagrad"], error_bounds=lambda inputs, dtype, sensitivity: seen.append(
        sensitivity) or real(inputs, dtype, sensitivity))
    inputs = OptimizerInputs(np.array([1.0, -2.0]), [CooArray(np.array([[0, 0]]), np.array([0.5, 0.25]), (2,))],
                             {"lr": 0.5})
    assert adagrad.rounding_sensitive
    tolerances.generated(adagrad, inputs, "bfloat16")
    assert isinstance(seen[0], dict) and set(seen[0]) >= {"param"}
