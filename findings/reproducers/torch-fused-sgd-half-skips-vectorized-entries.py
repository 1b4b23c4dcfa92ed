"""torch-fused-sgd-half-skips-vectorized-entries: fused CPU SGD leaves a float16/bfloat16 parameter's vectorized entries unmoved.

torch's fused SGD step on cpu (SGD(fused=True), torch._fused_sgd_) leaves a float16/bfloat16 parameter
unchanged at its vectorized entries -- the leading multiple of the kernel's vector length (16 here) --
and updates only the scalar tail; float32/float64 are updated everywhere. Registered for torch "<2.14"
(2.14.0 fixed it).

Compared (the spec case sgd.yaml::dense-step-of-sixteen-entries): SGD(lr=1, fused=True), one step on
torch.ones(16) with the gradient torch.ones(16), in float16 and in bfloat16 (actual) vs the documented
step param - lr * grad = 0.0 at every entry (expected; exact in both dtypes). Shows it when some entry
kept its starting value 1.0 (a block of unmoved entries), in either dtype.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch

N = 16


def step(dtype):
    p = torch.ones(N, dtype=dtype)
    optimizer = torch.optim.SGD([p], lr=1.0, fused=True)
    p.grad = torch.ones(N, dtype=dtype)
    optimizer.step()
    return p.tolist()


def scenario():
    """(shows, numbers, the exception of each dtype that could not run)."""
    expected = [0.0] * N
    shown, numbers, failures = [], [], []
    for dtype in (torch.float16, torch.bfloat16):
        name = str(dtype).replace("torch.", "")
        try:
            actual = step(dtype)
        except Exception as exc:  # no fused= keyword, or no fused cpu kernel for the dtype, on this release
            text = str(exc).strip().splitlines()
            print(f"{name}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
            failures.append(exc)
            continue
        print(f"{name}: expected {expected}")
        print(f"{name}: actual   {actual}")
        unmoved = sum(1 for value in actual if value == 1.0)
        if unmoved:
            shown.append(name)
            numbers.append(f"{name}: {unmoved} of {N} entries kept 1.0 where param - lr * grad = 0.0")
        elif actual != expected:
            print(f"({name}: wrong, but no entry left unmoved: not this divergence)")
            numbers.append(f"{name}: {actual} (no entry unmoved)")
        else:
            numbers.append(f"{name}: every entry 0.0")
    if len(failures) == 2:
        raise failures[0]
    return bool(shown), "; ".join(numbers)


def main():
    try:
        shows, numbers = scenario()
    except Exception as exc:  # no fused= keyword, or no fused cpu kernel for the dtype, on this release
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        return 3
    print(f"torch {torch.__version__}: {'shows it' if shows else 'does not show it'}: {numbers}")
    return 1 if shows else 0


if __name__ == "__main__":
    sys.exit(main())
