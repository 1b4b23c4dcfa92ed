"""Differential tests of conformance.kernels against stock torch on the same device.

Kernel paths (the ``path`` fixture): ``cpp`` (C++ on CPU tensors), ``triton`` (the Triton kernels
in Triton's interpreter on CPU tensors, in a process without CUDA) and, when CUDA is present,
``cuda-triton`` (compiled Triton kernels on CUDA tensors, against stock torch on CUDA).
"""

import os
import warnings

import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the first triton import
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

import math

import pytest
from torch.testing import assert_close

import conformance.kernels as K
from conformance.kernels import _build, _ops

def _triton_skip_reason():
    from importlib.metadata import PackageNotFoundError, version

    from conformance.backends.kernel import MIN_INTERPRETER_TRITON

    try:
        found = version("triton")
    except PackageNotFoundError:
        return "the triton package is not installed (torch's CPU wheels do not depend on it)"
    numbers = tuple(int(x) for x in found.split("+")[0].split(".")[:2] if x.isdigit())
    if INTERPRETED and numbers < MIN_INTERPRETER_TRITON:
        return (f"Triton's interpreter is checked from triton {MIN_INTERPRETER_TRITON} on; "
                f"this environment has triton {found}")
    return None


TRITON_SKIP = _triton_skip_reason()
NO_INTERPRETER = ("Triton's interpreter runs on CPU tensors only in a process without CUDA "
                  "(TRITON_INTERPRET=1 would interpret the CUDA kernels too); run "
                  "CUDA_VISIBLE_DEVICES= python -m pytest tests/test_kernels.py for it")
PATHS = [
    pytest.param(("cpu", "cpp"), id="cpp"),
    pytest.param(("cpu", "triton"), id="triton",
                 marks=[pytest.mark.skip(reason=TRITON_SKIP or NO_INTERPRETER)]
                 if TRITON_SKIP or not INTERPRETED else []),
]
if HAS_CUDA:
    PATHS.append(pytest.param(("cuda", "triton"), id="cuda-triton",
                              marks=[] if not (INTERPRETED or TRITON_SKIP) else pytest.mark.skip(
                                  reason=TRITON_SKIP or "TRITON_INTERPRET is set: the Triton kernels are not compiled")))
FAST_PATHS = [p for p in PATHS if p.id != "triton"]  # large inputs: not in the interpreter
TRITON_PATHS = [p for p in PATHS if p.id != "cpp"]
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA (torch.cuda.is_available() is False)")
FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
HALF_TOL = {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=5e-2, atol=5e-2)}
# tolerance against a float64 reference, by the dtype under test
REF_TOL = {**HALF_TOL, torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: {}}


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    """(device, impl) under test; the impl is also forced for the optimizers via the env var."""
    device, impl = request.param
    monkeypatch.setenv(K.IMPL_ENV_VAR, impl)
    return request.param


@pytest.fixture
def impl(path):
    return path[1]


@pytest.fixture
def device(path):
    return torch.device(path[0])


def sparse(indices, values, size):
    return torch.sparse_coo_tensor(
        torch.as_tensor(indices, dtype=torch.int64, device=values.device), values, size,
        check_invariants=False,
    )


def random_sparse(gen, size, sparse_dim, nnz, dtype=torch.float32, max_index=None):
    """Uncoalesced COO tensor with duplicates (indices drawn from a small range)."""
    cols = []
    for d in range(sparse_dim):
        hi = size[d] if max_index is None else min(size[d], max_index)
        cols.append(torch.randint(0, hi, (nnz,), generator=gen))
    indices = torch.stack(cols) if cols else torch.zeros((0, nnz), dtype=torch.int64)
    values = torch.randn((nnz, *size[sparse_dim:]), generator=gen, dtype=torch.float64)
    return sparse(indices, values.to(dtype), size)


# --------------------------------------------------------------------------- coalesce

COALESCE_CASES = [
    # (size, sparse_dim, nnz, max_index)
    ((50,), 1, 80, None),
    ((7, 9), 2, 60, None),
    ((4, 5, 6), 3, 100, 3),
    ((30, 4, 3), 1, 40, 10),  # hybrid: one sparse dim, two dense dims
    ((6, 5, 2), 2, 25, None),
    ((10, 3), 1, 0, None),  # nnz = 0
    ((3,), 0, 4, None),  # sparse_dim = 0: every entry is the same (dense) element
    ((1000,), 1, 500, 1),  # all duplicates
    ((5, 0), 1, 6, None),  # zero-width dense dim
]


@pytest.mark.parametrize("case", COALESCE_CASES, ids=lambda c: f"{c[0]}-sd{c[1]}-nnz{c[2]}")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_coalesce_matches_torch(impl, device, case, dtype):
    size, sparse_dim, nnz, max_index = case
    gen = torch.Generator().manual_seed(hash((size, nnz)) % 2**31)
    t = random_sparse(gen, size, sparse_dim, nnz, dtype, max_index).to(device)
    got = K.coalesce(t, impl=impl)
    expected = t.to(torch.float64).coalesce()
    assert got.is_sparse and got.is_coalesced()
    assert got.dtype == dtype and got.shape == t.shape and got.device == t.device
    assert_close(got._indices(), expected._indices(), rtol=0, atol=0)
    assert_close(got._values().to(torch.float64), expected._values(), **REF_TOL[dtype])
    if dtype in (torch.float32, torch.float64):
        assert_close(got.to_dense(), t.coalesce().to_dense())


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.complex64], ids=str)
def test_coalesce_other_dtypes_cpp(dtype):
    gen = torch.Generator().manual_seed(1)
    indices = torch.randint(0, 6, (2, 40), generator=gen)
    values = (torch.randn(40, generator=gen) * 5).to(dtype)
    t = sparse(indices, values, (6, 6))
    got = K.coalesce(t, impl="cpp")
    expected = t.coalesce()
    assert_close(got._indices(), expected._indices(), rtol=0, atol=0)
    assert_close(got._values(), expected._values())


def test_coalesce_half_sums_in_float32(impl, device):
    # torch sums 4096 float16 ones to 2048 (float16 stops at 2048); the kernel accumulates in float32.
    t = sparse(torch.zeros((1, 4096), dtype=torch.int64), torch.ones(4096, dtype=torch.float16, device=device), (3,))
    got = K.coalesce(t, impl=impl)
    assert got._values().tolist() == [4096.0]


def test_coalesce_noncontiguous_values(impl, device):
    values = torch.randn(3, 20, dtype=torch.float64, device=device).t()  # (20, 3), not contiguous
    t = sparse(torch.randint(0, 5, (1, 20)), values, (5, 3))
    assert not t._values().is_contiguous()
    got = K.coalesce(t, impl=impl)
    assert_close(got.to_dense(), t.coalesce().to_dense())


@pytest.mark.parametrize("path", FAST_PATHS, indirect=True)
def test_coalesce_large_random_matches_torch(impl, device):
    gen = torch.Generator().manual_seed(7)
    t = random_sparse(gen, (3000, 2000), 2, 200_000).to(device)
    got = K.coalesce(t, impl=impl)
    expected = t.coalesce()
    assert_close(got._indices(), expected._indices(), rtol=0, atol=0)
    assert_close(got._values(), expected._values())


