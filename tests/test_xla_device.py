"""Facts about the XLA device that the conformance suite relies on: compile
counting, the compile behaviour of the masked-mean idioms (seed 004), and
sparse COO being unsupported. Skipped, with the reason, without torch_xla."""

import pytest
import torch

from conformance.backends import masked_mean_idioms as A
from conformance.core import xla_support

XLA_REASON = xla_support.xla_unavailable_reason()
pytestmark = pytest.mark.skipif(XLA_REASON is not None, reason=f"XLA device: {XLA_REASON}")


@pytest.fixture(scope="module")
def dev():
    return xla_support.xla_device()


def test_device_is_xla(dev):
    assert dev.type == "xla"
    assert xla_support.is_xla(dev)
    assert xla_support.xla_hardware()


def test_count_compiles_sees_a_new_graph_and_then_the_cache(dev):
    x = torch.arange(13.0).to(dev)  # a shape no other test uses
    with xla_support.count_compiles() as first:
        y = (x * 3 + 1).sum()
    with xla_support.count_compiles() as second:
        z = (x * 3 + 1).sum()
    assert first.uncached_compile == 1 and first.compile_time_samples == 1
    assert second.uncached_compile == 0 and second.compile_time_samples == 0
    assert second.cached_compile >= 1
    assert y.cpu().item() == z.cpu().item() == 247.0


@pytest.mark.parametrize("name", [n for n, i in A.APPROACHES.items() if i.static_shape])
def test_static_idioms_compile_once_across_ten_masks(name, dev):
    shape = (5, 9 + list(A.APPROACHES).index(name))  # own shape: no cache from other tests
    masks = A.distinct_count_masks(shape, 10, seed=5)
    exp = A.compile_experiment(name, masks, torch.randn(*shape), dev)
    assert exp.warmup_compiles == 1, exp.as_dict()
    assert exp.after_warmup_compiles == 0, exp.as_dict()


@pytest.mark.parametrize("name", [n for n, i in A.APPROACHES.items() if not i.static_shape])
def test_dynamic_idioms_compile_once_per_distinct_count(name, dev):
    shape = (6, 9 + list(A.APPROACHES).index(name))
    counts = [3, 7, 3, 12, 7, 3, 20, 12, 7, 3]  # 4 distinct counts in 10 masks
    masks = A.masks_with_counts(shape, counts, seed=6)
    exp = A.compile_experiment(name, masks, torch.randn(*shape), dev)
    assert exp.counts == counts
    seen = set()
    for count, compiles in zip(counts, exp.compiles):
        if count in seen:
            assert compiles == 0, exp.as_dict()  # a count seen before: cached graph
        else:
            assert compiles >= 1, exp.as_dict()  # a new count: a new graph
        seen.add(count)
    assert exp.after_warmup_compiles == len(set(counts)) - 1, exp.as_dict()


def test_sparse_coo_on_xla_is_not_implemented(dev):
    i = torch.tensor([[0, 1, 1], [2, 0, 2]])
    coo = torch.sparse_coo_tensor(i, torch.tensor([3.0, 4.0, 5.0]), (2, 4))
    with pytest.raises(NotImplementedError, match="SparseXLA"):
        coo.to(dev)
