"""A sixth op (a fourth optimizer), added the documented way (docs/architecture.md, "Adding an op"): in a copy
of the package, one record module under ``conformance/ops/optimizers/``, one ``specs/<op>.yaml``
with golden values derived by hand, and one runner entry in the backend that supports it besides
stock torch (``dense``; ``coo`` runs it through its record, with no entry). pytest on that spec
collects and judges its items on reference, coo and dense; a second spec with a wrong golden value
shows the items are judged against the spec (they fail, golden beside got). Nothing else of the
copy is touched: the discovery, the spec schema's op enum and the selection rules pick it up."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OP = "plain_sgd"

RECORD = '''"""``plain_sgd``: torch.optim.SGD with a learning rate only (a toy op of tests/test_new_op.py).

Contract: per step, at the entries the gradient specifies (duplicates summed), ``param -= lr * g``;
a negative learning rate raises ValueError. Outputs: ``param``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from conformance.ops import draw as d
from conformance.core.tensors import TENSOR
from conformance.ops.base import dtype_only
from conformance.ops.optimizers.base import OPTIMIZER_STRATEGIES, OptimizerOp
from conformance.ops.optimizers.inputs import OptimizerInputs, optimizer_inputs_schema
from conformance.ops.optimizers.reference import dense_grad_and_mask, trajectory_bounds
from conformance.ops.optimizers.strategies import NEGATIVE, drawn_inputs


def learning_rate(inputs: OptimizerInputs) -> float:
    lr = inputs.hyperparameters.get("lr", 1e-3)
    if lr < 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")
    return lr


def plain_sgd_reference(inputs: OptimizerInputs) -> dict[str, np.ndarray]:
    lr = learning_rate(inputs)
    param = inputs.param.astype(np.float64).copy()
    for grad in inputs.grads:
        g, mask = dense_grad_and_mask(grad, param.shape)
        param = np.where(mask, param - lr * g, param)
    return {"param": param}


def hyperparameters() -> Any:
    return st.fixed_dictionaries({"lr": d.learning_rates()})


@st.composite
def invalid_inputs(draw, dtype: str = "float64") -> OptimizerInputs:
    inputs = draw(drawn_inputs(OP, dtype, max_steps=2))
    return OptimizerInputs(inputs.param, inputs.grads, {"lr": draw(NEGATIVE)})


def plain_sgd_error_bounds(inputs: OptimizerInputs, dtype: str, sensitivity) -> dict[str, Any]:
    return trajectory_bounds(plain_sgd_reference, inputs, dtype, sensitivity)[0]


OP = OptimizerOp(
    name="plain_sgd",
    title="SGD",
    stock_backend="coo",
    summary="torch.optim.SGD steps with a learning rate only",
    candidate_contract="a torch.optim.Optimizer subclass with torch.optim.SGD's constructor",
    invalid_summary="a negative learning rate raises torch's ValueError",
    inputs_schema=optimizer_inputs_schema({"lr": {"type": "number"}}),
    expected_schema={"type": "object", "additionalProperties": False, "required": ["param"],
                     "properties": {"param": TENSOR}},
    strategies=replace(OPTIMIZER_STRATEGIES, hyperparameters=hyperparameters, invalid=dtype_only(invalid_inputs)),
    torch_implementation=torch.optim.SGD,
    reference=plain_sgd_reference,
    accepts_dense_steps=lambda hyperparameters: True,
    error_bounds=plain_sgd_error_bounds,
)
'''

SPEC = '''op: plain_sgd
title: torch.optim.SGD with a learning rate only
description: >-
  The SGD documentation's algorithm without momentum, weight decay or maximize, on sparse COO and
  dense gradients: only the entries a gradient specifies move, duplicates summed.
sources:
  sgd-docs:
    url: https://docs.pytorch.org/docs/stable/generated/torch.optim.SGD.html
    title: "torch.optim.SGD: theta_t = theta_{t-1} - gamma g_t"
defaults:
  source: sgd-docs
  dtypes: [float32, float64]