@pytest.mark.parametrize("bad", [-1, 5], ids=["negative", "too-large"])
def test_coalesce_out_of_range_index_raises(impl, device, bad):
    t = sparse([[0, bad, 1]], torch.ones(3, device=device), (5,))
    with pytest.raises(ValueError, match=f"index {bad} .* out of range for size 5"):
        K.coalesce(t, impl=impl)


def test_coalesce_rejects_dense_and_non_tensors():
    with pytest.raises(TypeError, match="sparse COO"):
        K.coalesce(torch.ones(3))
    with pytest.raises(TypeError, match="torch.Tensor"):
        K.coalesce([1, 2, 3])


def test_coalesce_triton_rejects_integer_dtype():
    t = sparse([[0, 1]], torch.tensor([1, 2]), (3,))
    with pytest.raises(TypeError, match="floating"):
        K.coalesce(t, impl="triton")


# --------------------------------------------------------------------------- masked_mean


def reference_masked_mean(values, mask):
    v64 = values.detach().to(torch.float64).where(mask, 0.0)
    count = int(mask.sum())
    return v64.sum() / count if count else torch.tensor(float("nan"), dtype=torch.float64)


@pytest.mark.parametrize("shape", [(), (1,), (17,), (5, 7), (3, 4, 5), (2000,)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_masked_mean_value_and_gradient(impl, device, shape, dtype):
    gen = torch.Generator().manual_seed(len(shape) * 100 + sum(shape))
    values = torch.randn(shape, generator=gen, dtype=torch.float64).to(device, dtype)
    mask = (torch.rand(shape, generator=gen) > 0.4).to(device)
    if mask.numel():
        mask.view(-1)[0] = True
    values = values.where(mask, float("nan"))  # garbage outside the mask must not leak
    if values.numel() > 1:
        values.view(-1)[-1] = float("inf") if not mask.view(-1)[-1] else values.view(-1)[-1]
    values.requires_grad_(True)

    out = K.masked_mean(values, mask, impl=impl)
    assert out.shape == () and out.dtype == dtype
    tol = REF_TOL[dtype]
    assert_close(out.detach().to(torch.float64), reference_masked_mean(values, mask), **tol)

    out.backward(torch.tensor(3.0, dtype=dtype, device=device))
    expected_grad = torch.where(mask, 3.0 / int(mask.sum()), 0.0).to(dtype)
    assert_close(values.grad, expected_grad, **tol)
    assert torch.isfinite(values.grad).all()


def test_masked_mean_empty_mask_gives_nan_and_zero_gradient(impl, device):
    values = torch.tensor([1.0, float("nan"), float("inf")], device=device, requires_grad=True)
    out = K.masked_mean(values, torch.zeros(3, dtype=torch.bool, device=device), impl=impl)
    assert torch.isnan(out)
    out.backward()
    assert_close(values.grad, torch.zeros(3, device=device), rtol=0, atol=0)


def test_masked_mean_of_inf_and_minus_inf_is_nan_without_a_warning(impl, device):
    """IEEE 754: inf + -inf is NaN, silently, on every path (Triton's interpreter computes in NumPy,
    which warns "invalid value encountered" unless the kernels say otherwise)."""
    values = torch.tensor([float("inf"), float("-inf"), 5.0], device=device)
    mask = torch.tensor([True, True, False], device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = K.masked_mean(values, mask, impl=impl)
    assert torch.isnan(out)


def test_masked_mean_zero_elements(impl, device):
    values = torch.empty(0, 4, device=device, requires_grad=True)
    out = K.masked_mean(values, torch.empty(0, 4, dtype=torch.bool, device=device), impl=impl)
    assert torch.isnan(out)
    out.backward()
    assert values.grad.shape == (0, 4)


def test_masked_mean_noncontiguous_inputs(impl, device):
    base = torch.randn(6, 8, dtype=torch.float64, device=device)
    values = base.t().requires_grad_(True)
    mask = torch.rand(6, 8, device=device).t() > 0.5
    assert not values.is_contiguous() and not mask.is_contiguous()
    out = K.masked_mean(values, mask, impl=impl)
    assert_close(out, reference_masked_mean(values, mask))
    out.backward()
    assert_close(values.grad, torch.where(mask, 1.0 / int(mask.sum()), 0.0).double())


def test_masked_mean_bad_inputs():
    v = torch.randn(4)
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        K.masked_mean(v, torch.ones(4))
    with pytest.raises(ValueError, match="does not match values shape"):
        K.masked_mean(v, torch.ones(3, dtype=torch.bool))
    with pytest.raises(TypeError, match="values must be float16, bfloat16, float32 or float64"):
        K.masked_mean(torch.arange(4), torch.ones(4, dtype=torch.bool))
    with pytest.raises(RuntimeError, match="same device"):
        K.masked_mean(v, torch.ones(4, dtype=torch.bool, device="meta"))
    with pytest.raises(TypeError, match="torch.Tensor"):
        K.masked_mean([1.0, 2.0], torch.ones(2, dtype=torch.bool))


@pytest.mark.slow
def test_masked_mean_under_torch_compile():
    compiled = torch.compile(lambda v, m: K.masked_mean(v, m, impl="cpp") * 2, fullgraph=True)
    values = torch.randn(5, 6)
    mask = torch.rand(5, 6) > 0.3
    assert_close(compiled(values, mask), values[mask].mean() * 2)
    mask2 = torch.rand(5, 6) > 0.7
    assert_close(compiled(values, mask2), values[mask2].mean() * 2)


def test_ops_pass_torch_library_opcheck():
    values = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    mask = torch.rand(4, 5) > 0.5
    torch.library.opcheck(torch.ops.conformance_kernels.masked_mean, (values, mask, "cpp"))
    indices = torch.randint(0, 4, (2, 12))
    torch.library.opcheck(
        torch.ops.conformance_kernels.coalesce, (indices, torch.randn(12, 3), [4, 4, 3], "cpp"),
        test_utils=("test_schema", "test_faketensor"),
    )
    param, m, v = torch.randn(6, 3), torch.zeros(6, 3), torch.zeros(6, 3)
    idx, vals = torch.tensor([[1, 4, 1]]), torch.randn(3, 3)
    torch.library.opcheck(
        torch.ops.conformance_kernels.sparse_adam_step_,
        (param, m, v, idx, vals, 0.01, 0.9, 0.99, 1e-8, False, "cpp"),
    )
    torch.library.opcheck(
        torch.ops.conformance_kernels.adagrad_step_, (param, m, idx, vals, 0.01, 1e-10, True, "cpp")
    )


# --------------------------------------------------------------------------- optimizers


def clone_params(params):
    return [torch.nn.Parameter(p.detach().clone()) for p in params]


def run_both(ref_cls, ker_cls, init, grad_steps, compare_dtype=None, tol=None, device="cpu", **kwargs):
    """Step a stock and a kernel optimizer over the same gradients on ``device``; compare params and state.

    ``compare_dtype``: run the stock optimizer in this dtype (e.g. float64 for half inputs).
    """
    init = [p.to(device) for p in init]
    grad_steps = [[None if g is None else g.to(device) for g in grads] for grads in grad_steps]
    ref_params = [torch.nn.Parameter(p.detach().to(compare_dtype or p.dtype)) for p in init]
    ker_params = clone_params(init)
    ref_opt = ref_cls(ref_params, **kwargs)
    ker_opt = ker_cls(ker_params, **kwargs)
    for grads in grad_steps:
        for p, g in zip(ref_params, grads):
            p.grad = None if g is None else g.to(compare_dtype or g.dtype)
        for p, g in zip(ker_params, grads):
            p.grad = g
        ref_opt.step()
        ker_opt.step()
    tol = tol or {}
    for rp, kp in zip(ref_params, ker_params):
        assert_close(kp.detach().to(rp.dtype), rp.detach(), **tol)
        rstate, kstate = ref_opt.state[rp], ker_opt.state[kp]
        assert rstate.keys() == kstate.keys()
        for key in rstate:
            if torch.is_tensor(rstate[key]) and rstate[key].dim() > 0:
                assert_close(kstate[key].to(rp.dtype), rstate[key], **tol)
            else:
                assert type(kstate[key]) is type(rstate[key])
                assert_close(kstate[key], rstate[key])
    return ref_opt, ker_opt


def grad_sequence(gen, shape, sparse_dim, steps, nnz, dtype, max_index=None, empty_step=None):
    seq = []
    for s in range(steps):
        n = 0 if s == empty_step else nnz
        seq.append([random_sparse(gen, shape, sparse_dim, n, dtype, max_index)])
    return seq


OPT_SHAPES = [
    # (param shape, sparse_dim, nnz, max_index)
    ((40, 8), 1, 30, 12),  # embedding-like hybrid gradient with duplicates
    ((25,), 1, 20, 10),
    ((6, 7, 3), 2, 15, 4),  # two sparse dims + dense trailing dim
    ((9, 70), 1, 12, None),  # wide rows (several column blocks in Triton)
]


def in_slow_tier(params: dict) -> bool:
    """The Triton interpreter takes about a second per optimizer case: the fast tier (conftest.py)
    runs each shape in two of the four (dtype, direction) pairs, float32 minimizing and float64
    maximizing, and the slow tier the other two; the C++ path runs all four in the fast tier."""
    if "maximize" not in params or "dtype" not in params or params.get("path", ("", ""))[1] != "triton":
        return False
    return params["maximize"] != (params["dtype"] == torch.float64)


@pytest.mark.parametrize("case", OPT_SHAPES, ids=lambda c: f"{c[0]}-sd{c[1]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("maximize", [False, True], ids=["min", "max"])
def test_sparse_adam_matches_torch(impl, device, case, dtype, maximize):
    shape, sparse_dim, nnz, max_index = case
    gen = torch.Generator().manual_seed(11)
    init = [torch.randn(shape, generator=gen, dtype=dtype)]
    steps = grad_sequence(gen, shape, sparse_dim, 4, nnz, dtype, max_index, empty_step=2)
    run_both(torch.optim.SparseAdam, K.SparseAdam, init, steps, device=device,
             lr=0.05, betas=(0.8, 0.95), eps=1e-6, maximize=maximize)


@pytest.mark.parametrize("case", OPT_SHAPES, ids=lambda c: f"{c[0]}-sd{c[1]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("maximize", [False, True], ids=["min", "max"])
def test_adagrad_matches_torch(impl, device, case, dtype, maximize):
    shape, sparse_dim, nnz, max_index = case
    gen = torch.Generator().manual_seed(12)
    init = [torch.randn(shape, generator=gen, dtype=dtype)]
    steps = grad_sequence(gen, shape, sparse_dim, 4, nnz, dtype, max_index, empty_step=1)
    run_both(torch.optim.Adagrad, K.Adagrad, init, steps, device=device, lr=0.1, lr_decay=0.3,
             initial_accumulator_value=0.2, eps=1e-8, maximize=maximize)


@pytest.mark.parametrize("path", TRITON_PATHS, indirect=True)
def test_wide_tiles_stay_within_tritons_tensor_limit(impl, device):
    """300 gradient rows of width 32 (the embedding benchmark's shape): the interpreter's biggest
    tile would be 256 x 256 x 32 = 2,097,152 elements, over Triton's 1,048,576 (InterpreterError
    before the tile was capped)."""
    gen = torch.Generator().manual_seed(13)
    shape = (400, 32)
    init = [torch.randn(shape, generator=gen)]
    steps = grad_sequence(gen, shape, 1, 2, 300, torch.float32)
    run_both(torch.optim.Adagrad, K.Adagrad, init, steps, device=device, lr=0.1)
    run_both(torch.optim.SparseAdam, K.SparseAdam, init, steps, device=device, lr=0.05)
    t = random_sparse(gen, shape, 1, 300).to(device)
    assert_close(K.coalesce(t, impl=impl).to_dense(), t.coalesce().to_dense())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("opt", ["sparse_adam", "adagrad"])
def test_optimizers_half_precision_against_float64(impl, device, dtype, opt):
    gen = torch.Generator().manual_seed(13)
    init = [torch.randn((30, 8), generator=gen).to(device, dtype)]
    steps = [[g.to(device) for g in grads] for grads in grad_sequence(gen, (30, 8), 1, 3, 25, dtype, max_index=10)]
    ref_cls, ker_cls, kwargs = {
        "sparse_adam": (torch.optim.SparseAdam, K.SparseAdam, dict(lr=0.01)),
        "adagrad": (torch.optim.Adagrad, K.Adagrad, dict(lr=0.01, lr_decay=0.1)),
    }[opt]
    ref_params = [torch.nn.Parameter(p.to(torch.float64)) for p in init]
    ker_params = clone_params(init)
    ref_opt, ker_opt = ref_cls(ref_params, **kwargs), ker_cls(ker_params, **kwargs)
    for (g,) in steps:
        ref_params[0].grad = g.to(torch.float64)
        ker_params[0].grad = g
        ref_opt.step()
        ker_opt.step()
    assert ker_params[0].dtype == dtype
    assert_close(ker_params[0].detach().double(), ref_params[0].detach(), **HALF_TOL[dtype])
    for key in ("exp_avg", "exp_avg_sq", "sum"):
        if key in ref_opt.state[ref_params[0]]:
            got = ker_opt.state[ker_params[0]][key]
            assert got.dtype == dtype
            assert_close(got.double(), ref_opt.state[ref_params[0]][key], **HALF_TOL[dtype])


def test_explicit_zero_gradient_entries_are_updated(impl, device):
    # An explicit zero in the sparse gradient is a specified entry: moments decay there.
    p = torch.nn.Parameter(torch.ones(4, 2, device=device))
    opt = K.SparseAdam([p], lr=0.1)
    p.grad = sparse([[1]], torch.ones(1, 2, device=device), (4, 2))
    opt.step()
    before = opt.state[p]["exp_avg"].clone()
    p.grad = sparse([[1, 2]], torch.zeros(2, 2, device=device), (4, 2))
    opt.step()
    exp_avg = opt.state[p]["exp_avg"]
    assert_close(exp_avg[1], before[1] * 0.9)
    assert_close(exp_avg[0], torch.zeros(2, device=device))
    assert opt.state[p]["exp_avg_sq"][2].eq(0).all()  # specified, but g^2 = 0 keeps it at 0
    assert opt.state[p]["step"] == 2


def test_sparse_adam_nnz_zero_counts_step_without_update(impl, device):
    p = torch.nn.Parameter(torch.randn(5, 3, device=device))
    before = p.detach().clone()
    opt = K.SparseAdam([p])
    p.grad = sparse(torch.empty((1, 0), dtype=torch.int64), torch.empty(0, 3, device=device), (5, 3))
    opt.step()
    opt.step()
    assert opt.state[p]["step"] == 2
    assert_close(p.detach(), before, rtol=0, atol=0)


def test_embedding_training_loop_drop_in(impl, device):
    torch.manual_seed(0)
    for ref_cls, ker_cls in [(torch.optim.SparseAdam, K.SparseAdam), (torch.optim.Adagrad, K.Adagrad)]:
        ref = torch.nn.Embedding(50, 6, sparse=True, device=device)
        ker = torch.nn.Embedding(50, 6, sparse=True, device=device)
        ker.load_state_dict(ref.state_dict())
        ref_opt, ker_opt = ref_cls(ref.parameters(), lr=0.05), ker_cls(ker.parameters(), lr=0.05)
        for _ in range(3):
            idx = torch.randint(0, 50, (4, 7), device=device)
            for emb, opt in ((ref, ref_opt), (ker, ker_opt)):
                opt.zero_grad()
                emb(idx).square().sum().backward()
                opt.step()
        assert_close(ker.weight, ref.weight)


def test_multiple_params_and_groups(impl, device):
    gen = torch.Generator().manual_seed(3)
    init = [torch.randn(10, 4, generator=gen).to(device), torch.randn(12, generator=gen).to(device)]
    ref = clone_params(init)
    ker = clone_params(init)
    groups = lambda ps: [{"params": [ps[0]], "lr": 0.1}, {"params": [ps[1]], "lr": 0.01, "betas": (0.5, 0.6)}]
    ref_opt, ker_opt = torch.optim.SparseAdam(groups(ref)), K.SparseAdam(groups(ker))
    for _ in range(2):
        grads = [random_sparse(gen, (10, 4), 1, 6).to(device), random_sparse(gen, (12,), 1, 5).to(device)]
        for params in (ref, ker):
            for p, g in zip(params, grads):
                p.grad = g
        ref_opt.step()
        ker_opt.step()
    for r, k in zip(ref, ker):
        assert_close(k, r)


def test_adagrad_dense_and_sparse_params_together(impl, device):
    gen = torch.Generator().manual_seed(4)
    init = [torch.randn(8, 3, generator=gen), torch.randn(5, generator=gen)]
    steps = [[random_sparse(gen, (8, 3), 1, 5), torch.randn(5, generator=gen)] for _ in range(3)]
    run_both(torch.optim.Adagrad, K.Adagrad, init, steps, device=device, lr=0.1, lr_decay=0.01)


def test_noncontiguous_param_is_updated_correctly(impl, device):
    gen = torch.Generator().manual_seed(5)
    base = torch.randn(6, 10, generator=gen).to(device)
    ref_p = torch.nn.Parameter(base.clone().t())
    ker_p = torch.nn.Parameter(base.clone().t())
    assert not ker_p.is_contiguous()
    ref_opt, ker_opt = torch.optim.Adagrad([ref_p], lr=0.1), K.Adagrad([ker_p], lr=0.1)
    for _ in range(2):
        g = random_sparse(gen, (10, 6), 1, 7, max_index=5).to(device)
        ref_p.grad, ker_p.grad = g, g
        ref_opt.step()
        ker_opt.step()
    assert_close(ker_p, ref_p)
    assert_close(ker_opt.state[ker_p]["sum"], ref_opt.state[ref_p]["sum"])


def test_state_dict_roundtrip_with_torch():
    gen = torch.Generator().manual_seed(6)
    for ref_cls, ker_cls in [(torch.optim.SparseAdam, K.SparseAdam), (torch.optim.Adagrad, K.Adagrad)]:
        init = torch.randn(10, 3, generator=gen)
        grads = [random_sparse(gen, (10, 3), 1, 6) for _ in range(4)]
        ref_p, ker_p = clone_params([init, init])
        ref_opt, ker_opt = ref_cls([ref_p], lr=0.1), ker_cls([ker_p], lr=0.1)
        for g in grads[:2]:
            ref_p.grad, ker_p.grad = g, g
            ref_opt.step()
            ker_opt.step()
        # continue each from the other's state_dict
        ref2_p, ker2_p = clone_params([ker_p, ref_p])
        ref2, ker2 = ref_cls([ref2_p], lr=0.1), ker_cls([ker2_p], lr=0.1)
        ref2.load_state_dict(ker_opt.state_dict())
        ker2.load_state_dict(ref_opt.state_dict())
        for g in grads[2:]:
            ref2_p.grad, ker2_p.grad = g, g
            ref2.step()
            ker2.step()
        assert_close(ker2_p, ref2_p)
        assert ker2.state_dict()["state"][0].keys() == ref2.state_dict()["state"][0].keys()


def test_constructors_match_torch_validation():
    p = [torch.nn.Parameter(torch.randn(3))]
    for ref_cls, ker_cls, kwargs in [
        (torch.optim.SparseAdam, K.SparseAdam, dict(lr=-1.0)),
        (torch.optim.SparseAdam, K.SparseAdam, dict(eps=0.0)),
        (torch.optim.SparseAdam, K.SparseAdam, dict(betas=(1.0, 0.9))),
        (torch.optim.SparseAdam, K.SparseAdam, dict(betas=(0.9, -0.1))),
        (torch.optim.Adagrad, K.Adagrad, dict(lr=-1.0)),
        (torch.optim.Adagrad, K.Adagrad, dict(lr_decay=-1.0)),
        (torch.optim.Adagrad, K.Adagrad, dict(weight_decay=-1.0)),
        (torch.optim.Adagrad, K.Adagrad, dict(initial_accumulator_value=-1.0)),
        (torch.optim.Adagrad, K.Adagrad, dict(eps=-1.0)),
    ]:
        with pytest.raises(ValueError) as ref_err:
            ref_cls(p, **kwargs)
        with pytest.raises(ValueError) as ker_err:
            ker_cls(p, **kwargs)
        assert str(ker_err.value) == str(ref_err.value)
    with pytest.raises(ValueError, match="SparseAdam requires dense parameter tensors"):
        K.SparseAdam([torch.randn(3).to_sparse().requires_grad_()])
    assert K.SparseAdam(p).defaults == torch.optim.SparseAdam(p).defaults
    assert K.Adagrad(p).defaults == torch.optim.Adagrad(p).defaults
    assert issubclass(K.SparseAdam, torch.optim.Optimizer) and issubclass(K.Adagrad, torch.optim.Optimizer)


def test_torch_error_messages_reproduced():
    p = torch.nn.Parameter(torch.randn(4, 2))
    p.grad = torch.randn(4, 2)
    with pytest.raises(RuntimeError, match="^SparseAdam does not support dense gradients, please consider Adam instead$"):
        K.SparseAdam([p]).step()
    p.grad = sparse([[0]], torch.ones(1, 2), (4, 2))
    opt = K.Adagrad([p], weight_decay=0.1)
    with pytest.raises(RuntimeError, match="^weight_decay option is not compatible with sparse gradients$"):
        opt.step()


@pytest.mark.parametrize("opt_cls", [K.SparseAdam, K.Adagrad], ids=["sparse_adam", "adagrad"])
def test_optimizer_bad_gradients_raise(impl, device, opt_cls):
    """CPU: step() raises. CUDA: the step is a no-op on the device and the error is deferred to
    check_index_errors() (or a later step), since raising at once would need a sync."""
    p = torch.nn.Parameter(torch.zeros(5, 2, device=device))
    before = p.detach().clone()
    opt = opt_cls([p])
    cases = [
        (sparse([[1, 5]], torch.ones(2, 2, device=device), (5, 2)), ValueError, "index 5 .* out of range for size 5"),
        (sparse([[1, -2]], torch.ones(2, 2, device=device), (5, 2)), ValueError, "index -2 .* out of range"),
    ]
    for grad, exc, pattern in cases:
        p.grad = grad
        with pytest.raises(exc, match=pattern):
            opt.step()
            opt.check_index_errors()
    assert_close(p.detach(), before, rtol=0, atol=0)
    for key, state in opt.state[p].items():
        if torch.is_tensor(state) and state.dim():
            assert_close(state, torch.full_like(state, state.view(-1)[0].item()), rtol=0, atol=0)


def test_step_ops_reject_mismatched_inputs(impl, device):
    """torch refuses such .grad assignments, so check the operators themselves."""
    ones = lambda *shape, **kw: torch.ones(*shape, device=kw.pop("device", device), **kw)
    zeros = lambda *shape, **kw: torch.zeros(*shape, device=device, **kw)
    p, m, v = zeros(5, 2), zeros(5, 2), zeros(5, 2)
    idx = torch.tensor([[1, 3]], device=device)
    adam = lambda *a: torch.ops.conformance_kernels.sparse_adam_step_(*a, 0.1, 0.9, 0.99, 1e-8, False, impl)
    with pytest.raises(TypeError, match="gradient dtype torch.float64 does not match"):
        adam(p, m, v, idx, ones(2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="do not describe a sparse tensor of size"):
        adam(p, m, v, idx, ones(2, 3))
    with pytest.raises(ValueError, match="values must have shape"):
        adam(p, m, v, idx, ones(3, 2))
    with pytest.raises(ValueError, match="exp_avg_sq shape"):
        adam(p, m, zeros(4, 2), idx, ones(2, 2))
    with pytest.raises(TypeError, match="indices must be int64"):
        adam(p, m, v, idx.int(), ones(2, 2))
    with pytest.raises(ValueError, match="exp_avg must be contiguous"):
        adam(p, zeros(2, 5).t(), v, idx, ones(2, 2))
    with pytest.raises(TypeError, match="param must be float16"):
        adam(p.long(), m.long(), v.long(), idx, ones(2, 2).long())
    with pytest.raises(RuntimeError, match="same device"):
        torch.ops.conformance_kernels.adagrad_step_(p, m, idx, ones(2, 2, device="meta"), 0.1, 1e-10, False, impl)
    assert not p.any() and not m.any() and not v.any()


# --------------------------------------------------------------------------- dispatch and build


def test_impl_selection():
    assert K.resolve_impl("CPP") == "cpp"
    with pytest.raises(ValueError, match="must be one of"):
        K.resolve_impl("cuda-graphs")
    with pytest.raises(RuntimeError, match="C\\+\\+ kernels need CPU tensors"):
        _ops._backend("cpp", torch.device("meta"))
    with pytest.raises(RuntimeError, match="no kernels for device"):
        _ops._backend("auto", torch.device("meta"))


def test_missing_compiler_gives_clear_error(monkeypatch):
    monkeypatch.setattr(_build, "_LOADED", False)
    monkeypatch.setattr(_build, "_registered", lambda: False)  # as in a process that never loaded them
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(K.KernelBuildError, match="no C\\+\\+ compiler was found"):
        K.load_cpu_kernels()


def test_build_is_cached_in_user_cache():
    K.load_cpu_kernels()
    directory = K.build_directory()
    assert directory.is_dir()
    assert any(path.suffix == ".so" for path in directory.iterdir())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_hugepage_state_is_a_plain_full_like(monkeypatch, dtype):
    from conformance.kernels._memory import state_like

    param = torch.empty(1 << 21, 3, dtype=dtype)  # >= 4 MiB: huge-page path
    state = state_like(param, 0.25)
    assert state.shape == param.shape and state.dtype == dtype and state.is_contiguous()
    assert state.data_ptr() % (2 << 20) == 0
    assert_close(state, torch.full_like(param, 0.25), rtol=0, atol=0)
    monkeypatch.setenv("CONFORMANCE_KERNEL_HUGEPAGES", "0")
    assert state_like(param, 1.0)._base is None


@pytest.mark.parametrize("mode", ["1", "advise", "0"])
def test_hugepage_params_collapse_by_default_and_fall_back(monkeypatch, mode):
    from conformance.kernels import _memory

    calls = []

    def refusing_madvise(start, length, advice):
        calls.append(advice)
        return -1 if advice == _memory._MADV_COLLAPSE else 0  # e.g. Linux < 6.1

    monkeypatch.setenv("CONFORMANCE_KERNEL_HUGEPAGES", mode)
    monkeypatch.setattr(_memory, "_madvise", lambda: refusing_madvise)
    param = torch.nn.Parameter(torch.randn(1 << 20, 8))  # 32 MiB
    before = param.detach().clone()
    opt = K.Adagrad([param], lr=0.5)
    expected = {"1": [_memory._MADV_HUGEPAGE, _memory._MADV_COLLAPSE],
                "advise": [_memory._MADV_HUGEPAGE], "0": []}[mode]
    assert calls[: len(expected)] == expected and _memory._MADV_COLLAPSE not in calls[len(expected):]
    assert_close(param.detach(), before, rtol=0, atol=0)  # refused collapse: param untouched
    param.grad = sparse(torch.tensor([[3, 3, 7]]), torch.ones(3, 8), param.shape)
    opt.step()  # still steps correctly on small pages
    ref = torch.nn.Parameter(before.clone())
    ref.grad = param.grad
    stock = torch.optim.Adagrad([ref], lr=0.5)
    stock.step()
    assert_close(param.detach(), ref.detach())


def test_coalesce_huge_shape_uses_unpacked_sort(impl, device):
    # 61 key bits + position bits exceed one 63-bit word: exercises the key/position pair sort.
    size = (2**31, 2**30)
    gen = torch.Generator().manual_seed(8)
    indices = torch.stack([torch.randint(0, 4, (600,), generator=gen) * 2**29,
                           torch.randint(0, 3, (600,), generator=gen) * 2**28])
    t = sparse(indices, torch.randn(600, generator=gen, dtype=torch.float64).to(device), size)
    got, expected = K.coalesce(t, impl=impl), t.coalesce()
    assert_close(got._indices(), expected._indices(), rtol=0, atol=0)
    assert_close(got._values(), expected._values())


def test_coalesce_shape_beyond_int64_is_rejected():
    # torch itself refuses such a tensor, so call the operator on its parts
    with pytest.raises(ValueError, match="int64"):
        torch.ops.conformance_kernels.coalesce(torch.ones(2, 1, dtype=torch.int64), torch.ones(1), [2**40, 2**40], "cpp")


@pytest.mark.skipif(TRITON_SKIP is not None and "not installed" in TRITON_SKIP, reason=str(TRITON_SKIP))
@pytest.mark.slow
def test_triton_on_cpu_without_interpreter_is_a_clear_error():
    import subprocess
    import sys

    code = (
        "import torch, conformance.kernels as K\n"
        "K.masked_mean(torch.ones(3), torch.ones(3, dtype=torch.bool), impl='triton')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "RuntimeError" in proc.stderr and "TRITON_INTERPRET=1" in proc.stderr


# --------------------------------------------------------------------------- launch-bound GPU step (host side)


def test_keys_are_sorted_in_the_narrowest_integer_type():
    from conformance.kernels._triton import key_dtype

    assert key_dtype(5) == torch.int16
    assert key_dtype(2**15 - 1) == torch.int16  # the sentinel (= total) must fit too
    assert key_dtype(2**15) == torch.int32
    assert key_dtype(1_000_000) == torch.int32  # the 1M-row embedding benchmark
    assert key_dtype(2**31 - 1) == torch.int32
    assert key_dtype(2**31) == torch.int64


@pytest.mark.parametrize("path", TRITON_PATHS, indirect=True)
@pytest.mark.parametrize("shape", [(40,), (300, 200), (2**31, 4), (3, 4, 5, 6, 7)], ids=str)
def test_sorted_keys_mark_bad_indices_with_a_last_sentinel(device, shape):
    from conformance.kernels._triton import SortedKeys, key_dtype

    gen = torch.Generator().manual_seed(9)
    sparse_dim = len(shape) if len(shape) != 2 or shape[0] != 2**31 else 1
    indices = torch.stack([torch.randint(0, min(s, 50), (64,), generator=gen) for s in shape[:sparse_dim]])
    keys = SortedKeys(indices.to(device), list(shape[:sparse_dim]))
    total = math.prod(shape[:sparse_dim])
    assert keys.keys.dtype == key_dtype(total)
    linear = torch.zeros(64, dtype=torch.int64)
    for d, s in enumerate(shape[:sparse_dim]):
        linear = linear * s + indices[d]
    expected, expected_perm = torch.sort(linear, stable=True)
    assert_close(keys.keys.cpu().long(), expected, rtol=0, atol=0)
    assert_close(keys.perm.cpu(), expected_perm, rtol=0, atol=0)
    assert not bool(keys.bad_indices())
    indices[-1, 7] = shape[sparse_dim - 1]  # one past the end of the last sparse dim
    bad = SortedKeys(indices.to(device), list(shape[:sparse_dim]))
    assert bool(bad.bad_indices()) and int(bad.keys[-1]) == total


def test_split_scalar_keeps_48_bits():
    from conformance.kernels._triton import split_scalar

    for x in (0.05, 1 - 0.999, 1e-8, 0.1 * math.sqrt(1 - 0.999**7) / (1 - 0.9**7), -3.3e-30, 7.0):
        hi, lo = split_scalar(x)
        assert torch.tensor(hi, dtype=torch.float32).item() == hi  # both halves are float32 values
        assert torch.tensor(lo, dtype=torch.float32).item() == lo
        assert abs((hi + lo) - x) <= abs(x) * 2.0**-46
    assert split_scalar(1e300) == (math.inf, 0.0)


_SYNCING = {"item", "tolist", "__bool__", "__int__", "__float__", "nonzero", "unique",
            "unique_consecutive", "masked_select", "numpy", "cpu", "_local_scalar_dense"}


class _SyncRecorder(torch.overrides.TorchFunctionMode):
    """Records torch calls that read device values on the host (a sync on CUDA tensors)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in _SYNCING:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("path", TRITON_PATHS, indirect=True)
def test_triton_step_reads_no_device_value_and_coalesce_reads_one(device):
    from conformance.kernels import _triton

    gen = torch.Generator().manual_seed(10)
    grad = random_sparse(gen, (64, 8), 1, 40, max_index=20).to(device)
    p, m, v, s = (torch.rand(64, 8, generator=gen).to(device) for _ in range(4))
    recorder = _SyncRecorder()
    with recorder:
        _triton.sparse_adam_step_(p, m, v, grad._indices(), grad._values(), 0.01, 0.9, 0.99, 1e-8,
                                  False, eager_check=False)
        _triton.adagrad_step_(p, s, grad._indices(), grad._values(), 0.01, 1e-10, False,
                              eager_check=False)
    assert recorder.calls == []
    with recorder:
        _triton.coalesce(grad._indices(), grad._values(), [64, 8], eager_check=False)
    # one read: the number of unique rows sizes the result (plus the bad-index sentinel, same copy)
    assert recorder.calls == ["tolist"]
    bad = grad._indices().clone()
    bad[0, 3] = 64
    with pytest.raises(ValueError, match="index 64 at position 3 .* out of range for size 64"):
        _triton.coalesce(bad, grad._values(), [64, 8], eager_check=False)


@pytest.mark.parametrize("path", TRITON_PATHS, indirect=True)
@pytest.mark.parametrize("which", ["sparse_adam", "adagrad"])
def test_triton_step_with_a_bad_index_changes_nothing_and_reports_later(device, which):
    from conformance.kernels import _triton

    p = torch.randn(6, 3, device=device)
    state = torch.rand(6, 3, device=device)
    before = (p.clone(), state.clone())
    indices = torch.tensor([[0, 2, 6, 2]], device=device)  # 6 is out of range for 6 rows
    values = torch.ones(4, 3, device=device)
    if which == "sparse_adam":
        check = _triton.sparse_adam_step_(p, state, state.clone(), indices, values, 0.1, 0.9, 0.99,
                                          1e-8, False, eager_check=False)
    else:
        check = _triton.adagrad_step_(p, state, indices, values, 0.1, 1e-10, False, eager_check=False)
    assert isinstance(check, _triton.IndexCheck)  # the step itself did not raise
    with pytest.raises(ValueError, match="index 6 at position 2 of sparse dimension 0 is out of range for size 6"):
        check.wait()
    assert_close((p, state), before, rtol=0, atol=0)
    good = _triton.adagrad_step_(p, state, indices.clamp(max=5), values, 0.1, 1e-10, False,
                                 eager_check=False)
    good.wait()  # no error
    assert not torch.equal(p, before[0])


@pytest.mark.parametrize("path", TRITON_PATHS, indirect=True)
@pytest.mark.parametrize("opt", ["sparse_adam", "adagrad"])
def test_capturable_step_matches_torch(impl, device, opt):
    """capturable=True: step count on the device, step size computed there (bias corrections and
    lr decay change every step, so a replayed graph must not bake them in)."""
    gen = torch.Generator().manual_seed(14)
    ref_cls, ker_cls, kwargs = {
        "sparse_adam": (torch.optim.SparseAdam, K.SparseAdam, dict(lr=0.05, betas=(0.8, 0.95))),
        "adagrad": (torch.optim.Adagrad, K.Adagrad, dict(lr=0.1, lr_decay=0.3)),
    }[opt]
    init = torch.randn(20, 4, generator=gen, dtype=torch.float64).to(device)
    ref_p, ker_p = torch.nn.Parameter(init.clone()), torch.nn.Parameter(init.clone())
    ref_opt, ker_opt = ref_cls([ref_p], **kwargs), ker_cls([ker_p], capturable=True, **kwargs)
    for _ in range(4):
        g = random_sparse(gen, (20, 4), 1, 12, torch.float64, max_index=8).to(device)
        ref_p.grad, ker_p.grad = g, g
        ref_opt.step()
        ker_opt.step()
    step = ker_opt.state[ker_p]["step"]
    assert torch.is_tensor(step) and step.device.type == torch.device(device).type and float(step) == 4.0
    assert_close(ker_p.detach(), ref_p.detach())
    with pytest.raises(TypeError, match="capturable must be a bool"):
        ker_cls([ker_p], capturable="yes")


@needs_cuda
@pytest.mark.skipif(INTERPRETED or TRITON_SKIP is not None,
                    reason=TRITON_SKIP or "TRITON_INTERPRET is set: the Triton kernels are not compiled")
def test_cuda_step_makes_no_sync():
    p = torch.nn.Parameter(torch.randn(1000, 16, device="cuda"))
    opt = K.SparseAdam([p], lr=0.01)
    idx = torch.randint(0, 1000, (300,), device="cuda")
    grad = torch.sparse_coo_tensor(idx[None], torch.randn(300, 16, device="cuda"), p.shape)
    p.grad = grad
    opt.step()  # first step allocates the state
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            opt.step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    opt.check_index_errors()


@needs_cuda
@pytest.mark.skipif(INTERPRETED or TRITON_SKIP is not None,
                    reason=TRITON_SKIP or "TRITON_INTERPRET is set: the Triton kernels are not compiled")
@pytest.mark.parametrize("opt", ["sparse_adam", "adagrad"])
def test_cuda_graph_capture_and_replay_matches_torch(opt):
    """The step, captured once in a CUDA graph with a static gradient buffer, replayed per step."""
    ref_cls, ker_cls, kwargs = {
        "sparse_adam": (torch.optim.SparseAdam, K.SparseAdam, dict(lr=0.05)),
        "adagrad": (torch.optim.Adagrad, K.Adagrad, dict(lr=0.1, lr_decay=0.2)),
    }[opt]
    rows, dim, nnz = 500, 32, 256
    gen = torch.Generator(device="cuda").manual_seed(15)
    init = torch.randn(rows, dim, device="cuda", generator=gen)
    ref_p, ker_p = torch.nn.Parameter(init.clone()), torch.nn.Parameter(init.clone())
    ref_opt, ker_opt = ref_cls([ref_p], **kwargs), ker_cls([ker_p], capturable=True, **kwargs)
    ker_p.grad = torch.sparse_coo_tensor(torch.randint(0, rows, (1, nnz), device="cuda", generator=gen),
                                         torch.randn(nnz, dim, device="cuda", generator=gen), (rows, dim))
    static_idx, static_val = ker_p.grad._indices(), ker_p.grad._values()  # the gradient's own buffers

    def new_grad():
        static_idx.copy_(torch.randint(0, rows, (1, nnz), device="cuda", generator=gen))
        static_val.copy_(torch.randn(nnz, dim, device="cuda", generator=gen))
        ref_p.grad = torch.sparse_coo_tensor(static_idx.clone(), static_val.clone(), (rows, dim))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph: state allocated, kernels compiled
        for _ in range(2):
            new_grad()
            ref_opt.step()
            ker_opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ker_opt.step()
    for _ in range(4):
        new_grad()
        ref_opt.step()
        graph.replay()
    torch.cuda.synchronize()
    assert float(ker_opt.state[ker_p]["step"]) == 6.0
    assert_close(ker_p.detach(), ref_p.detach())


@pytest.mark.parametrize("bad", [
    ("coalesce", dict(indices=[[0, 7]], values=[1.0, 2.0], size=[5]), ValueError, "index 7 at position 1 .* size 5"),
    ("coalesce", dict(indices=[[0, -3]], values=[1.0, 2.0], size=[5]), ValueError, "index -3"),
    ("coalesce", dict(indices=[[0, 1]], values=[1.0, 2.0], size=[-5]), ValueError, "must not be negative"),
    ("coalesce", dict(indices=[[0, 1]], values=[1.0, 2.0, 3.0], size=[5]), ValueError, "values must have shape"),
    ("coalesce", dict(indices=[[0, 1]], values=[1.0, 2.0], size=[5, 2]), ValueError, "do not describe"),
    ("adam", dict(indices=[[0, 9]]), ValueError, "index 9 .* out of range for size 5"),
    ("adagrad", dict(indices=[[-1, 2]]), ValueError, "index -1 .* out of range"),
    ("adagrad", dict(indices=[[1, 2]], index_dtype=torch.int32), TypeError, "indices must be int64"),
], ids=lambda b: b if isinstance(b, str) else None)
def test_cpp_inputs_are_checked_in_python_before_any_cpp_code(monkeypatch, bad):
    """Issue 12: on torch 2.11 the C++ coalesce of indices=[[0, 7]], size (5,) crashed the process.
    Every such input must raise in Python, before the C++ operators are even looked up."""
    op, spec, exc, pattern = bad

    def no_cpp():
        raise AssertionError("the C++ kernels were reached with bad input")

    monkeypatch.setattr(_ops._CppBackend, "_ops", staticmethod(no_cpp))
    indices = torch.tensor(spec["indices"], dtype=spec.get("index_dtype", torch.int64))
    with pytest.raises(exc, match=pattern):
        if op == "coalesce":
            _ops.coalesce_parts(indices, torch.tensor(spec["values"]), spec["size"], "cpp")
        elif op == "adam":
            p = torch.zeros(5, 2)
            _ops.sparse_adam_step(p, p.clone(), p.clone(), indices, torch.ones(2, 2), 0.1, 0.9, 0.99,
                                  1e-8, False, "cpp")
        else:
            p = torch.zeros(5, 2)
            _ops.adagrad_step(p, p.clone(), indices, torch.ones(2, 2), 0.1, 1e-10, False, "cpp")


def test_the_kernels_load_once_per_process_even_if_their_module_is_imported_again(monkeypatch):
    """pytester's in-process runs drop the modules first imported during them; a fresh
    conformance.kernels._build that loaded the library again would register its operator namespace
    twice, which aborts the process. It finds the operators registered and does not load them."""
    K.load_cpu_kernels()
    monkeypatch.setattr(_build, "_LOADED", False)  # what a re-imported module starts with
    loads = []
    monkeypatch.setattr(torch.ops, "load_library", lambda path: loads.append(path))
    K.load_cpu_kernels()
    assert loads == [] and _build._LOADED


def _blocks_a_build(lock) -> bool:
    """Whether torch's ``lock`` file in a build directory makes the next build wait: by existing
    (torch 2.14 and older's FileBaton) or by being held (torch 2.15's advisory lock)."""
    import filelock

    from torch.utils import cpp_extension

    if getattr(cpp_extension, "FileBaton", None) is not None:
        return lock.exists()
    try:
        filelock.FileLock(str(lock)).acquire(timeout=0).lock.release()
    except filelock.Timeout:
        return True
    return False


@pytest.mark.timeout(120)
def test_a_build_left_half_done_by_a_dead_process_does_not_hang_the_next_one(monkeypatch):
    """torch's cpp_extension (2.14 and older) marks a build in progress with a ``lock`` file that it
    deletes when done; a process killed mid-build leaves it, and every later build waited on it
    forever. The kernels' own lock (released by the OS with its process) tells that nobody is
    building. torch 2.15 holds an advisory lock on that file instead and leaves the file after every
    build: there it blocks nothing (it read as a failure on torch 2.15.0 when this test asked that
    the file be gone)."""
    K.load_cpu_kernels()  # built (and loaded) once in this process
    stale = K.build_directory() / "lock"
    stale.touch()  # as a process killed while compiling leaves it
    monkeypatch.setattr(_build, "_LOADED", False)
    monkeypatch.setattr(_build, "_registered", lambda: False)
    loads = []
    monkeypatch.setattr(torch.ops, "load_library", lambda path: loads.append(path))  # loaded already
    K.load_cpu_kernels()
    assert len(loads) == 1 and not _blocks_a_build(stale)


@pytest.mark.timeout(120)
def test_torch_2_15s_advisory_build_lock_left_in_place_blocks_no_build(monkeypatch, tmp_path):
    """torch 2.15's cpp_extension.load, stood in for on any torch: it holds filelock's lock on ``lock``
    while it builds and leaves the file there. The kernels build and load, and the file left behind
    blocks no later build -- what the test above checks on each torch (it asked that the file be
    gone, and failed on torch 2.15.0 although nothing waited on it)."""
    import filelock
    from torch.utils import cpp_extension

    monkeypatch.setenv("CONFORMANCE_KERNELS_BUILD_DIR", str(tmp_path))
    monkeypatch.delattr(cpp_extension, "FileBaton", raising=False)  # torch 2.15's module has none

    def load_as_torch_2_15(*, name, sources, build_directory, is_python_module, **kwargs):
        with filelock.FileLock(os.path.join(build_directory, "lock")):
            torch.ops.load_library(os.path.join(build_directory, f"{name}.so"))

    monkeypatch.setattr(cpp_extension, "load", load_as_torch_2_15)
    monkeypatch.setattr(_build, "_LOADED", False)
    monkeypatch.setattr(_build, "_FAILURE", None)
    monkeypatch.setattr(_build, "_registered", lambda: False)
    loads = []
    monkeypatch.setattr(torch.ops, "load_library", lambda path: loads.append(path))
    K.load_cpu_kernels()
    lock = K.build_directory() / "lock"
    assert len(loads) == 1 and lock.exists() and not _blocks_a_build(lock)
    with filelock.FileLock(str(lock)):  # a build in progress does block
        assert _blocks_a_build(lock)


# --------------------------------------------------------------------------- the slot path (no sort)


@pytest.mark.parametrize("path", TRITON_PATHS, indirect=True)
@pytest.mark.parametrize("deterministic", [False, True], ids=["slots", "sort"])
def test_slot_and_sort_paths_match_torch_and_leave_the_tables_empty(device, deterministic):
    """The slot path (the default) and the sort path (torch.use_deterministic_algorithms) give torch's steps and
    coalesce on rows of one, two and many entries, and the slot tables and accumulator are empty afterwards."""
    from conformance.kernels import _slots, _triton

    gen = torch.Generator().manual_seed(21)
    size = (30, 5, 3)
    grad = random_sparse(gen, size, 2, 200, torch.float64, max_index=4).to(device)  # 16 rows, ~12 entries each
    indices, values = grad._indices(), grad._values()
    assert _slots.usable(150, 200, 2)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(deterministic, warn_only=True)
    try:
        assert _slots.usable(150, 200, 2) is not deterministic
        out_indices, out_values = _triton.coalesce(indices, values, list(size), eager_check=False)
        p, s = torch.randn(size, generator=gen, dtype=torch.float64).to(device), torch.zeros(size, dtype=torch.float64,
                                                                                               device=device)
        _triton.adagrad_step_(p, s, indices, values, 0.1, 1e-10, False, eager_check=False).wait()
    finally:
        torch.use_deterministic_algorithms(previous)
    expected = grad.coalesce()
    assert_close(out_indices, expected._indices(), rtol=0, atol=0)
    assert_close(out_values, expected._values())
    assert_close(s, (expected.to_dense() ** 2))
    for t in _slots._TABLES.get(torch.device(device), []):
        assert bool((t.slot == _slots.EMPTY).all()) and not t.count.any() and not t.sync.any()
        assert t.present is None or not t.present.any()
    for (dev, _dtype), buffers in _slots._ACCUMULATORS.items():
        assert all(not b.any() for b in buffers if dev == torch.device(device))


@pytest.mark.slow  # compiles four kernels for sm_90 (no GPU needed): the interpreter misses what only compiling catches
def test_triton_kernels_compile_for_a_gpu(tmp_path):
    """Triton's interpreter runs code the compiler refuses (a loop-carried variable changing type cost a GPU run
    on 2026-11-28): compile every kernel (slot path, sort path, masked mean) for an H100/H200 target in a process
    without TRITON_INTERPRET."""
    import subprocess
    import sys

    script = tmp_path / "compile.py"
    script.write_text('''
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from conformance.kernels import _slots, _triton, _triton_masked
INT64 = {"idx_ptr", "idx0_ptr", "idx1_ptr", "idx2_ptr", "idx3_ptr", "rank_ptr", "out_idx_ptr", "perm_ptr", "seg_ptr",
         "first_ptr", "pcount_ptr", "count_ptr64"}
FLOAT64 = {"step_size_ptr", "clr_ptr"}
INT32 = {"keys_ptr", "skeys_ptr", "slot_ptr", "count_ptr", "sync_ptr", "result_ptr", "present_ptr"}
CONSTS = dict(NDIM=2, PRESENT=True, BLOCK=256, BLOCK_S=64, BLOCK_K=8, BLOCK_D=64, ACC=tl.float32, MAXIMIZE=False,
              STEP_SIZE_ON_DEVICE=True, CLR_ON_DEVICE=True)
KERNELS = [getattr(module, name) for module in (_slots, _triton, _triton_masked) for name in dir(module)
           if name.endswith("_kernel") and isinstance(getattr(module, name), triton.runtime.JITFunction)]
for fn in KERNELS:
    names = fn.arg_names
    def kind(n):
        if n in CONSTS:
            return "constexpr"
        if n.endswith("_ptr"):
            return ("*i64" if n in INT64 or (n == "count_ptr" and fn.__name__.startswith("_masked"))
                    else "*fp64" if n in FLOAT64 else "*i32" if n in INT32 else "*fp32")
        return "fp32" if n.endswith(("_hi", "_lo")) else "i32"
    sig = {n: kind(n) for n in names}
    consts = {(names.index(n),): v for n, v in CONSTS.items() if n in names}
    kernel = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=GPUTarget("cuda", 90, 32))
    assert ".entry" in kernel.asm["ptx"], fn.__name__
    print("compiled", fn.__name__)
print("kernels", len(KERNELS))
''')
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env,
                          cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("compiled") >= 10 and "kernels 1" in proc.stdout, proc.stdout  # every kernel, both paths


@pytest.mark.parametrize("path", TRITON_PATHS, indirect=True)
def test_a_step_that_raises_between_claim_and_update_leaves_no_stale_owner(device, monkeypatch):
    """The slot tables outlive a step: a launch that raises after the claim (an interpreter error, an interrupt)
    must not leave claimed slots for the next step to find (its rows would never be updated)."""
    from conformance.kernels import _slots, _triton

    p, s = torch.zeros(8, 2, dtype=torch.float64, device=device), torch.zeros(8, 2, dtype=torch.float64, device=device)
    indices, values = torch.tensor([[2, 0, 2]], device=device), torch.ones(3, 2, dtype=torch.float64, device=device)
    real = _slots._slot_adagrad_kernel

    class Broken:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                raise RuntimeError("the update launch failed")
            return launch

    monkeypatch.setattr(_slots, "_slot_adagrad_kernel", Broken())
    with pytest.raises(RuntimeError, match="the update launch failed"):
        _triton.adagrad_step_(p, s, indices, values, 0.5, 1e-10, False, eager_check=False)
    monkeypatch.setattr(_slots, "_slot_adagrad_kernel", real)
    _triton.adagrad_step_(p, s, indices, values, 0.5, 1e-10, False, eager_check=False).wait()
    assert s[:, 0].tolist() == [1.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # rows 0 and 2 (summed twice) updated
    for t in _slots._TABLES.get(torch.device(device), []):
        assert bool((t.slot == _slots.EMPTY).all()) and not t.count.any() and not t.sync.any()
