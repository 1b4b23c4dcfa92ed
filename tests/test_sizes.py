"""The size dimension (the property sizes): inputs at vector widths and block sizes from a structured
generator; stock torch passes, planted kernel-size mistakes fail with the size named. In process."""

from __future__ import annotations

import pytest

from conformance.backends import builtin_backends
from conformance.backends.candidate import CandidateBackend
from conformance.cases.checks import check_sizes
from conformance.cases.properties import PROPERTIES
from conformance.cases.trial import Trial
from conformance.core.types import Mismatch
from conformance.ops import OPS

from candidates.sizes import OneBlockSGD, VectorBodyOnlyAdagrad


def test_every_op_with_a_structured_generator_has_a_sizes_property_with_few_examples():
    sized = {p.op: p for p in PROPERTIES if p.name == "sizes"}
    assert {"adagrad", "sgd", "sparse_adam", "masked_mean"} <= set(sized)
    assert all(p.max_examples == 4 for p in sized.values())


@pytest.mark.parametrize("op, backend, dtype", [("adagrad", "coo", "float16"), ("sgd", "dense", "float32"),
                                                ("sparse_adam", "kernel", "bfloat16"), ("masked_mean", "dense", "float16")])
def test_stock_torch_and_the_suites_backends_pass_the_boundaries(op, backend, dtype):
    trial = Trial(OPS[op], builtin_backends()[backend], "cpu", dtype)
    for example in OPS[op].sizes_examples(dtype):
        check_sizes(trial, example)


@pytest.mark.parametrize("op, candidate, example, named", [
    ("adagrad", VectorBodyOnlyAdagrad, 0, "size: a parameter of 17 entries:"),
    ("sgd", OneBlockSGD, 1, "size: a parameter of 257 entries:"),
])
def test_a_planted_kernel_size_mistake_fails_and_names_the_size(op, candidate, example, named):
    trial = Trial(OPS[op], CandidateBackend("candidate", {op: candidate}), "cpu", "float32")
    with pytest.raises(Mismatch) as failed:
        check_sizes(trial, OPS[op].sizes_examples("float32")[example])
    assert str(failed.value).startswith(named), failed.value


@pytest.mark.slow  # about 2-3.5 s: the fast tier stays within its 90 s (95.8 s on 2026-11-28)
def test_adagrads_long_trajectory_passes_300_steps_with_lr_decay_where_a_bfloat16_step_count_sticks():
    """The long-trajectory property's explicit Adagrad example runs 320 steps with lr_decay: torch passes it, and a
    step counter kept in bfloat16 (exact to 256) fails it -- a trajectory of 120 steps would not tell them apart."""
    from candidates.sizes import BFloat16StepAdagrad

    from conformance.cases.checks import check_agrees_with_reference

    (example,) = OPS["adagrad"].long_trajectory_examples("float32")
    assert len(example.grads) >= 300 and example.hyperparameters.get("lr_decay")
    check_agrees_with_reference(Trial(OPS["adagrad"], builtin_backends()["coo"], "cpu", "float32"), example)
    trial = Trial(OPS["adagrad"], CandidateBackend("candidate", {"adagrad": BFloat16StepAdagrad}), "cpu", "float32")
    with pytest.raises(Mismatch, match="(?s)step differs.*Expected 320.0 but got 256.0"):
        check_agrees_with_reference(trial, example)
    short = type(example)(example.param, example.grads[:120], example.hyperparameters)
    check_agrees_with_reference(trial, short)  # within 256 steps the bfloat16 count is exact
