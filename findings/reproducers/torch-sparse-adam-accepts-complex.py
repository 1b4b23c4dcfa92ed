"""torch-sparse-adam-accepts-complex: SparseAdam steps complex parameters, unlike their real view.

torch's optimizers take a complex parameter as the pairs of reals torch.view_as_real shows; SparseAdam,
which has no complex path, refuses them in later releases (ValueError "SparseAdam does not support complex
parameters"). torch 2.1's and 2.2's SparseAdam accept a complex parameter and step it with complex arithmetic
(exp_avg_sq of g * g, not |g|^2 per real pair), which differs from the same step on its view_as_real.

Compared: SparseAdam(lr=0.1) for two steps on p = [1+1j, 2-1j] (complex128) with the sparse gradient
1+2j at index 0, against the same steps on torch.view_as_real(p) with the gradient's real pairs.
Shown: the complex run steps and differs from the real view by more than 1e-9. A refusal (any
exception at construction or step) is "does not show it".

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch


def run(param, grad_values, indices, size):
    p = torch.nn.Parameter(param.clone())
    optimizer = torch.optim.SparseAdam([p], lr=0.1)
    for _ in range(2):
        p.grad = torch.sparse_coo_tensor(indices, grad_values, size)
        optimizer.step()
    return p.detach()


def main():
    complex_param = torch.tensor([1 + 1j, 2 - 1j], dtype=torch.complex128)
    complex_grad = torch.tensor([1 + 2j], dtype=torch.complex128)
    try:
        got = run(complex_param, complex_grad, [[0]], (2,))
    except Exception as exc:  # noqa: BLE001 - the refusal later releases give
        print(f"torch {torch.__version__}: does not show it: SparseAdam refuses the complex parameter: "
              f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        return 0
    try:
        want = torch.view_as_complex(run(torch.view_as_real(complex_param), torch.view_as_real(complex_grad),
                                         [[0]], (2, 2)))
    except Exception as exc:  # noqa: BLE001
        print(f"torch {torch.__version__}: cannot run: the real view: {type(exc).__name__}: {exc}")
        return 3
    diff = (got - want).abs().max().item()
    if diff > 1e-9:
        print(f"torch {torch.__version__}: shows it: SparseAdam steps the complex parameter to {got.tolist()}, "
              f"its real view to {want.tolist()} (max difference {diff:.3g})")
        return 1
    print(f"torch {torch.__version__}: does not show it: the complex step equals its real view ({got.tolist()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
