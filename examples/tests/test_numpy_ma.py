"""numpy.ma: ``np.ma.masked_array(values, mask=~mask).mean()`` as a masked_mean candidate. It
conforms wherever its mask is an array. A 0-d input's mask ``~mask`` is the scalar ``np.False_``,
which numpy.ma stores as ``nomask``, and then ``mean`` divides with MaskedArray's domain-checked
division: a sum that is huge or infinite relative to the count is masked (read as NaN), and in
float16 the mean of inf is 1.0 (examples/repros/numpy_ma_mean_without_mask.py)."""

from examples.tests.pinning import check, item, items, run_candidate

TARGET = "examples.candidates.numpy_ma:masked_mean"


def test_numpy_ma_masked_mean_pinned_verdicts():
    check(run_candidate("masked_mean", TARGET), {
        **items("masked_mean", "mean-of-valid-entries", ["bfloat16"], "unsupported", "no bfloat16"),
        **items("masked_mean", "nan-at-a-valid-entry", ["float16", "float32", "float64"], "passed"),
    })


def test_numpy_ma_mean_of_an_unmasked_infinity_is_not_infinite():
    """With 100 examples the generated agrees-with-reference property draws a lone valid inf or -inf
    (0-d: the mask is nomask) in every dtype NumPy has, and the mean is not inf."""
    records = run_candidate("masked_mean", TARGET, "--conformance-examples", "100", "-k",
                            "generated and agrees-with-reference")
    check(records, {
        **items("generated", "masked_mean-agrees-with-reference", ["float16", "float32", "float64"], "failed",
                "inf but got"),
        item("generated", "masked_mean-agrees-with-reference", "bfloat16"): "unsupported",
    })
