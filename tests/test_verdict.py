"""The three-way verdict and the half-precision rounding checks, on real runs of the suite: stock
torch passes its own gate, implementations that round or accumulate wrongly fail in ulps, and a
candidate that cannot express some inputs still gets generated coverage."""

from __future__ import annotations

import textwrap

import pytest

from conformance_runs import REPO, by_case, load, run_inprocess

PRECISION = "tests/candidates/precision.py"
MUTANTS = "tests/candidates/mutants.py"
HALF_LINKS = {"adagrad": "torch/optim/adagrad.py", "coalesce": "pytorch/issues/84471"}


def _run(name: str, op: str, impl: str, *extra: str, examples: int = 5) -> tuple[int, dict]:
    code, path = run_inprocess(name, "specs", "--conformance-op", op, "--conformance-impl", f"{op}={impl}",
                               "--conformance-examples", str(examples), *extra)
    return code, load(path)


def _outcomes(document: dict) -> dict[str, str]:
    return {key: record["outcome"] for key, record in by_case(document).items()}


STOCK_TORCH = {
    "adagrad": "torch.optim:Adagrad",
    "sparse_adam": "torch.optim:SparseAdam",
    "sgd": "torch.optim:SGD",
    "coalesce": "torch:Tensor.coalesce",
    "masked_mean": "conformance.ops.masked_mean:torch_masked_mean",
}


def test_every_op_with_a_torch_implementation_has_its_gate_test():
    from conformance.ops import OPS

    assert {name for name, op in OPS.items() if op.torch_implementation is not None} == set(STOCK_TORCH)


@pytest.mark.parametrize("op, impl", list(STOCK_TORCH.items()))
@pytest.mark.slow
def test_stock_torch_passes_its_own_gate(op, impl):
    code, document = _run(f"stock-{op}", op, impl)
    outcomes = _outcomes(document)
    assert code == 0, {k: v for k, v in outcomes.items() if v not in ("passed", "xfail")}
    assert not [k for k, v in outcomes.items() if v in ("failed", "error")]
    assert sum(v == "passed" for v in outcomes.values()) >= 30
    generated = [r for r in document["records"] if r["spec"] == "generated"]
    assert {r["dtype"] for r in generated} == {"float16", "bfloat16", "float32", "float64"}
    assert not [r for r in document["records"] if "counterexample" in r]  # nothing to reproduce
    for record in document["records"]:
        if record["outcome"] == "xfail" and record["spec"] != "generated":
            assert record["message"].startswith("same as torch: "), record
            assert record["verdict"] == "same-as-torch"
            if "a limitation of torch, not the contract" in record["message"]:  # expected_error kind torch-limitation
                assert record["divergence"]["link"].startswith("https://github.com/pytorch/pytorch/blob/")
                continue
            assert HALF_LINKS[op] in record["message"]
            assert record["divergence"]["link"]


def test_torch_half_precision_items_are_xfail_same_as_torch():
    _, document = _run("stock-coalesce-half", "coalesce", "torch:Tensor.coalesce", "-k", "half-precision",
                       examples=0)
    records = by_case(document)
    for dtype in ("float16", "bfloat16"):
        record = records[f"many-duplicates-half-precision[candidate-cpu-{dtype}]"]
        assert record["outcome"] == "xfail"
        assert "same as torch: torch accumulates duplicates" in record["message"]
        assert record["values"]["values"]["torch"] == record["values"]["values"]["got"]
        assert record["values"]["values"]["expected"] == [4096.0]
    assert records["many-duplicates-half-precision[candidate-cpu-float32]"]["outcome"] == "passed"


@pytest.mark.slow
def test_float32_state_adagrad_passes_and_fixes_torchs_divergence():
    code, document = _run("f32-state", "adagrad", f"{PRECISION}:Float32StateAdagrad", examples=8)
    outcomes = _outcomes(document)
    assert not [k for k, v in outcomes.items() if v in ("failed", "error")], outcomes
    record = by_case(document)["duplicates-cancel-half-precision[candidate-cpu-float16]"]
    assert record["outcome"] == "passed"
    assert record["verdict"] == "improvement"
    assert "fixes torch's known divergence" in record["improvement"]
    # the generated property that assumed the state's dtype reads the candidate's float32 state
    assert outcomes["adagrad-unspecified-unchanged[candidate-cpu-float16]"] == "passed"


