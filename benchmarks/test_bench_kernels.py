"""pytest-benchmark: conformance.kernels vs stock torch on an embedding-sized sparse step.

Run (not part of the default test run):
    python -m pytest benchmarks/ --benchmark-only --benchmark-json=reports/bench_kernels.json
    python benchmarks/summarize.py reports/bench_kernels.json

Groups:
  sparse_adam / adagrad: one optimizer step on a 1,000,000 x 64 float32 embedding
    whose sparse gradient has 16,384 uniformly random rows (duplicates included),
    stock torch vs kernel, plus ``copy``: a contiguous copy of as many bytes as
    the step must read (gradient indices and values, plus every touched row of the
    parameter and of each state tensor). Every round is a real step on the same
    gradient (the state keeps evolving); the first step, which allocates the state,
    is a warm-up round.
  coalesce: Tensor.coalesce() vs kernels.coalesce on 1,000,000 random indices of a
    100,000 x 100,000 sparse matrix.
"""

import pytest
import torch

import conformance.kernels as K

ROWS, DIM, LOOKUPS = 1_000_000, 64, 16_384
COALESCE_NNZ, COALESCE_SIDE = 1_000_000, 100_000


@pytest.fixture(scope="module")
def embedding_grad():
    gen = torch.Generator().manual_seed(0)
    rows = torch.randint(0, ROWS, (LOOKUPS,), generator=gen)
    values = torch.randn(LOOKUPS, DIM, generator=gen)
    grad = torch.sparse_coo_tensor(rows[None], values, (ROWS, DIM), check_invariants=False)
    return grad


def touched_bytes(grad, state_tensors: int) -> int:
    """Bytes a sparse step must read: gradient indices+values and the touched rows."""
    unique_rows = grad._indices()[0].unique().numel()
    row_bytes = DIM * 4
    grad_bytes = grad._indices().numel() * 8 + grad._values().numel() * 4
    return grad_bytes + (1 + state_tensors) * unique_rows * row_bytes


def optimizer_step(benchmark, opt_cls, grad, rounds):
    param = torch.nn.Parameter(torch.randn(ROWS, DIM, generator=torch.Generator().manual_seed(1)))
    param.grad = grad
    opt = opt_cls([param])
    benchmark.extra_info["torch_threads"] = torch.get_num_threads()
    benchmark.pedantic(opt.step, rounds=rounds, iterations=1, warmup_rounds=1)
    assert torch.isfinite(param[grad._indices()[0][:100]]).all()


def copy_bytes(benchmark, nbytes):
    src = torch.randn(nbytes // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    benchmark.extra_info["bytes"] = nbytes
    benchmark.pedantic(dst.copy_, args=(src,), rounds=100, iterations=1, warmup_rounds=2)


@pytest.mark.benchmark(group="sparse_adam")
def test_sparse_adam_stock(benchmark, embedding_grad):
    optimizer_step(benchmark, torch.optim.SparseAdam, embedding_grad, rounds=10)


@pytest.mark.benchmark(group="sparse_adam")
def test_sparse_adam_kernel(benchmark, embedding_grad):
    optimizer_step(benchmark, K.SparseAdam, embedding_grad, rounds=40)


@pytest.mark.benchmark(group="sparse_adam")
def test_sparse_adam_copy(benchmark, embedding_grad):
    copy_bytes(benchmark, touched_bytes(embedding_grad, state_tensors=2))


@pytest.mark.benchmark(group="adagrad")
def test_adagrad_stock(benchmark, embedding_grad):
    optimizer_step(benchmark, torch.optim.Adagrad, embedding_grad, rounds=10)


@pytest.mark.benchmark(group="adagrad")
def test_adagrad_kernel(benchmark, embedding_grad):
    optimizer_step(benchmark, K.Adagrad, embedding_grad, rounds=40)


@pytest.mark.benchmark(group="adagrad")
def test_adagrad_copy(benchmark, embedding_grad):
    copy_bytes(benchmark, touched_bytes(embedding_grad, state_tensors=1))


@pytest.fixture(scope="module")
def random_coo():
    gen = torch.Generator().manual_seed(2)
    indices = torch.randint(0, COALESCE_SIDE, (2, COALESCE_NNZ), generator=gen)
    values = torch.randn(COALESCE_NNZ, generator=gen)
    return torch.sparse_coo_tensor(
        indices, values, (COALESCE_SIDE, COALESCE_SIDE), check_invariants=False
    )


@pytest.mark.benchmark(group="coalesce")
def test_coalesce_stock(benchmark, random_coo):
    benchmark.pedantic(random_coo.coalesce, rounds=5, iterations=1, warmup_rounds=1)


@pytest.mark.benchmark(group="coalesce")
def test_coalesce_kernel(benchmark, random_coo):
    result = benchmark.pedantic(K.coalesce, args=(random_coo,), rounds=5, iterations=1, warmup_rounds=1)
    assert result._nnz() == random_coo.coalesce()._nnz()
