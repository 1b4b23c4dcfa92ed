"""The strategies reach the edge cases they promise, and stay within the dtype's sensible range."""

from __future__ import annotations

import numpy as np
import torch
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

from conformance.cases import strategies as cst
from conformance.backends import builtin_backends
from conformance.core.compare import Mismatch
from conformance.cases.checks import check_agrees_with_reference
from conformance.cases.trial import DivergenceObserved, Trial
from conformance.ops import OPS
from conformance.ops.coalesce import coalesce_reference
from conformance.core.tensors import CooArray, quantize, torch_dtype

# reaching an input is the claim; shrinking the one found to a minimal one would only cost time
SEARCH = settings(max_examples=1500, database=None, deadline=None, suppress_health_check=list(HealthCheck),
                  phases=[Phase.explicit, Phase.generate])
CHECK = settings(max_examples=60, database=None, deadline=None, suppress_health_check=list(HealthCheck))


def _groups(coo: CooArray) -> dict[tuple, list]:
    groups: dict[tuple, list] = {}
    for position in range(coo.indices.shape[1]):
        groups.setdefault(tuple(coo.indices[:, position]), []).append(coo.values[position])
    return groups


def test_coo_reaches_duplicates_that_cancel_to_an_explicit_zero():
    coo = find(cst.coo_arrays("float32"), lambda c: any(
        len(vs) > 1 and np.all(np.sum(vs, axis=0) == 0) and np.any(np.asarray(vs) != 0)
        for vs in _groups(c).values()), settings=SEARCH)
    assert coalesce_reference(coo)["nnz"] >= 1  # the zero is kept as a specified entry


def test_coo_reaches_unsorted_indices_in_two_sparse_dims():
    coo = find(cst.coo_arrays("float64"), lambda c: c.sparse_dim >= 2 and any(
        tuple(a) > tuple(b) for a, b in zip(c.indices.T, c.indices.T[1:])), settings=SEARCH)
    assert coo.indices.shape[1] >= 2


def test_coo_reaches_hybrid_empty_and_zero_sized():
    find(cst.coo_arrays("float64"), lambda c: c.sparse_dim < len(c.size) and c.indices.shape[1] == 0,
         settings=SEARCH)
    find(cst.coo_arrays("float64"), lambda c: 0 in c.size, settings=SEARCH)
    find(cst.coo_arrays("float64"), lambda c: len(c.size) == 4 and c.sparse_dim == 2, settings=SEARCH)


def test_coo_reaches_values_across_magnitudes():
    find(cst.coo_arrays("float32"), lambda c: c.values.size and np.nanmax(np.abs(c.values)) > 2**15
         and np.min(np.abs(c.values[c.values != 0]), initial=np.inf) < 2**-15, settings=SEARCH)


@pytest.mark.parametrize("dtype", cst.FLOAT_DTYPES)
def test_values_are_exact_in_their_dtype(dtype):
    @CHECK
    @given(cst.coo_arrays(dtype), cst.inputs("masked_mean", dtype))
    def exact(coo, masked):
        assert np.array_equal(quantize(coo.values, torch_dtype(dtype)), coo.values)
        assert np.array_equal(quantize(masked.values, torch_dtype(dtype)), masked.values, equal_nan=True)

    exact()


def test_float16_gradients_cannot_overflow_when_squared():
    @CHECK
    @given(cst.inputs("adagrad", "float16"))
    def sensible(inputs):
        total = np.full(inputs.param.shape, inputs.hyperparameters.get("initial_accumulator_value", 0.0))
        for grad in inputs.grads:
            if isinstance(grad, CooArray):
                dense = np.zeros(inputs.param.shape)
                np.add.at(dense, tuple(grad.indices), grad.values)
            else:
                dense = grad
            assert np.max(np.abs(dense), initial=0.0) < 256
            total = total + dense**2
        assert np.max(total) < 65504

    sensible()


