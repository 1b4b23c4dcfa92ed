"""torch-dense-add-one-entry-sparse-misplaced: on cpu, dense.add_(sparse) with one entry writes at the wrong place.

torch's dense.add_(sparse) on cpu with a sparse COO tensor of nnz 1 (what Adagrad's sparse branch,
SparseAdam and SGD's sparse step add into the parameter when a gradient has one distinct index):
(a) into a dense tensor with a storage offset it adds the offset twice: torch.zeros(30)[3:7].add_(sparse 5.0
at index 1) writes storage position 2 * 3 + 1 = 7, not 4; the view keeps its zeros (nnz 2 is right);
(b) it reads hybrid values of shape (1, 2) whose leading stride is not the row length (strides (1, 1),
which is_contiguous() calls contiguous) at the wrong place.

Compared, exactly (small integers in float32): (a) the view after the add (expected [0, 5, 0, 0], the
documented dense + sparse) and the storage positions changed (expected [4]); (b) ones(1, 2).add_(sparse
with values [[1, 2]] laid out with strides (1, 1), alpha=-1) (expected [[0, -1]]). Either differing
shows it. The write stays inside the storage (a write past its end corrupts the heap).

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch


def offset_case():
    storage = torch.zeros(30)
    view = storage[3:7]  # storage offset 3
    view.add_(torch.sparse_coo_tensor(torch.tensor([[1]]), torch.tensor([5.0]), (4,)))
    actual = (view.tolist(), storage.nonzero().flatten().tolist())
    expected = ([0.0, 5.0, 0.0, 0.0], [4])
    print(f"(a) zeros(30)[3:7].add_(sparse 5.0 at index 1): view {actual[0]}, storage positions changed "
          f"{actual[1]}; expected {expected[0]}, {expected[1]}")
    return actual != expected, f"(a) view {actual[0]}, storage changed at {actual[1]}, expected {expected[0]} at {expected[1]}"


def hybrid_case():
    values = torch.tensor([1.0, 2.0]).as_strided((1, 2), (1, 1))  # [[1, 2]], is_contiguous() is True
    sparse = torch.sparse_coo_tensor(torch.tensor([[0]]), values, (1, 2))
    dense = torch.ones(1, 2)
    dense.add_(sparse, alpha=-1)
    actual, expected = dense.tolist(), [[0.0, -1.0]]
    print(f"(b) ones(1, 2).add_(sparse with values {values.tolist()} strides {values.stride()}, alpha=-1): "
          f"{actual}; expected {expected}")
    return actual != expected, f"(b) {actual}, expected {expected}"


def main():
    try:
        results = [offset_case(), hybrid_case()]
    except Exception as exc:  # a missing API or kernel on this release, never the divergence
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {exc}")
        return 3
    shows = any(differs for differs, _ in results)
    print(f"torch {torch.__version__}: {'shows it' if shows else 'does not show it'}: "
          + "; ".join(numbers for _, numbers in results))
    return 1 if shows else 0


if __name__ == "__main__":
    sys.exit(main())
