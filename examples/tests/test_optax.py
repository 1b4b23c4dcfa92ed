"""optax: optax.adagrad (dense view) as an adagrad candidate and optax.adam on the gathered
entries as a sparse_adam candidate. Both place eps differently from torch."""

from examples.tests.pinning import check, item, items, run_candidate

# one pytest process gates all of them
OPTAX = {
    "adagrad": "examples.candidates.optax_optim:Adagrad",
    "sparse_adam": "examples.candidates.optax_optim:SparseAdam",
}

ALL = ["float16", "bfloat16", "float32", "float64"]
HALF = ["float16", "bfloat16"]


def test_optax_adagrad_pinned_verdicts():
    records = run_candidate("adagrad", OPTAX["adagrad"], together=OPTAX)
    check(records, {
        # optax: g * rsqrt(sum + eps); torch: g / (sqrt(sum) + eps)
        # (examples/repros/optax_adagrad_eps_inside_root.py)
        **items("adagrad", "large-eps-after-square-root", ALL, "failed", "param differs"),
        # the same with torch's default eps = 1e-10 at a gradient of 1e-9: a 9000 times smaller step
        **items("adagrad", "default-hyperparameters", ["float32", "float64"], "failed", "param differs"),
        # and on generated trajectories: the op's explicit example (eps = 0.25) comes first, in every
        # dtype optax runs (bfloat16 too since the draws reach larger lr and eps)
        **items("generated", "adagrad-agrees-with-reference", ALL, "failed",
                "param differs from the NumPy reference"),
        # over 100-120 steps the misplaced eps drifts past the growing tolerance (candidates only)
        **items("generated", "adagrad-long-trajectory", ["float32", "float64"], "failed",
                "param differs from the NumPy reference"),
        # optax's scale_by_rss takes jnp.where(sum > 0, rsqrt(sum + eps), 0): a specified zero gradient on an
        # accumulator still at 0 with eps = 0 moves nothing, where torch's 0 / (sqrt(0) + 0) is NaN
        # (specs/adagrad.yaml, derived by hand there; optax 0.2.8's transform.py read 2026-11-29)
        **items("adagrad", "explicit-zero-is-a-specified-entry", ["float32", "float64"], "failed",
                "param differs from the golden values"),
        **items("adagrad", "rows-hit-in-steps-1-and-3-with-lr-decay", ALL, "unsupported", "no lr_decay"),
        **items("adagrad", "maximize", ["float32", "float64"], "unsupported", "no maximize"),
        **items("adagrad", "sparse-gradient-with-weight-decay", ["float32", "float64"], "unsupported",
                "no weight_decay"),
        # one optimizer over two param groups: the adapter inherits torch's constructor, which fills
        # every state_sum with the constructor's initial_accumulator_value, not the group's -- torch's
        # own divergence, so "same as torch"; a state_dict round trip resumes exactly
        **items("generated", "adagrad-param-groups", ALL, "xfail", "same as torch"),
        **items("generated", "adagrad-state-dict-resume", ALL, "passed"),
        # the input space's lifecycles and sizes find the same eps placement (eps = 1.0 and 0.25 drawn): torch's
        # Adagrad with eps moved inside the root (tests/candidates/mutants.py:EpsInsideSqrtAdagrad) gives
        # optax's values bit for bit on both failing examples (replayed, 2026-11-28); in half precision the
        # four examples drawn stay within the tolerance. The adapter makes a parameter's state at its first
        # step, as torch (>= 2.12) does for one that joined by add_param_group (it raised KeyError 'sum')
        **items("generated", "adagrad-lifecycle", ["float32", "float64"], "failed", "param differs from torch's Adagrad"),
        **items("generated", "adagrad-sizes", ["float32", "float64"], "failed", "param differs from the NumPy reference"),
        **items("generated", "adagrad-lifecycle", HALF, "passed"),
        # the configurations' covering array finds the same eps placement, shrunk to "eps=0.25, sparse steps"
        # (2026-11-29); float32 and float64 are the property's dtypes
        **items("generated", "adagrad-configurations", ["float32", "float64"], "failed", "configuration eps=0.25"),
        # the adapter subclasses torch's Adagrad, so it starts from torch's capabilities and is judged on complex
        # parameters (issue 50): on them it differs from itself on their view_as_real, "looks like: eps inside the
        # root" (dense steps, 2026-11-29)
        **items("generated", "adagrad-complex-agrees", ["float32", "float64"], "failed", "param differs from the same"),
        **items("generated", "adagrad-sizes", HALF, "passed"),
    })
    for nodeid in items("adagrad", "large-eps-after-square-root", ALL, "failed"):  # the cause is named
        assert records[nodeid].get("looks_like", {}).get("name") == "eps inside the root", records[nodeid]["message"]


def test_optax_sparse_adam_pinned_verdicts():
    records = run_candidate("sparse_adam", OPTAX["sparse_adam"], together=OPTAX)
    check(records, {
        # optax adds eps to the bias-corrected root, torch's SparseAdam to the uncorrected one
        # (examples/repros/optax_adam_eps_after_bias_correction.py)
        **items("sparse_adam", "large-eps-added-to-uncorrected-root", ALL, "failed", "param differs"),
        # the same eps placement, seen with the default eps = 1e-8 in float64 (2.4e-7 off)
        item("sparse_adam", "embedding-rows-hit-in-steps-1-and-3", "float64"): ("failed", "param differs"),
        # and with all of torch's defaults at a gradient of 1e-8 (0.9995 instead of 0.99997)
        **items("sparse_adam", "default-hyperparameters", ["float32", "float64"], "failed", "param differs"),
        # (the op's explicit example, eps = 0.25, finds it in every dtype optax runs)
        **items("generated", "sparse_adam-agrees-with-reference", ["float16", "float32", "float64"], "failed",
                "param differs from the NumPy reference"),
        # over 100-120 steps the eps placement drifts past the growing tolerance (candidates only)
        **items("generated", "sparse_adam-long-trajectory", ["float32", "float64"], "failed",
                "param differs from the NumPy reference"),
        **items("sparse_adam", "maximize", ["float32", "float64"], "unsupported", "no maximize"),
        # the moments and the step count live in the torch state: param groups and resuming work
        **items("generated", "sparse_adam-param-groups", ALL, "passed"),
        **items("generated", "sparse_adam-state-dict-resume", ALL, "passed"),
        # the lifecycles (an lr changed between steps) and sizes (17 entries) find the same eps placement:
        # tests/candidates/mutants.py:AdamEpsSparseAdam gives optax's values bit for bit on both (replayed)
        **items("generated", "sparse_adam-lifecycle", ["float16", "float32", "float64"], "failed",
                "param differs from torch's SparseAdam"),
        **items("generated", "sparse_adam-sizes", ["float16", "float32", "float64"], "failed",
                "param differs from the NumPy reference"),
        item("generated", "sparse_adam-lifecycle", "bfloat16"): "passed",
        # and the configurations' covering array, shrunk to "eps=0.25, sparse steps" (2026-11-29)
        **items("generated", "sparse_adam-configurations", ["float32", "float64"], "failed",
                "configuration eps=0.25"),
        item("generated", "sparse_adam-sizes", "bfloat16"): "passed",
    })
    for nodeid in items("sparse_adam", "large-eps-added-to-uncorrected-root", ALL, "failed"):  # the cause is named
        assert records[nodeid].get("looks_like", {}).get("name") == "eps after bias correction", \
            records[nodeid]["message"]
