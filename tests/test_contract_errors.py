"""Contract errors named as contract errors (issue 23, point 6): a candidate whose numbers are right
but whose result is of the wrong type (a sparse gradient, a dense coalesce), device
or shape, or that rewrites its input, gets a ``failed`` item whose message is one line naming the
clause -- never an error with a traceback from the harness (``conformance/core/tensors.py:to_numpy``)."""

from __future__ import annotations

import pytest

from conformance_runs import REPO, load, run_inprocess

BREAKERS = "tests/candidates/contract_breakers.py"

CASES = {  # candidate: (op, the case it runs, the clause and detail its message must name)
    "masked_mean_sparse_grad": (
        "masked_mean", "mean-of-valid-entries",
        "contract violated (masked_mean: the gradient values.grad is a plain (strided) torch.Tensor or a MaskedTensor of "
        "values' shape, dtype and device): got a sparse_coo Tensor"),
    "masked_mean_masked_tensor_not_reduced": (
        "masked_mean", "mean-of-valid-entries",
        "contract violated (masked_mean: the result is a 0-d tensor): got a MaskedTensor of shape [2, 2]"),
    "masked_mean_on_meta": (
        "masked_mean", "mean-of-valid-entries",
        "contract violated (masked_mean: the result is on values' device): got meta, values are on cpu"),
    "masked_mean_of_shape_1": (
        "masked_mean", "mean-of-valid-entries",
        "contract violated (masked_mean: the result is a 0-d tensor): got shape [1]"),
    "masked_mean_filling_values": (
        "masked_mean", "mean-of-valid-entries",
        "contract violated (masked_mean: the input values is left unchanged): its values were changed"),
    "coalesce_to_dense": (
        "coalesce", "basic-2x3",
        "contract violated (coalesce: the result is a sparse COO torch.Tensor): got a strided Tensor"),
    "coalesce_on_meta": (
        "coalesce", "basic-2x3",
        "contract violated (coalesce: the result is on the input's device): got meta, the input is on cpu"),
    "SparseStateAdagrad": (
        "adagrad", "tutorial-step-1",
        "contract violated (adagrad: state tensors are plain (strided) torch.Tensors): state_sum (state key 'sum'): "
        "got a sparse_coo Tensor"),
    "StepAttributeRefusingAdagrad": (  # its __setattr__ dropped the harness's wrapped step(): it passed
        "adagrad", "tutorial-step-1",
        "contract violated (adagrad: step() leaves param.grad, the gradient the harness set): step() replaced "
        "param.grad with another tensor"),
    "RowStateAdagrad": (
        "adagrad", "tutorial-step-1",
        "contract violated (adagrad: the state tensor state_sum has the parameter's shape): got [1, 2, 4], the "
        "parameter is [2, 4]"),
}


@pytest.mark.parametrize("candidate", sorted(CASES))
def test_a_contract_breach_fails_with_one_line_naming_the_clause(candidate):
    op, case, message = CASES[candidate]
    code, path = run_inprocess(f"contract-{candidate}", str(REPO / "specs" / f"{op}.yaml"), "--conformance-backend",
                               "candidate", "--conformance-examples", "0", "--conformance-dtype", "float32",
                               "--conformance-impl", f"{op}={BREAKERS}:{candidate}", "-k", case)
    records = [r for r in load(path)["records"] if r["case"] == case]
    assert code == 1 and len(records) == 1, (code, records)
    record = records[0]
    assert record["outcome"] == "failed", record  # a failed item, not a harness error
    assert record["message"].splitlines()[0] == message, record["message"]
    assert "Traceback" not in record["message"] and "to_numpy" not in record["message"]
