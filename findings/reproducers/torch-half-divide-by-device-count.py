"""torch-half-divide-by-device-count: on CUDA, a bfloat16 masked mean sum / mask.sum() divides by the count rounded to bfloat16.

The masked-mean idiom ``values.where(mask, 0).sum() / mask.sum()`` divides a 0-d bfloat16 sum by a 0-d
int64 count on the same device. On CUDA the count is converted to the common dtype (bfloat16) before the
division, so a count above 256 is rounded: 277 valid entries of 0.515625 (exact mean 0.515625, sum 143
in bfloat16) give 143 / 276 -> 0.51953125 where the correctly rounded mean is 0.515625. The CPU reads a 0-d
second operand at float32 precision and gives 0.515625 (so the finding is CUDA's only).

Compared: the idiom's result on cuda (actual) vs the mean computed in float64 from the same bfloat16
values and rounded once to bfloat16 (expected; torch's type-promotion docs: int64 / bfloat16 -> bfloat16,
a correctly rounded division), exact equality. Needs a CUDA device.

Without a CUDA device it prints "cannot run: no CUDA device" and exits 3.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch

N = 277  # a count above 256: not representable in bfloat16 (277 -> 276)
VALUE = 0.5156  # 0.515625 in bfloat16


def scenario(device):
    values = torch.full((N,), VALUE, dtype=torch.bfloat16, device=device)
    mask = torch.ones(N, dtype=torch.bool, device=device)
    actual = (values.where(mask, torch.zeros((), dtype=torch.bfloat16, device=device)).sum() / mask.sum()).item()
    exact = values.double().sum().item() / N  # every value is valid
    expected = torch.tensor(exact, dtype=torch.float64).to(torch.bfloat16).item()
    print(f"sum in bfloat16: {values.sum().item()}, count: {mask.sum().item()}, "
          f"count as bfloat16: {torch.tensor(N).to(torch.bfloat16).item()}")
    print(f"expected (float64 mean {exact!r} rounded to bfloat16): {expected!r}")
    print(f"actual (values.where(mask, 0).sum() / mask.sum() on {device}): {actual!r}")
    return actual != expected, f"mean {actual!r}, expected {expected!r} (bfloat16, {N} entries on {device})"


def main():
    try:
        if not torch.cuda.is_available():
            print(f"torch {torch.__version__}: cannot run: no CUDA device")
            return 3
        shows, numbers = scenario("cuda")
    except Exception as exc:  # a missing API or kernel on this release, never the divergence
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {exc}")
        return 3
    print(f"torch {torch.__version__}: {'shows it' if shows else 'does not show it'}: {numbers}")
    return 1 if shows else 0


if __name__ == "__main__":
    sys.exit(main())
