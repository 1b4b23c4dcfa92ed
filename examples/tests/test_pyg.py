"""PyTorch Geometric: ``torch_geometric.utils.coalesce`` as a coalesce candidate. It passes every
case it can express (sparse_dim 0 is unsupported: there is no edge index), half precision included:
PyG sums duplicates with torch's own scatter."""

from examples.tests.pinning import check, run_candidate

TARGET = "examples.candidates.pyg_coalesce:coalesce"


def test_pyg_coalesce_passes_every_case_it_supports():
    records = run_candidate("coalesce", TARGET)
    check(records, {}, allowed=frozenset({"passed", "unsupported"}))
    unsupported = [r for r in records.values() if r["outcome"] == "unsupported"]
    assert all("without sparse dims" in r["message"] for r in unsupported), [r["message"] for r in unsupported]
    assert sum(r["outcome"] == "passed" for r in records.values()) >= 40


def test_pyg_coalesce_generated_cases_pass_at_100_examples():
    records = run_candidate("coalesce", TARGET, "--conformance-examples", "100", "-k", "generated")
    check(records, {}, allowed=frozenset({"passed", "unsupported"}))
