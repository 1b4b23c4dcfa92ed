"""torch-dense-add-half-duplicates-by-layout: on cpu, dense.add_(uncoalesced sparse) in float16/bfloat16 sums duplicates differently by the dense tensor's layout.

torch's dense.add_(sparse) on cpu in float16/bfloat16 adds an uncoalesced sparse tensor's duplicates into
a contiguous dense tensor one at a time, rounding to the half dtype after each (pytorch#84471's
half-precision accumulation), but into a non-contiguous one (a strided view) as their correctly rounded
sum. SGD's sparse step (param.add_(grad, alpha=-lr), no coalesce) shows it: the result depends on the
parameter's layout.

Compared, exactly: one SGD(lr=1) step with the uncoalesced sparse gradient [-x, x] at index 0 on a
contiguous parameter ones(2) vs on ones(4)[::2] (same values, strided); x = 1.0009765625 (float16) or
1.0078125 (bfloat16), where 1 + x is a rounding tie (to 2). The float64 result is 1.0; torch gives
0.9990234375 (float16) / 0.9921875 (bfloat16) on the contiguous parameter and 1.0 on the strided one.
The layouts differing in either dtype shows it.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch

CASES = ((torch.float16, 1.0009765625), (torch.bfloat16, 1.0078125))  # 1 + 2**-10, 1 + 2**-7: exact in the dtype


def sgd_step(param, x):
    param.requires_grad_(True)
    optimizer = torch.optim.SGD([param], lr=1.0)
    param.grad = torch.sparse_coo_tensor(torch.tensor([[0, 0]]), torch.tensor([-x, x], dtype=param.dtype), (2,))
    optimizer.step()
    return param.detach().tolist()


def main():
    numbers, failures, shows = [], [], False
    for dtype, x in CASES:
        name = str(dtype).replace("torch.", "")
        try:
            contiguous = sgd_step(torch.ones(2, dtype=dtype), x)
            strided = sgd_step(torch.ones(4, dtype=dtype)[::2], x)
        except Exception as exc:  # a missing API or kernel on this release, never the divergence
            print(f"{name}: cannot run: {type(exc).__name__}: {exc}")
            failures.append(f"{type(exc).__name__}: {exc} ({name})")
            continue
        shows |= contiguous != strided
        print(f"{name}: SGD(lr=1), gradient [-{x}, {x}] at index 0: contiguous ones(2) -> {contiguous}, "
              f"ones(4)[::2] -> {strided} (float64: [1.0, 1.0])")
        numbers.append(f"{name} contiguous {contiguous[0]!r} vs strided {strided[0]!r}")
    if shows:  # either dtype
        print(f"torch {torch.__version__}: shows it: " + "; ".join(numbers))
        return 1
    if failures:
        print(f"torch {torch.__version__}: cannot run: " + "; ".join(failures))
        return 3
    print(f"torch {torch.__version__}: does not show it: " + "; ".join(numbers))
    return 0

if __name__ == "__main__":
    sys.exit(main())
