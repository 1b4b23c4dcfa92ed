"""A masked mean written with ``torch.masked.MaskedTensor`` is judged like any candidate (issue 43,
item 2): its MaskedTensor result and the MaskedTensor gradient autograd delivers are read at their
specified entries, so the tutorial's mean passes and a numel mean fails with "numel instead of count"
named; a dtype MaskedTensor itself refuses (bfloat16) is unsupported with MaskedTensor's reason and a
hint naming ``conformance.Unsupported`` (tests/candidates/masked_tensor.py, docs/candidates.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from functools import lru_cache

import pytest
import torch

from conformance.core.tensors import masked_tensor_refusal
from conformance_runs import REPO, load, run_inprocess

MASKED = "tests/candidates/masked_tensor.py"
DTYPES = ("float16", "bfloat16", "float32", "float64")
# the spec cases where dividing by numel changes the value or the gradient (all-valid has count ==
# numel; with no valid entry the masked sum is masked out: the undefined mean, and no gradient)
NUMEL_CHANGES = {"mean-of-valid-entries", "nan-and-inf-under-the-mask", "negative-inf-under-the-mask-3d",
                 "single-valid-entry", "nan-at-a-valid-entry", "inf-at-a-valid-entry",
                 "inf-and-minus-inf-at-valid-entries"}


@lru_cache(maxsize=None)
def candidate_records(candidate: str, *args: str) -> tuple[int, tuple[dict, ...]]:
    code, path = run_inprocess(f"masked-tensor-{candidate}-{abs(hash(args))}", *args, "--conformance-backend",
                               "candidate", "--conformance-impl", f"masked_mean={MASKED}:{candidate}")
    assert path.exists(), f"the run with {candidate} wrote no results file (exit code {code})"
    return code, tuple(r for r in load(path)["records"] if r["backend"] == "candidate")


def every_item(candidate: str):
    """Every masked_mean spec case on the four dtypes, and every generated property in float32 (2 examples
    each; the slow test below runs `conformance check`, every item on every dtype)."""
    return candidate_records(candidate, str(REPO / "specs"), "--conformance-op", "masked_mean",
                             "--conformance-examples", "2", "-k", "not generated or float32")


@pytest.mark.slow
def test_the_tutorials_masked_tensor_mean_passes_every_item_it_supports():
    # as_masked_tensor(values, mask).mean().get_data(): values.grad arrives as a MaskedTensor, read at the
    # mask's entries (its data is 1/count at the masked-out ones too, which must not be read)
    code, records = every_item("masked_tensor_mean")
    assert code == 0, [(r["nodeid"], r["outcome"], r.get("message")) for r in records if r["outcome"] != "passed"]
    supported = [r for r in records if r["dtype"] != "bfloat16"]
    assert {r["outcome"] for r in supported} == {"passed"}, supported
    for dtype in ("float16", "float32", "float64"):
        cases = {r["case"] for r in supported if r["dtype"] == dtype and not r.get("generated")}
        assert len(cases) == 9 and {"no-valid-entry", "mean-of-valid-entries"} <= cases, cases
    generated = {r["case"] for r in supported if r.get("generated")}
    assert {"masked_mean-grad-zero-outside-mask", "masked_mean-agrees-with-reference",
            "masked_mean-ignores-masked-out", "masked_mean-layout-invariant"} <= generated, generated


def test_bfloat16_is_unsupported_with_masked_tensors_reason_and_a_hint():
    _, records = every_item("masked_tensor_mean")
    bfloat16 = [r for r in records if r["dtype"] == "bfloat16"]
    assert len(bfloat16) == 9, bfloat16  # the spec cases
    for record in bfloat16:
        assert record["outcome"] == "unsupported", record
        assert "MaskedTensor refuses it: torch.bfloat16 is not supported in MaskedTensor." in record["message"], record
        assert 'conformance.Unsupported("why")' in record["message"], record


def test_a_masked_tensor_result_is_read_at_its_specified_entries():
    # the 0-d MaskedTensor itself, no get_data(): with no valid entry its mask is False, the undefined mean
    code, records = candidate_records("masked_tensor_mean_unwrapped", str(REPO / "specs" / "masked_mean.yaml"),
                                      "--conformance-dtype", "float32,float64")
    assert code == 0 and len(records) == 18, [(r["nodeid"], r["outcome"], r.get("message")) for r in records]
    assert {r["outcome"] for r in records} == {"passed"}


def test_a_numel_masked_tensor_mean_fails_with_its_cause_named():
    code, records = candidate_records("masked_tensor_numel_mean", str(REPO / "specs" / "masked_mean.yaml"),
                                      "--conformance-dtype", "float32")
    assert code == 1
    failed = {r["case"]: r for r in records if r["outcome"] == "failed"}
    assert set(failed) == NUMEL_CHANGES, {r["case"]: r["outcome"] for r in records}
    assert {r["outcome"] for r in records if r["case"] not in NUMEL_CHANGES} == {"passed"}
    for record in failed.values():
        assert record["looks_like"]["name"] == "numel instead of count", record
        assert "looks like: numel instead of count" in record["message"], record["message"]
        assert "contract violated" not in record["message"], record["message"]


def _raised(function) -> BaseException:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            function()
        except Exception as exc:  # noqa: BLE001 - the exception is what is looked at
            return exc
    raise AssertionError("nothing was raised")


def test_only_what_masked_tensor_itself_cannot_run_is_its_refusal():
    from torch.masked import as_masked_tensor

    values = torch.ones(2, dtype=torch.bfloat16)
    refused = _raised(lambda: as_masked_tensor(values, torch.ones(2, dtype=torch.bool)))
    assert masked_tensor_refusal(refused) == "MaskedTensor refuses it: torch.bfloat16 is not supported in MaskedTensor."

    # an empty (0, 1) tensor with strides (0, 0), as one made from NumPy has: torch 2.13's MaskedTensor backward
    # raises in its new_empty_strided
    empty = torch.zeros(0, 1).as_strided((0, 1), (0, 0)).requires_grad_(True)
    broken = _raised(lambda: as_masked_tensor(empty, torch.zeros(0, 1, dtype=torch.bool)).mean().get_data().backward())
    assert masked_tensor_refusal(broken).startswith("MaskedTensor cannot run this input: its aten.new_empty_strided")

    # the candidate's own mistakes stay its own: a float mask handed to MaskedTensor, its own TypeError
    misuse = _raised(lambda: as_masked_tensor(torch.ones(2), torch.ones(2)))
    assert "mask must have dtype bool" in str(misuse) and masked_tensor_refusal(misuse) is None

    def own():
        raise TypeError("float16 is not supported in MaskedTensor.")

    assert masked_tensor_refusal(_raised(own)) is None


@pytest.mark.slow  # two `conformance check` runs in child processes, from a folder outside the clone
def test_check_from_a_users_folder_passes_the_masked_tensor_mean_and_fails_its_numel_variant(tmp_path):
    shutil.copy(REPO / MASKED, tmp_path / "my_mean.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}

    def check(function: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "conformance", "check", f"masked_mean=my_mean.py:{function}",
                               "--examples", "5", "--workers", "1"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    right = check("masked_tensor_mean")
    assert right.returncode == 0, right.stdout[-3000:] + right.stderr[-3000:]
    assert "RESULT: PASS (" in right.stdout and "failed" not in right.stdout.split("RESULT: PASS")[1].splitlines()[0]
    wrong = check("masked_tensor_numel_mean")
    assert wrong.returncode == 1, wrong.stdout[-3000:] + wrong.stderr[-3000:]
    assert "RESULT: FAIL (" in wrong.stdout
    assert "looks like: numel instead of count" in wrong.stdout
    assert "contract violated" not in wrong.stdout