cases:
  - id: one-sparse-step
    description: a step moves only the specified entries, by lr * g
    derivation: "param(0) = 1 - 0.5 * 1 = 0.5; param(2) = 3 - 0.5 * 2 = 2; entries 1 and 3 are not specified"
    inputs:
      param: [1.0, 2.0, 3.0, 4.0]
      grads:
        - {indices: [[0, 2]], values: [1.0, 2.0], size: [4]}
      hyperparameters: {lr: 0.5}
    expected:
      param: [0.5, 2.0, 2.0, 4.0]

  - id: duplicates-summed
    description: an uncoalesced gradient writes entry 1 twice; both values are applied
    derivation: "g(1) = 1 + 3 = 4; param(1) = 2 - 0.25 * 4 = 1"
    inputs:
      param: [1.0, 2.0, 3.0, 4.0]
      grads:
        - {indices: [[1, 1]], values: [1.0, 3.0], size: [4]}
      hyperparameters: {lr: 0.25}
    expected:
      param: [1.0, 1.0, 3.0, 4.0]

  - id: sparse-then-dense
    description: a sparse step, then a dense one that moves every entry
    derivation: "step 1: param(3) = 4 - 0.5 * 2 = 3; step 2: every entry - 0.5 * 1: [0.5, 1.5, 2.5, 2.5]"
    inputs:
      param: [1.0, 2.0, 3.0, 4.0]
      grads:
        - {indices: [[3]], values: [2.0], size: [4]}
        - {dense: [1.0, 1.0, 1.0, 1.0]}
      hyperparameters: {lr: 0.5}
    expected:
      param: [0.5, 1.5, 2.5, 2.5]

  - id: negative-learning-rate
    description: the constructor rejects a negative learning rate
    inputs:
      param: [1.0]
      grads:
        - {indices: [[0]], values: [1.0], size: [1]}
      hyperparameters: {lr: -0.1}
    expected_error:
      type: ValueError
      match: "^Invalid learning rate: -0.1$"
'''

# the same first case with a wrong golden value: an item judged against the spec fails
WRONG_SPEC = SPEC.split("  - id: duplicates-summed")[0].replace("param: [0.5, 2.0, 2.0, 4.0]",
                                                                 "param: [0.5, 2.0, 2.5, 4.0]")

RUNNER = '''

def plain_sgd_dense(inputs: OptimizerInputs, ctx: RunContext):
    lr = inputs.hyperparameters.get("lr", 1e-3)
    if lr < 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")
    param = to_torch(inputs.param, ctx.dtype, ctx.torch_device)
    for grad in inputs.grads:
        g, mask, _ = step_gradient(grad, param, ctx)
        param = torch.where(mask, param - lr * g, param)
    return {"param": param}
