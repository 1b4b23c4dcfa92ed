"""torch-dense-add-one-entry-sparse-misplaced-cuda: on cuda, dense.add_(sparse) with one entry ignores the dense tensor's strides.

torch's dense.add_(sparse) on cuda with a sparse COO tensor of nnz 1 (what Adagrad's sparse branch,
SparseAdam and SGD's sparse step add into the parameter when a gradient has one distinct index) was seen
to write at the storage position of the entry's contiguous offset, not through the dense tensor's
strides: Adagrad(lr=1) on a transposed float64 parameter of shape (1, 2, 3) (strides (1, 1, 2)) with the
one-entry sparse gradient 1.0 at (0, 0, 1) left that entry and changed (0, 1, 0) to -9999999999
(torch 2.11.0+cu130, NVIDIA H200).

Compared, on cuda, exactly: (a) a transposed zeros (1, 2, 3) tensor .add_(sparse 5.0 at (0, 0, 1))
vs the documented dense + sparse (5.0 at (0, 0, 1), zeros elsewhere); (b) one Adagrad(lr=1) step on the
transposed parameter of ones vs the same step on a contiguous copy (float64; both on cuda). Either
differing shows it. Needs a CUDA device.

Without a CUDA device it prints "cannot run: no CUDA device" and exits 3.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch

SHAPE = (1, 2, 3)
INDEX = (0, 0, 1)


def transposed(tensor):
    """``tensor``'s values laid out with its dims reversed in memory (strides (1, 1, 2) for (1, 2, 3))."""
    return tensor.permute(2, 1, 0).contiguous().permute(2, 1, 0)


def one_entry(value, device):
    indices = torch.tensor([[i] for i in INDEX], device=device)
    return torch.sparse_coo_tensor(indices, torch.tensor([value], dtype=torch.float64, device=device), SHAPE)


def add_case(device):
    dense = transposed(torch.zeros(SHAPE, dtype=torch.float64, device=device))
    dense.add_(one_entry(5.0, device))
    expected = torch.zeros(SHAPE, dtype=torch.float64)
    expected[INDEX] = 5.0
    actual = dense.cpu()
    print(f"(a) transposed zeros{SHAPE} (strides {dense.stride()}).add_(sparse 5.0 at {INDEX}): "
          f"{actual.tolist()}; expected {expected.tolist()}")
    return not torch.equal(actual, expected), f"(a) nonzero at {actual.nonzero().tolist()}, expected [{list(INDEX)}]"


def adagrad_step(param):
    param.requires_grad_(True)
    optimizer = torch.optim.Adagrad([param], lr=1.0)
    param.grad = one_entry(1.0, param.device)
    optimizer.step()
    return param.detach().cpu()


def adagrad_case(device):
    expected = adagrad_step(torch.ones(SHAPE, dtype=torch.float64, device=device))
    actual = adagrad_step(transposed(torch.ones(SHAPE, dtype=torch.float64, device=device)))
    print(f"(b) Adagrad(lr=1), one step, sparse gradient 1.0 at {INDEX}: contiguous parameter "
          f"{expected.tolist()}; transposed parameter {actual.tolist()}")
    changed = (actual != expected).nonzero().tolist()
    if not changed:
        return False, "(b) the transposed parameter equals the contiguous one"
    return True, (f"(b) transposed parameter differs at {changed}: {[actual[tuple(i)].item() for i in changed]} "
                  f"vs {[expected[tuple(i)].item() for i in changed]}")


def main():
    try:
        if not torch.cuda.is_available():
            print(f"torch {torch.__version__}: cannot run: no CUDA device")
            return 3
        results = [add_case("cuda"), adagrad_case("cuda")]
    except Exception as exc:  # a missing API or kernel on this release, never the divergence
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {exc}")
        return 3
    shows = any(differs for differs, _ in results)
    print(f"torch {torch.__version__}: {'shows it' if shows else 'does not show it'}: "
          + "; ".join(numbers for _, numbers in results))
    return 1 if shows else 0


if __name__ == "__main__":
    sys.exit(main())
