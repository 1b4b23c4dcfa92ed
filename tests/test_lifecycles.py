"""The lifecycle dimension of the optimizers' input space (the property lifecycle, conformance/cases/checks.py):
stock torch's paths pass their explicit lives, planted candidates fail with the event named. In process."""

from __future__ import annotations

import pytest

from conformance.backends import builtin_backends
from conformance.backends.candidate import CandidateBackend
from conformance.cases.lifecycles import check_lifecycle
from conformance.cases.trial import Trial
from conformance.core.types import Mismatch
from conformance.ops import OPS

from candidates.lifecycles import CachedLrSGD, GlobalStepAdagrad


@pytest.mark.parametrize("op, backend", [("adagrad", "coo"), ("adagrad", "fused"), ("sgd", "foreach"),
                                         ("sparse_adam", "coo"), ("sparse_adam", "kernel")])
def test_stock_torch_and_the_kernels_keep_every_parameter_through_its_life(op, backend):
    trial = Trial(OPS[op], builtin_backends()[backend], "cpu", "float32")
    for example in OPS[op].lifecycle_examples("float32"):
        check_lifecycle(trial, example)


def test_the_explicit_lives_hold_every_event_one_each():
    events = [example.events() for example in OPS["adagrad"].lifecycle_examples("float32")]
    for index, said in enumerate(["gets no gradient at step 2", "added by add_param_group before step 2",
                                  "in float64 beside parameters of the item's dtype", "lr changed between steps",
                                  "lr a 0-d tensor", "frozen", "torch.load(weights_only=True)"]):
        # (a parameter missing step 2 is also in the mixed-dtype life and the state_dict round trip's)
        assert said in events[index] and sum(said in text for text in events) == 1 + 2 * (index == 0), events
    assert "zero-size and last in its group" in events[5]


@pytest.mark.parametrize("op, candidate, named", [
    ("adagrad", GlobalStepAdagrad, "lifecycle (parameter 1 (shape []) gets no gradient at step 2;"),
    ("sgd", CachedLrSGD, "lifecycle (lr changed between steps (x 1, 0.5, 0.25)): param differs from torch's SGD with the same lr set before each step"),
])
def test_a_planted_lifecycle_mistake_fails_and_names_the_event(op, candidate, named):
    trial = Trial(OPS[op], CandidateBackend("candidate", {op: candidate}), "cpu", "float32")
    with pytest.raises(Mismatch) as failed:
        for example in OPS[op].lifecycle_examples("float32"):
            check_lifecycle(trial, example)
    message = str(failed.value)
    assert message.startswith(named), message


def test_torchs_own_class_as_a_candidate_passes_a_0d_maximized_life_with_the_lr_changed():
    """The candidate's lr check computes the tolerance from the reference on the parameter's own steps: a 0-d
    parameter with maximize=True (NumPy negates a 0-d array to a scalar) once broke it for torch's own SGD."""
    import numpy as np

    from conformance.ops.optimizers.inputs import LifecycleInputs, Member

    life = LifecycleInputs([Member(np.array(1.0), [np.array(1.0), np.array(1.0)])], {"lr": 1.0, "maximize": True},
                           [1.0, 0.5])
    import torch

    trial = Trial(OPS["sgd"], CandidateBackend("candidate", {"sgd": torch.optim.SGD}), "cpu", "float64")
    check_lifecycle(trial, life)


def test_adagrads_add_param_group_keyerror_before_torch_2_12_is_named_by_the_life_that_adds_a_group():
    """torch < 2.12's Adagrad raises KeyError: 'sum' for a parameter added by add_param_group (seen on torch
    2.11 on an H200, read in 2.9.0's and 2.12.0's adagrad.py): registered for those releases only, triggered by
    the explicit life that adds a group and by no other."""
    from conformance.core.divergences import torch_release, torch_specifier
    from conformance.ops.optimizers.adagrad import ADD_PARAM_GROUP_KEYERROR

    lives = OPS["adagrad"].lifecycle_examples("float32")
    assert [ADD_PARAM_GROUP_KEYERROR.triggered(life) for life in lives] == [False, True, False, False, False, False, False]
    assert ADD_PARAM_GROUP_KEYERROR.kind == "error"
    releases = torch_specifier(ADD_PARAM_GROUP_KEYERROR.torch)
    assert "2.9.0" in releases and "2.11.0" in releases and "2.12.0" not in releases
    assert str(torch_release("2.13.0+cpu")) not in releases


def test_a_parameter_of_another_dtype_in_the_same_optimizer_moves_as_in_its_own():
    """torch's test_mixed_device_dtype: one optimizer over a float32 and a float64 parameter (and the other way
    round for float64 items) moves each as an optimizer of its own in that dtype would."""
    import torch

    from conformance.ops.optimizers.drive import run_lifecycle

    for dtype, other in (("float32", torch.float64), ("float64", torch.float32)):
        (life,) = [e for e in OPS["sgd"].lifecycle_examples(dtype) if any(m.dtype for m in e.members)]
        trial = Trial(OPS["sgd"], builtin_backends()["coo"], "cpu", dtype)
        check_lifecycle(trial, life)
        from conformance.core.types import RunContext

        ctx = RunContext("cpu", getattr(torch, dtype))
        together = run_lifecycle(OPS["sgd"].torch_implementation, life, ctx, 0.5)
        assert together[1]["param"].dtype == other and together[0]["param"].dtype == ctx.dtype