def test_masks_reach_all_true_all_false_and_non_finite_values():
    find(cst.inputs("masked_mean", "float32"), lambda m: m.mask.size > 1 and not m.mask.any()
         and np.isnan(m.values).any(), settings=SEARCH)
    find(cst.inputs("masked_mean", "float32"), lambda m: m.mask.size > 1 and m.mask.all(), settings=SEARCH)
    find(cst.inputs("masked_mean", "float32"), lambda m: np.isinf(m.values[~m.mask]).any()
         and m.mask.any(), settings=SEARCH)
    find(cst.inputs("masked_mean", "float32"), lambda m: np.isnan(m.values[m.mask]).any(), settings=SEARCH)
    find(cst.inputs("masked_mean", "float32"), lambda m: m.values.ndim == 0, settings=SEARCH)


def _rows(grad, sparse_dim):
    return set() if not isinstance(grad, CooArray) else {tuple(c[:sparse_dim]) for c in grad.indices.T}


@pytest.mark.slow  # 2-3 s: the fast tier stays within its 90 s
def test_trajectories_reach_a_row_hit_again_after_an_empty_step():
    def wanted(inputs):
        grads = inputs.grads
        for first in range(len(grads)):
            for later in range(first + 2, len(grads)):
                middle = grads[first + 1:later]
                if (_rows(grads[first], 9) & _rows(grads[later], 9)
                        and all(isinstance(g, CooArray) and g.indices.shape[1] == 0 for g in middle)):
                    return True
        return False

    find(cst.inputs("sparse_adam", "float32"), wanted, settings=SEARCH)


def test_hyperparameters_reach_their_edges():
    find(cst.hyperparameters("adagrad"), lambda h: h["eps"] >= 0.1 and h.get("lr_decay", 0) > 0
         and h.get("maximize") and h.get("initial_accumulator_value", 0) > 0, settings=SEARCH)
    find(cst.hyperparameters("adagrad"), lambda h: h["eps"] == 0.0, settings=SEARCH)
    find(cst.hyperparameters("sparse_adam"), lambda h: h["eps"] >= 1.0 and h["betas"][1] == 0.0, settings=SEARCH)
    find(cst.inputs("adagrad", "float64"), lambda i: any(isinstance(g, np.ndarray) for g in i.grads)
         and i.param.ndim == 3, settings=SEARCH)


@pytest.mark.parametrize("op", ["adagrad", "sparse_adam"])
def test_invalid_inputs_always_raise_the_documented_error(op):
    @CHECK
    @given(cst.invalid_inputs(op, "float32"))
    def raises(inputs):
        with pytest.raises((ValueError, RuntimeError)):
            OPS[op].reference(inputs)

    raises()


def test_half_accumulation_in_torch_coalesce_is_a_known_divergence_and_a_wrong_sum_is_not():
    coo = CooArray(np.array([[0, 0, 0]]), np.array([0.255859375, 2.0, -2.0]), (1,))
    backends = builtin_backends()
    with pytest.raises(DivergenceObserved) as observed:
        check_agrees_with_reference(Trial(OPS["coalesce"], backends["coo"], "cpu", "bfloat16"), coo)
    assert observed.value.divergence.key == "half-precision-accumulation"
    check_agrees_with_reference(Trial(OPS["coalesce"], backends["coo"], "cpu", "float32"), coo)  # exact there

    from conformance.backends.candidate import CandidateBackend

    def wrong_sum(tensor):
        result = tensor.coalesce()
        return (result * 1.5).coalesce()  # neither the reference nor torch's half sum

    with pytest.raises(Mismatch):
        check_agrees_with_reference(
            Trial(OPS["coalesce"], CandidateBackend("candidate", {"coalesce": wrong_sum}), "cpu", "bfloat16"), coo)


