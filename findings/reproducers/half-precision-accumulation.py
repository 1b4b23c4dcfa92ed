"""half-precision-accumulation: torch's cpu coalesce() sums float16/bfloat16 duplicates in half precision, not correctly rounded.

torch sums the duplicate entries of a float16/bfloat16 COO tensor in the tensor's own dtype, one after
another in input order, with no float32 accumulator (pytorch#84471), so a sum of three or more
duplicates can differ from the correctly rounded sum (the optimizers, which coalesce each sparse
gradient, inherit it).

Compared, exactly: coalesce() of the values [1, h, h] at one index, h = 2**-11 (float16) or 2**-8
(bfloat16), half an ulp of 1: expected the float64 sum 1 + 2h (1.0009765625 / 1.0078125, exact in the
dtype); torch's sequential half-precision sum gives 1.0 (1 + h is a tie, rounded to even). Either
dtype differing shows it.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch

CASES = ((torch.float16, 2.0 ** -11), (torch.bfloat16, 2.0 ** -8))


def coalesced(dtype, h):
    values = torch.tensor([1.0, h, h], dtype=dtype)
    tensor = torch.sparse_coo_tensor(torch.tensor([[0, 0, 0]]), values, (1,))
    return tensor.coalesce().values().tolist()


def main():
    numbers, failures, shows = [], [], False
    for dtype, h in CASES:
        name = str(dtype).replace("torch.", "")
        expected = [1.0 + 2 * h]  # float64, exact in the dtype
        try:
            actual = coalesced(dtype, h)
        except Exception as exc:  # a missing API or kernel on this release, never the divergence
            print(f"{name}: cannot run: {type(exc).__name__}: {exc}")
            failures.append(f"{type(exc).__name__}: {exc} ({name})")
            continue
        shows |= actual != expected
        print(f"{name}: coalesce() of [1, {h}, {h}] at index 0: {actual}; expected (float64 sum) {expected}")
        numbers.append(f"{name} {actual} vs {expected}")
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
