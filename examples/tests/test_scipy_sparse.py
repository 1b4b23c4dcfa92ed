"""scipy.sparse's coo_array.sum_duplicates as a coalesce candidate: it passes every case it can
express; float16/bfloat16 and hybrid tensors are unsupported (scipy.sparse has neither)."""

from examples.tests.pinning import check, items, run_candidate

TARGET = "examples.candidates.scipy_sparse:coalesce"
HALF = ["float16", "bfloat16"]


def records():
    return run_candidate("coalesce", TARGET)


def test_scipy_coalesce_pinned_verdicts():
    pinned = {
        **items("coalesce", "many-duplicates-half-precision", HALF, "unsupported", "scipy.sparse"),
        **items("coalesce", "hybrid-rows", ["float16", "bfloat16", "float32", "float64"], "unsupported",
                "scipy.sparse"),
    }
    check(records(), pinned)


def test_scipy_coalesce_passes_every_case_it_supports():
    results = records()
    outcomes = {r["outcome"] for r in results.values()}
    assert outcomes <= {"passed", "unsupported"}, outcomes
    passed = [n for n, r in results.items() if r["outcome"] == "passed"]
    assert any("float32" in n for n in passed) and any("float64" in n for n in passed)
    for nodeid, record in results.items():
        if record["dtype"] in ("float32", "float64") and record["outcome"] == "unsupported":
            # hybrid tensors, and sparse_dim 0 (a sparse scalar or an all-dense hybrid)
            assert "hybrid" in record["message"] or "0-d" in record["message"], (nodeid, record["message"])
