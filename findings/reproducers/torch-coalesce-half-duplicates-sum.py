"""torch-coalesce-half-duplicates-sum: torch's cpu coalesce() of 4096 float16/bfloat16 ones gives 2048/256, not 4096.

The coalesce spec's case many-duplicates-half-precision: 4096 ones at one index of a size-[1] COO tensor.
4096 = 2**12 is exact in float16 and bfloat16, so a sum accumulated in float32 (what torch's CUDA
coalesce does) gives the golden value 4096. torch's CPU coalesce accumulates the duplicates in the
half dtype (pytorch#84471): float16 stops at 2048 (2048 + 1 rounds back to 2048), bfloat16 at 256.

Compared, exactly, on cpu: coalesce()'s indices and values vs the spec's golden values (indices [[0]],
values [4096.0]) in float16 and in bfloat16; either dtype differing shows it.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch

N = 4096
EXPECTED = ([[0]], [4096.0])  # specs/coalesce.yaml, many-duplicates-half-precision


def coalesced(dtype):
    tensor = torch.sparse_coo_tensor(torch.zeros(1, N, dtype=torch.long), torch.ones(N, dtype=dtype), (1,))
    result = tensor.coalesce()
    return result.indices().tolist(), result.values().tolist()


def main():
    numbers, failures, shows = [], [], False
    for dtype in (torch.float16, torch.bfloat16):
        name = str(dtype).replace("torch.", "")
        try:
            actual = coalesced(dtype)
        except Exception as exc:  # a missing API or kernel on this release, never the divergence
            print(f"{name}: cannot run: {type(exc).__name__}: {exc}")
            failures.append(f"{type(exc).__name__}: {exc} ({name})")
            continue
        shows |= actual != EXPECTED
        print(f"{name}: coalesce() of {N} ones at index 0: indices {actual[0]}, values {actual[1]}; "
              f"expected indices {EXPECTED[0]}, values {EXPECTED[1]}")
        numbers.append(f"{name} values {actual[1]} vs {EXPECTED[1]}")
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