@pytest.mark.slow
def test_an_unsupported_example_does_not_end_a_generated_item():
    code, document = _run("no-lr-decay", "adagrad", f"{PRECISION}:NoLrDecayAdagrad", "-k",
                          "generated and agrees-with-reference and float32", examples=200)
    (record,) = [r for r in document["records"] if r["spec"] == "generated"]
    assert code == 0
    assert record["outcome"] == "passed", record
    assert record["examples"] >= 200  # hundreds of examples, not none
    assert record["unsupported_examples"] > 0


def test_nothing_runs_is_unsupported_with_the_count():
    code, document = _run("never-supported", "adagrad", f"{PRECISION}:NeverSupportedAdagrad", "-k",
                          "generated and agrees-with-reference and float32", examples=20)
    (record,) = [r for r in document["records"] if r["spec"] == "generated"]
    assert record["outcome"] == "unsupported"
    assert "this library cannot express any of it" in record["message"]
    assert record["examples"] == 0 and record["unsupported_examples"] >= 20


@pytest.mark.parametrize("op, impl", [
    ("coalesce", "truncating_coalesce"),
    ("adagrad", "TruncatingAdagrad"),
    ("masked_mean", "half_sum_masked_mean"),
])
@pytest.mark.slow
def test_rounding_bugs_fail_in_ulps(op, impl):
    code, document = _run(f"rounding-{impl}", op, f"{PRECISION}:{impl}", "-k", "rounds-correctly", examples=25)
    records = by_case(document)
    assert code == 1
    for dtype in ("float16", "bfloat16"):
        record = records[f"{op}-rounds-correctly[candidate-cpu-{dtype}]"]
        assert record["outcome"] == "failed", record
        assert "is not correctly rounded to" in record["message"] and "ulp" in record["message"]
        assert ("stock torch on the same example: has the property" in record["message"]
                or "stock torch on the same example: misses the property too, but differently" in record["message"])


def test_a_half_precision_sum_in_another_order_than_torchs_is_the_same_as_torch_by_the_model():
    """torch.unique + index_add_ sums float16/bfloat16 duplicates in half precision in input order;
    torch's coalesce does in its unstable sort's order. rounds-correctly judges the candidate by the
    model of torch's recorded divergence, not by torch's one run: xfail (same as torch) naming the
    order, never a failure (issue 43: it failed where torch's sort took another order)."""
    code, document = _run("index-add", "coalesce", f"{PRECISION}:index_add_coalesce", "-k", "rounds-correctly",
                          examples=25)
    records = by_case(document)
    assert code == 0, {k: r["outcome"] for k, r in records.items()}
    for dtype in ("float16", "bfloat16"):
        record = records[f"coalesce-rounds-correctly[candidate-cpu-{dtype}]"]
        assert record["outcome"] == "xfail", record
        assert f"same as torch by the model of half-precision-accumulation (the duplicates summed in {dtype} one " \
               "after another, in " in record["message"], record["message"]


@pytest.mark.slow
def test_float32_reordering_passes():
    code, document = _run("reordered", "coalesce", f"{PRECISION}:float32_reversed_coalesce", "-k",
                          "not generated or rounds-correctly or agrees-with-reference", examples=30)
    outcomes = _outcomes(document)
    assert code == 0, {k: v for k, v in outcomes.items() if v != "passed"}
    assert all(v == "passed" for v in outcomes.values())


def test_a_candidate_that_differs_from_both_fails_with_torch_beside_it():
    code, document = _run("differs", "adagrad", f"{MUTANTS}:SquareThenSumAdagrad", "-k",
                          "duplicates-summed-before-squaring", examples=0)
    record = by_case(document)["duplicates-summed-before-squaring[candidate-cpu-float32]"]
    assert code == 1 and record["outcome"] == "failed"
    assert record["verdict"] == "differs"
    assert "stock torch on the same inputs: conforms" in record["message"]
    row = record["values"]["state_sum"]
    assert row["torch"] == row["expected"] != row["got"]


