"""JAX: BCOO.sum_duplicates as a coalesce candidate and jnp.mean(where=) + jax.vjp as a
masked_mean candidate."""

from examples.tests.pinning import check, items, run_candidate

# one pytest process gates all of them
JAX = {
    "coalesce": "examples.candidates.jax_sparse:coalesce",
    "masked_mean": "examples.candidates.jax_numpy:masked_mean",
}

HALF = ["float16", "bfloat16"]


def test_jax_coalesce_pinned_verdicts():
    records = run_candidate("coalesce", JAX["coalesce"], together=JAX)
    check(records, {
        # BCOO sums float16/bfloat16 duplicates in half precision, exactly as torch does
        # (examples/repros/jax_bcoo_half_precision_sum.py): 2048 and 256 instead of 4096
        **items("coalesce", "many-duplicates-half-precision", HALF, "failed", "expected [4096.0]"),
    })


def test_jax_masked_mean_passes_everything():
    records = run_candidate("masked_mean", JAX["masked_mean"], together=JAX)
    check(records, {}, allowed=frozenset({"passed"}))