def test_float16_eps_underflow_is_classified():
    from conformance.ops.optimizers import OptimizerInputs

    inputs = OptimizerInputs(np.array([1.0, 2.0]), [CooArray(np.array([[0, 0]]), np.array([2.0, -2.0]), (2,))],
                             {"lr": 1.0, "eps": 1e-10})
    with pytest.raises(DivergenceObserved) as observed:
        check_agrees_with_reference(Trial(OPS["adagrad"], builtin_backends()["coo"], "cpu", "float16"), inputs)
    assert observed.value.divergence.key == "float16-eps-underflow"


def _empty_then_one(eps: float):
    from conformance.ops.optimizers import OptimizerInputs

    empty, one = (CooArray(np.zeros((1, 0), dtype=np.int64), np.zeros(0), (1,)),
                  CooArray(np.array([[0]]), np.array([1.0]), (1,)))
    return OptimizerInputs(np.array([1.0]), [empty, one], {"lr": 1.0, "eps": eps})


@pytest.mark.parametrize("dtype, eps", [("float32", 0.0), ("float64", 0.0), ("float16", 1e-10)])
def test_sparse_equals_dense_skips_the_entries_dense_adagrad_makes_0_over_0(dtype, eps):
    """Found by check at its defaults (2026-11-26): dense Adagrad on a densified empty first gradient
    divides 0/0 (eps 0, or 1e-10 rounded to 0 in float16, at an accumulator still 0), so it writes NaN
    where the sparse step leaves the entry alone; stock torch was failed there. That entry's parameter
    is no longer compared; its accumulator still is."""
    from conformance.cases.checks import check_sparse_equals_dense, undefined_when_densified
    from conformance.ops.optimizers.reference import densified

    inputs = _empty_then_one(eps)
    assert undefined_when_densified(OPS["adagrad"], densified(inputs, dtype), dtype).tolist() == [True]
    check_sparse_equals_dense(Trial(OPS["adagrad"], builtin_backends()["coo"], "cpu", dtype), inputs)
    positive = _empty_then_one(1e-3)
    assert not undefined_when_densified(OPS["adagrad"], densified(positive, dtype), dtype).any()


@pytest.mark.parametrize("backend", ["coo", "kernel"])
def test_sparse_equals_dense_compares_nothing_against_a_dense_0_over_0_at_a_specified_zero(backend):
    """Found by the main job at 100 examples, seed 3 (2026-11-26): in float16 a specified zero gradient
    with eps 1e-10 (rounded to 0 in the dtype) is 0/0 in torch's dense update; the fused kernel adds eps in
    float32 on its sparse path and keeps the reference's value, 1.0, which was failed against the NaN."""
    from conformance.cases.checks import check_sparse_equals_dense
    from conformance.ops.optimizers import OptimizerInputs

    inputs = OptimizerInputs(np.array([1.0]), [CooArray(np.array([[0]]), np.array([0.0]), (1,))],
                             {"lr": 1.0, "eps": 1e-10})
    check_sparse_equals_dense(Trial(OPS["adagrad"], builtin_backends()[backend], "cpu", "float16"), inputs)


def test_sparse_equals_dense_still_fails_a_sparse_path_that_differs_at_a_compared_entry():
    from conformance.backends.candidate import CandidateBackend
    from conformance.cases.checks import check_sparse_equals_dense

    class SparseHalfStep(torch.optim.Adagrad):
        """Adagrad whose sparse steps move half as far (dense steps are torch's)."""

        def step(self, closure=None):
            sparse = [p for g in self.param_groups for p in g["params"] if p.grad is not None and p.grad.is_sparse]
            before = [p.detach().clone() for p in sparse]
            super().step(closure)
            with torch.no_grad():
                for p, b in zip(sparse, before):
                    p.copy_(b + (p - b) / 2)

    trial = Trial(OPS["adagrad"], CandidateBackend("candidate", {"adagrad": SparseHalfStep}), "cpu", "float64")
    with pytest.raises(Mismatch, match="dense Adagrad"):
        check_sparse_equals_dense(trial, _empty_then_one(1e-3))