SPEC = """\
op: coalesce
sources:
  hand: {{title: "a hand-derived example", derivation: "1 + 2 = 3, by hand"}}
defaults: {{source: hand, dtypes: [float32]}}
cases:
  - id: {case}
    derivation: "1 + 2 = 3"
    inputs:
      tensor: {{indices: [[0, 0]], values: [1.0, 2.0], size: [1]}}
    expected:
      values: [{golden}]
{extra}"""


def _spec(tmp_path, case: str, golden: float, extra: str = "") -> str:
    path = tmp_path / f"{case}.yaml"
    path.write_text(SPEC.format(case=case, golden=golden, extra=textwrap.indent(extra, "    ")), encoding="utf-8")
    return str(path)


def test_a_divergence_torch_no_longer_shows_is_stale(tmp_path, capsys):
    spec = _spec(tmp_path, "stale", 3.0, "known_divergences:\n  - behaviour: stock-torch\n"
                                          "    reason: torch used to get this wrong\n"
                                          "    link: https://example.org/fixed\n")
    code, path = run_inprocess("stale", spec, "--conformance-backend", "coo,candidate",
                               "--conformance-impl", "coalesce=torch:Tensor.coalesce")
    records = by_case(load(path))
    assert code == 0
    for backend in ("coo", "candidate"):
        assert records[f"stale[{backend}-cpu-float32]"]["outcome"] == "passed"
        assert records[f"stale[{backend}-cpu-float32]"]["stale_divergence"].startswith("torch used to get")
    assert "STALE known divergence" in capsys.readouterr().out


def test_torch_disagreeing_with_an_unrecorded_spec_lands_on_torch_not_the_candidate(tmp_path):
    spec = _spec(tmp_path, "wrong-golden", 4.0)  # 1 + 2 is not 4: the spec is wrong, torch "misses" it
    code, path = run_inprocess("wrong-golden", spec, "--conformance-backend", "coo,candidate",
                               "--conformance-impl", "coalesce=torch:Tensor.coalesce")
    records = by_case(load(path))
    assert records["wrong-golden[coo-cpu-float32]"]["outcome"] == "failed"  # torch's own backend: a finding
    candidate = records["wrong-golden[candidate-cpu-float32]"]
    assert candidate["outcome"] == "xfail"
    assert "stock torch itself disagrees with the spec here and no known divergence is recorded" in \
        candidate["message"]


@pytest.mark.slow
def test_param_groups_and_resume_on_stock_torch_and_on_slips():
    """Stock torch: per-group initial_accumulator_value is ignored (its recorded divergence, xfail
    "same as torch"), everything else exact. A candidate ignoring per-group hyperparameters fails
    param-groups; one whose float32 state is cast down by torch's load_state_dict fails resume."""
    code, document = _run("groups-torch", "adagrad", "torch.optim:Adagrad", "-k",
                          "(param-groups or state-dict) and float64", examples=30)
    outcomes = _outcomes(document)
    assert code == 0, outcomes
    records = by_case(document)
    groups = records["adagrad-param-groups[candidate-cpu-float64]"]
    assert groups["outcome"] == "xfail" and "same as torch" in groups["message"]
    assert "initial_accumulator_value" in groups["message"]
    assert records["adagrad-state-dict-resume[candidate-cpu-float64]"]["outcome"] == "passed"

    code, document = _run("groups-blind", "adagrad", f"{PRECISION}:GroupBlindAdagrad", "-k",
                          "param-groups and float64", "--conformance-no-shrink", examples=30)
    record = by_case(document)["adagrad-param-groups[candidate-cpu-float64]"]
    assert code == 1 and record["outcome"] == "failed", record
    assert "an optimizer of its own for parameter" in record["message"]

    code, document = _run("downcast", "adagrad", f"{PRECISION}:DowncastOnLoadAdagrad", "-k",
                          "state-dict and (float16 or float32)", "--conformance-no-shrink", examples=25)
    records = by_case(document)
    assert code == 1
    assert records["adagrad-state-dict-resume[candidate-cpu-float16]"]["outcome"] == "failed"
    assert "the uninterrupted run" in records["adagrad-state-dict-resume[candidate-cpu-float16]"]["message"]
    assert records["adagrad-state-dict-resume[candidate-cpu-float32]"]["outcome"] == "passed"


