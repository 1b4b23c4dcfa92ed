"""Issue 41's planted candidates, two per dimension of the input space (layout, lifecycle, complex, size,
grad scaling): each is stock torch's optimizer but for one mistake of the kind its dimension exists for,
and ``conformance check`` at its default examples and seed, run from an empty directory outside the
clone, fails it with the failure naming the dimension (the layout, the lifecycle event, the dtype, the
size, the scaling case). Narrowed with -k to the property of that dimension (its other items are
torch's, and pass: the fast tier's tests run each mistake on the explicit examples)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conformance_runs import REPO, load

CANDIDATES = REPO / "tests" / "candidates"

PLANTED = [
    # (op, file:class, the property, what a failure of it names)
    ("adagrad", "layouts.py:StorageOrderGradAdagrad", "layout-invariant", "transposed"),
    ("sgd", "layouts.py:WritesPastTheViewSGD", "layout-invariant", "outside the view"),
    ("adagrad", "lifecycles.py:GlobalStepAdagrad", "lifecycle", "lifecycle ("),
    ("sgd", "lifecycles.py:CachedLrSGD", "lifecycle", "lr changed between steps"),
    ("adagrad", "complex_dtypes.py:AbsSquaredAdagrad", "complex-agrees", "complex"),
    ("sgd", "complex_dtypes.py:RealPartSGD", "complex-agrees", "complex"),
    ("adagrad", "sizes.py:VectorBodyOnlyAdagrad", "sizes", "size: a parameter of"),
    ("sgd", "sizes.py:OneBlockSGD", "sizes", "size: a parameter of"),
    ("adagrad", "sizes.py:BFloat16StepAdagrad", "long-trajectory", "steps"),
    ("adagrad", "grad_scaling.py:StepsThroughFoundInfAdagrad", "grad-scaling", "grad scaling (the first step skipped"),
    ("adagrad", "grad_scaling.py:IgnoresGradScaleAdagrad", "grad-scaling", "grad scaling (gradients scaled by 2"),
]


@pytest.mark.acceptance  # conformance check at its default examples, a process per candidate
@pytest.mark.parametrize("op, target, prop, named", PLANTED, ids=[target.split(":")[1] for _, target, _, _ in PLANTED])
def test_check_at_its_defaults_fails_a_planted_input_space_mistake_and_names_the_dimension(tmp_path, op, target,
                                                                                           prop, named):
    here = tmp_path / "user"
    here.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "conformance", "check", f"{op}={CANDIDATES / target}",
                           "--pytest-args", f"-k '{op}-{prop}'"],
                          cwd=here, env=env, capture_output=True, text=True, timeout=900)
    output = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 1 and "RESULT: FAIL" in proc.stdout, output
    records = [r for r in load(here / "reports" / "candidate.json")["records"] if r["backend"] == "candidate"]
    failed = [r for r in records if r["outcome"] == "failed"]
    assert failed, [(r["nodeid"], r["outcome"]) for r in records]
    assert all(r["case"] == f"{op}-{prop}" for r in failed), [r["nodeid"] for r in failed]
    assert any(named in (r.get("message") or "") for r in failed), failed[0]["message"][:3000]
