"""pandas: ``Series.where(mask).mean()`` as a masked_mean candidate. pandas' mean skips NaN by
default (skipna=True), so a NaN at a *valid* entry is dropped instead of propagated: [nan, 1] with
both valid gives 1.0 where torch gives NaN (examples/repros/pandas_skipna_masked_mean.py)."""

from examples.tests.pinning import check, item, items, run_candidate

TARGET = "examples.candidates.pandas_mean:masked_mean"
FLOATS = ["float16", "float32", "float64"]
SKIPNA = "looks like: skipna mean"


def test_pandas_masked_mean_pinned_verdicts():
    records = run_candidate("masked_mean", TARGET)
    check(records, {
        **items("masked_mean", "nan-at-a-valid-entry", FLOATS, "failed", SKIPNA),
        **items("masked_mean", "mean-of-valid-entries", ["bfloat16"], "unsupported", "no bfloat16"),
        # at the default 8 examples too: the op's explicit example [nan, 1] with both valid runs first
        **items("generated", "masked_mean-agrees-with-reference", FLOATS, "failed", "Expected nan but got 1.0"),
    })
    for nodeid in [*items("masked_mean", "nan-at-a-valid-entry", FLOATS, "failed"),
                   *items("generated", "masked_mean-agrees-with-reference", FLOATS, "failed")]:
        assert records[nodeid]["looks_like"]["name"] == "skipna mean", records[nodeid]["message"]


def test_pandas_skipna_is_found_by_the_generated_cases_too():
    """With 100 examples the generated agrees-with-reference property draws a NaN at a valid entry in
    every dtype pandas has, and names the cause (where the only valid entry is NaN the skipna mean
    is NaN, as it should be, but its gradient, that of a mean over no entry, is zero)."""
    records = run_candidate("masked_mean", TARGET, "--conformance-examples", "100", "-k",
                            "generated and agrees-with-reference")
    check(records, {
        **items("generated", "masked_mean-agrees-with-reference", FLOATS, "failed", SKIPNA),
        item("generated", "masked_mean-agrees-with-reference", "bfloat16"): "unsupported",
    })