@pytest.mark.slow
def test_a_sparse_only_optimizer_declares_it_and_gets_unsupported_not_errors():
    code, document = _run("sparse-only", "adagrad", f"{PRECISION}:SparseOnlyAdagrad", "-k", "float32", examples=12)
    outcomes = _outcomes(document)
    assert code == 0, {k: v for k, v in outcomes.items() if v not in ("passed", "xfail", "unsupported")}
    assert outcomes["dense-gradient-updates-every-entry[candidate-cpu-float32]"] == "unsupported"
    from conformance.cases.properties import opted_out

    unsupported = [r for r in by_case(document).values() if r["outcome"] == "unsupported"
                   and not opted_out(r)]  # (those: it declares neither supports_complex nor supports_grad_scaling)
    assert unsupported and all("sparse_gradients_only" in r["message"] for r in unsupported), unsupported
    generated = by_case(document)["adagrad-agrees-with-reference[candidate-cpu-float32]"]
    assert generated["outcome"] == "passed" and generated["unsupported_examples"] > 0  # dense examples rejected

    code, document = _run("undeclared", "adagrad", f"{PRECISION}:UndeclaredSparseOnlyAdagrad", "-k",
                          "float32 and (dense-gradient or agrees-with-reference)", "--conformance-no-shrink", examples=12)
    assert code == 1
    assert any(r["outcome"] == "error" and "sparse gradients only" in r["message"]
               for r in by_case(document).values())


def test_a_missing_kernel_is_told_apart_from_torch_rejecting_the_inputs():
    """Only torch's dispatcher saying it has no kernel on a non-cpu device lets cpu stand in for
    stock torch (conformance.judging.verdict.run_stock_torch); a real dispatcher error, from the meta device."""
    import torch

    from conformance.core.types import missing_kernel

    tensor = torch.sparse_coo_tensor(torch.tensor([[0, 0]]), torch.tensor([1.0, 2.0]), (3,), device="meta")
    with pytest.raises(NotImplementedError) as raised:
        tensor.coalesce()
    assert missing_kernel(raised.value, "xla") == \
        "torch has no kernel for aten::_coalesce on the SparseMeta backend (NotImplementedError)"
    assert missing_kernel(raised.value, "cpu") is None  # on cpu a missing kernel is torch's regression
    assert missing_kernel(ValueError(str(raised.value)), "xla") is None
    assert missing_kernel(NotImplementedError("dense gradients are not supported"), "xla") is None


def test_a_candidates_got_line_of_an_output_the_suite_computes_says_so():
    """Adagrad's std is the suite's sqrt(state_sum) + eps of the candidate's state: a candidate's
    failure shows it beside the golden value, saying the candidate returns no std (its value is not
    the candidate's own arithmetic); stock torch's row is unchanged."""
    from conformance_runs import MUTANTS

    code, path = run_inprocess("computed-std", "specs/adagrad.yaml", "--conformance-backend", "candidate",
                               "--conformance-dtype", "float64", f"--conformance-impl=adagrad={MUTANTS}:SquareBeforeSumAdagrad",
                               "-k", "duplicates-summed-before-squaring")
    record = by_case(load(path))["duplicates-summed-before-squaring[candidate-cpu-float64]"]
    assert record["outcome"] == "failed", (code, record)
    std = record["message"].split("  std:\n", 1)[1].splitlines()
    assert std[0].strip().startswith("expected") and std[1].strip().startswith("torch")
    assert std[2].strip().startswith("got") and std[2].endswith(
        "(computed by the suite from the candidate's state: sqrt(state_sum) + eps; the candidate returns no std)")
    assert "computed by the suite" not in record["message"].split("  std:\n", 1)[0]
