"""The complex dimension of the optimizers' input space (the property complex-agrees): torch's optimizers on
complex64/complex128 parameters against themselves on torch.view_as_real, torch's refusal where it documents
one, torch's sparse Adagrad divergence, planted candidates failing with the dtype named. In process."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.backends import builtin_backends
from conformance.backends.candidate import CandidateBackend
from conformance.cases.complex_dtypes import check_complex_agrees
from conformance.cases.trial import DivergenceObserved, Trial
from conformance.core.tensors import CooArray
from conformance.core.types import Mismatch
from conformance.ops import OPS
from conformance.ops.optimizers.inputs import OptimizerInputs

from candidates.complex_dtypes import AbsSquaredAdagrad, RealPartSGD


@pytest.mark.parametrize("op, backend, dtype", [("adagrad", "coo", "float32"), ("sgd", "coo", "float64"),
                                                ("sgd", "foreach", "float32"), ("sparse_adam", "coo", "float32")])
def test_stock_torch_takes_complex_parameters_as_pairs_of_reals_or_refuses_them_as_documented(op, backend, dtype):
    trial = Trial(OPS[op], builtin_backends()[backend], "cpu", dtype)
    for example in OPS[op].complex_examples(dtype):
        check_complex_agrees(trial, example)  # sparse_adam: torch's ValueError, and the backend's the same


def test_a_backend_that_steps_what_torch_refuses_fails():
    trial = Trial(OPS["sparse_adam"], CandidateBackend("candidate", {"sparse_adam": RealPartSGD}), "cpu", "float32")
    with pytest.raises(Mismatch, match="complex64: (steps complex parameters, where torch refuses them|raises)"):
        check_complex_agrees(trial, OPS["sparse_adam"].complex_examples("float32")[0])


def test_torchs_sparse_adagrad_on_a_complex_parameter_is_its_recorded_divergence():
    inputs = OptimizerInputs(np.array([[1.0, 1.0]]), [CooArray(np.array([[0]]), np.array([[1.0, 1.0]]), (1, 2))] * 2,
                             {"lr": 1.0, "eps": 1e-10})
    with pytest.raises(DivergenceObserved) as observed:
        check_complex_agrees(Trial(OPS["adagrad"], builtin_backends()["coo"], "cpu", "float32"), inputs)
    assert observed.value.divergence.key == "torch-adagrad-sparse-complex"


@pytest.mark.parametrize("op, candidate, dtype", [("adagrad", AbsSquaredAdagrad, "float32"),
                                                  ("sgd", RealPartSGD, "float64")])
def test_a_planted_complex_mistake_fails_and_names_the_dtype(op, candidate, dtype):
    trial = Trial(OPS[op], CandidateBackend("candidate", {op: candidate}), "cpu", dtype)
    with pytest.raises(Mismatch) as failed:
        check_complex_agrees(trial, OPS[op].complex_examples(dtype)[0])
    name = {"float32": "complex64", "float64": "complex128"}[dtype]
    assert str(failed.value).startswith(f"{name}: "), failed.value


def test_complex_parameters_are_judged_by_behaviour_not_by_declaration():
    """Issue 50, item 3: a subclass of torch's optimizer that says nothing starts from torch's capability and is
    held to it (a wrong result fails); supports_complex = False says no; any other candidate that says nothing
    is written for real parameters and not judged on complex ones (unsupported, naming the attribute)."""
    import torch

    from conformance.core.types import Unsupported

    example = OPS["adagrad"].complex_examples("float32")[0]

    def trial(candidate):
        return Trial(OPS["adagrad"], CandidateBackend("candidate", {"adagrad": candidate}), "cpu", "float32")

    class QuietSubclass(torch.optim.Adagrad):
        pass

    check_complex_agrees(trial(QuietSubclass), example)  # torch's own step: judged, and right

    class QuietWrongSubclass(AbsSquaredAdagrad):  # the planted mistake, its declaration taken away
        supports_complex = None

    with pytest.raises(Mismatch, match="^complex64: "):
        check_complex_agrees(trial(QuietWrongSubclass), example)

    class SaysNo(torch.optim.Adagrad):
        supports_complex = False

    with pytest.raises(Unsupported, match="declares supports_complex = False"):
        check_complex_agrees(trial(SaysNo), example)

    class RealOnly(torch.optim.Optimizer):  # not torch's Adagrad and says nothing: written for real parameters
        def __init__(self, params, **hyperparameters):
            super().__init__(params, hyperparameters)

        def step(self, closure=None):
            raise AssertionError("never run on complex parameters")

    with pytest.raises(Unsupported, match="does not declare supports_complex = True"):
        check_complex_agrees(trial(RealOnly), example)
