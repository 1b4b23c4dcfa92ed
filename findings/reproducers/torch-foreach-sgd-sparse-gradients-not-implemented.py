"""torch-foreach-sgd-sparse-gradients-not-implemented: SGD(foreach=True) with momentum fails on a sparse gradient.

torch.optim.SGD documents sparse gradients, and its for-loop step takes them with momentum, nesterov,
dampening or maximize. Its foreach step (foreach=True) in torch 2.1-2.3 applies torch._foreach_mul_,
_foreach_neg or _foreach_add_ to the sparse gradients and momentum buffers, which have no SparseCPU
kernel: NotImplementedError "Could not run 'aten::_foreach_mul_.Scalar' with arguments from the
'SparseCPU' backend". Releases that run it give the for-loop step's value.

Compared: SGD([p], lr=0.5, momentum=0.9, foreach=True) on p = [1, 2, 3] (float64) for two steps with the
sparse gradient 1 at index 1. Expected (by hand, the documented algorithm: b1 = g, b2 = 0.9 b1 + g):
p = [1, 2 - 0.5 * 1 - 0.5 * 1.9, 3] = [1, 0.55, 3]. Shown: a NotImplementedError naming an aten::_foreach_
op and a Sparse backend (only that exception counts; any other is "cannot run").

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch


def main():
    try:
        p = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
        optimizer = torch.optim.SGD([p], lr=0.5, momentum=0.9, foreach=True)
        for _ in range(2):
            p.grad = torch.sparse_coo_tensor([[1]], torch.tensor([1.0], dtype=torch.float64), (3,))
            try:
                optimizer.step()
            except NotImplementedError as exc:
                if "_foreach_" in str(exc) and "Sparse" in str(exc):
                    print(f"torch {torch.__version__}: shows it: foreach SGD with momentum on a sparse gradient "
                          f"raises NotImplementedError: {str(exc).splitlines()[0][:120]}")
                    return 1
                raise
        actual = p.detach().tolist()
    except Exception as exc:  # a missing API or kernel on this release, never the divergence
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {str(exc)[:200]}")
        return 3
    expected = [1.0, 0.55, 3.0]
    agrees = "" if max(abs(a - e) for a, e in zip(actual, expected)) <= 1e-12 else " -- a different value, another divergence"
    print(f"torch {torch.__version__}: does not show it: the foreach step runs, p = {actual} (expected {expected}){agrees}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