'''


def _add_dense_runner(dense: Path) -> None:
    """The dense backend's runner entry: a runner function and its line in the backend's table."""
    text = dense.read_text(encoding="utf-8")
    head, sep, table = text.partition("\n\nclass DenseBackend(Backend):")
    assert sep and '    "sgd": sgd_dense,\n' in table
    table = table.replace('    "sgd": sgd_dense,\n', '    "sgd": sgd_dense,\n    "plain_sgd": plain_sgd_dense,\n')
    dense.write_text(head.rstrip("\n") + "\n" + RUNNER + "\n" + sep + table, encoding="utf-8")


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _changed(copy: Path) -> set[str]:
    """The files of the copy that are new or differ from the repository's."""
    changed = set()
    for name in _tree(copy):
        original = ROOT / name
        if not original.is_file() or not filecmp.cmp(original, copy / name, shallow=False):
            changed.add(name)
    return changed


@pytest.mark.slow  # child interpreters on a copy of the package
def test_a_fourth_optimizer_touches_its_record_its_spec_and_a_runner(tmp_path):
    shutil.copytree(ROOT / "conformance", tmp_path / "conformance", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    (tmp_path / "conformance/ops/optimizers" / f"{OP}.py").write_text(RECORD, encoding="utf-8")
    (tmp_path / "specs" / f"{OP}.yaml").write_text(SPEC, encoding="utf-8")
    _add_dense_runner(tmp_path / "conformance/backends/dense.py")
    assert _changed(tmp_path) == {f"conformance/ops/optimizers/{OP}.py", f"specs/{OP}.yaml",
                                  "conformance/backends/dense.py"}
    (tmp_path / "wrong").mkdir()  # outside specs/: the copy's specs stay as the recipe leaves them
    (tmp_path / "wrong" / f"{OP}.yaml").write_text(WRONG_SPEC, encoding="utf-8")

    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    found = subprocess.run(
        [sys.executable, "-c", "import json, conformance.ops as o; from conformance.specs.load import spec_schema; "
         "from conformance.results.selection import select_ops; "
         f"print(json.dumps([o.__file__, o.OPS[{OP!r}].is_optimizer, spec_schema()['properties']['op']['enum'], "
         f"sorted(select_ops(['conformance/ops/optimizers/{OP}.py']).ops)]))"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr
    where, is_optimizer, enum, selected = json.loads(found.stdout)
    assert Path(where).is_relative_to(tmp_path) and is_optimizer
    assert OP in enum and OP in selected  # (its name also holds sgd's: sgd's rule, **/*sgd*, selects sgd too)

    results = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", f"specs/{OP}.yaml", f"wrong/{OP}.yaml", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-q", "--conformance-device", "cpu", "--conformance-backend", "reference,coo,dense",
         "--conformance-results", str(results)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    records = json.loads(results.read_text())["records"]
    good = [r for r in records if r["spec"] == f"specs/{OP}.yaml"]
    wrong = [r for r in records if r["spec"] == f"wrong/{OP}.yaml"]
    # 4 cases x 2 dtypes x reference, coo, dense
    assert len(good) == 24 and {r["op"] for r in good} == {OP}, run.stdout[-3000:]
    assert {r["backend"] for r in good} == {"reference", "coo", "dense"}
    assert all(r["outcome"] == "passed" for r in good), [(r["nodeid"], r["outcome"], r["message"]) for r in good
                                                         if r["outcome"] != "passed"]
    assert len(wrong) == 6 and all(r["outcome"] == "failed" for r in wrong), run.stdout[-3000:]
    assert all(r["message"].startswith("param differs from the golden values") for r in wrong)
    assert run.returncode == 1  # the wrong golden value's items, and only them


def _define(record: str) -> None:
    """Run a record module's text in this process (its declaration is made and checked, not discovered)."""
    exec(compile(record, "<the record of tests/test_new_op.py>", "exec"), {"__name__": "plain_sgd_record"})


def test_the_record_is_checked_as_it_is_declared_and_a_misspelt_field_fails_naming_it():
    from conformance.ops.declared import InvalidRecord

    _define(RECORD)  # the record as documented is a valid declaration
    with pytest.raises(InvalidRecord, match=r"op record 'plain_sgd' \(plain_sgd_record.py\): 'sumary' is not a field of an "
                                             r"op record \(did you mean 'summary'\?\)"):
        _define(RECORD.replace("    summary=", "    sumary="))
    with pytest.raises(InvalidRecord, match=r"'title' is declared as a str .* set to a list: \['SGD'\]"):
        _define(RECORD.replace('title="SGD"', 'title=["SGD"]'))
    with pytest.raises(InvalidRecord, match=r"state_outputs names 'momentum', which expected_schema has no output of"):
        _define(RECORD.replace('    summary=', '    state_outputs={"momentum": "momentum_buffer"},\n    summary='))
    with pytest.raises(InvalidRecord, match=r"'error_bounds' is called with \(inputs, dtype, sensitivity\)"):
        _define(RECORD.replace("def plain_sgd_error_bounds(inputs: OptimizerInputs, dtype: str, sensitivity)",
                               "def plain_sgd_error_bounds(inputs: OptimizerInputs, dtype: str)"))
