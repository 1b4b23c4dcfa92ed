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


def _one_check_per_op(planted):
    """The planted candidates in groups that one ``check`` can take (a candidate per op, as a user names
    several: ``check adagrad=... sgd=...``), the two of a dimension together where they are of two ops: 7
    runs instead of 11, each item and assertion the same (a check's candidates run only their own op's
    items, so the two do not meet)."""
    groups: list[list[tuple]] = []
    for entry in planted:
        group = next((g for g in groups if g[0][2] == entry[2] and all(e[0] != entry[0] for e in g)), None)
        if group is None:
            groups.append([entry])
        else:
            group.append(entry)
    return groups


GROUPS = _one_check_per_op(PLANTED)


def test_every_planted_candidate_is_in_one_group_and_a_group_has_one_candidate_per_op():
    assert sorted(entry for group in GROUPS for entry in group) == sorted(PLANTED)
    assert all(len({op for op, *_ in group}) == len(group) for group in GROUPS)
    assert len(GROUPS) == 7


@pytest.mark.acceptance  # conformance check at its default examples, a process per group of candidates
@pytest.mark.parametrize("group", GROUPS, ids=["+".join(target.split(":")[1] for _, target, _, _ in g) for g in GROUPS])
def test_check_at_its_defaults_fails_a_planted_input_space_mistake_and_names_the_dimension(tmp_path, group):
    here = tmp_path / "user"
    here.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    selected = " or ".join(f"{op}-{prop}" for op, _, prop, _ in group)
    proc = subprocess.run([sys.executable, "-m", "conformance", "check",
                           *[f"{op}={CANDIDATES / target}" for op, target, _, _ in group],
                           "--pytest-args", f"-k '{selected}'"],
                          cwd=here, env=env, capture_output=True, text=True, timeout=900)
    output = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 1 and "RESULT: FAIL" in proc.stdout, output
    records = [r for r in load(here / "reports" / "candidate.json")["records"] if r["backend"] == "candidate"]
    for op, target, prop, named in group:  # each candidate fails its own dimension's property, and only it
        failed = [r for r in records if r["op"] == op and r["outcome"] == "failed"]
        assert failed, (target, [(r["nodeid"], r["outcome"]) for r in records if r["op"] == op])
        assert all(r["case"] == f"{op}-{prop}" for r in failed), (target, [r["nodeid"] for r in failed])
        assert any(named in (r.get("message") or "") for r in failed), (target, failed[0]["message"][:3000])