def _cancelling_momentum():
    from conformance.ops.optimizers import OptimizerInputs

    v = 512.0110473632812
    return OptimizerInputs(np.array([1.0]), [CooArray(np.array([[0, 0]]), np.array([-v, v]), (1,)),
                                             CooArray(np.array([[0]]), np.array([1.0]), (1,))],
                           {"lr": 1.0, "momentum": 0.9, "nesterov": True})


def test_sgd_tolerances_cover_a_momentum_buffer_whose_entries_cancel():
    """Found by check at its defaults, seed 1 (2026-11-26): duplicates -512.011 and 512.011, then 1, at one
    index, with Nesterov momentum. Torch's sparse buffer keeps the duplicates apart and merges the next
    gradient into one of them (460.81 + 1 in float32), so stock torch lands at -0.900024 where the exact
    value is -0.9, and its coo item failed both sparse-equals-dense and the NumPy reference. Float32
    sums that cancel are off by up to u * the sum of their terms' magnitudes: SGD's tolerance now says so."""
    from conformance.cases.checks import check_agrees_with_reference, check_sparse_equals_dense

    inputs = _cancelling_momentum()
    coo = Trial(OPS["sgd"], builtin_backends()["coo"], "cpu", "float32")
    assert coo.run(inputs)["param"].item() != pytest.approx(-0.9, abs=1e-5)  # torch's own rounding, kept
    check_sparse_equals_dense(coo, inputs)
    check_agrees_with_reference(coo, inputs)


def test_sgd_tolerances_still_fail_a_nesterov_slip_on_those_inputs():
    from conformance.backends.candidate import CandidateBackend
    from conformance.cases.checks import check_agrees_with_reference

    class NoNesterov(torch.optim.SGD):
        def __init__(self, params, **hyper):
            super().__init__(params, **{**hyper, "nesterov": False})

    trial = Trial(OPS["sgd"], CandidateBackend("candidate", {"sgd": NoNesterov}), "cpu", "float32")
    with pytest.raises(Mismatch):
        check_agrees_with_reference(trial, _cancelling_momentum())


def _cancelling_duplicates():
    from conformance.ops.optimizers import OptimizerInputs

    return OptimizerInputs(np.ones((2, 3)), [CooArray(np.array([[0, 0, 0, 0, 0], [2, 2, 2, 0, 2]]),
                                                      np.array([128.0, 0.0, -128.0, 1.0, 2.0000038146972656]),
                                                      (2, 3))], {"lr": 1.0, "eps": 1e-10, "betas": (0.9, 0.0)})


@pytest.mark.parametrize("backend", ["kernel-triton", "kernel", "coo"])
def test_duplicates_summed_in_another_order_are_within_the_tolerance(backend):
    """Found by the main job at 100 examples, seed 7 (2026-11-26): the Triton kernel sums the duplicates
    [128, 0, -128, 2.0000038] at one index in its own order, 2.0 in float32 where the sum is 2.0000038, so
    exp_avg_sq (beta2 = 0: g**2) was 4.0 for 4.0000153 and failed. Each duplicate sum may be off by
    (k - 1) * u * the sum of its terms' magnitudes in any order; the tolerances now widen by how far
    the reference moves under that shift (Op.regrouped_inputs)."""
    from conformance.cases.checks import check_agrees_with_reference

    check_agrees_with_reference(Trial(OPS["sparse_adam"], builtin_backends()[backend], "cpu", "float32"),
                                _cancelling_duplicates())


def test_the_regrouped_tolerance_still_fails_a_one_percent_lr_slip():
    from conformance.backends.candidate import CandidateBackend
    from conformance.cases.checks import check_agrees_with_reference

    class LrSlip(torch.optim.SparseAdam):
        def __init__(self, params, lr=1e-3, **hyper):
            super().__init__(params, lr=lr * 1.01, **hyper)

    trial = Trial(OPS["sparse_adam"], CandidateBackend("candidate", {"sparse_adam": LrSlip}), "cpu", "float32")
    with pytest.raises(Mismatch):
        check_agrees_with_reference(trial, _cancelling_duplicates())
