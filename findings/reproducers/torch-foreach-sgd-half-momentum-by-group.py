"""torch-foreach-sgd-half-momentum-by-group: foreach SGD's float16 momentum buffer depends on whether another parameter takes its first step.

torch's foreach SGD step in float16/bfloat16 rounds a momentum buffer otherwise when the parameters
stepping together are at different steps: when one takes its first step while another already has a
buffer, _multi_tensor_sgd updates the existing buffers one by one (buf.mul_(momentum).add_(grad)) instead
of with torch._foreach_mul_ / torch._foreach_add_ (whose results on cpu are those of the momentum 0.9
rounded to float16), so a parameter's buffer differs by an ulp from the same parameter's in an optimizer
of its own. float32/float64 agree bit for bit.

Compared, float16, SGD(lr=1, momentum=0.9, foreach=True), parameter a = [1.0] with gradients [0.7] then
[0.3]: a's parameter and momentum buffer after two steps in an optimizer of its own (expected) vs in
SGD([a, b]) where b = [1.0] has no gradient at step 1 and the gradient [1.0] at step 2 (actual), bit for
bit. Shows it when the two differ, by at most 8 float16 ulps (rtol 2^-7: a rounding; a larger difference
is reported as not this divergence).

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import math
import sys

import torch

DTYPE = torch.float16
RTOL = 2.0 ** -7
GRADS = (0.7, 0.3)


def run(with_b):
    a = torch.tensor([1.0], dtype=DTYPE)
    params = [a]
    if with_b:
        b = torch.tensor([1.0], dtype=DTYPE)
        params.append(b)
    optimizer = torch.optim.SGD(params, lr=1.0, momentum=0.9, foreach=True)
    a.grad = torch.tensor([GRADS[0]], dtype=DTYPE)
    optimizer.step()  # b (no gradient) does not step
    a.grad = torch.tensor([GRADS[1]], dtype=DTYPE)
    if with_b:
        b.grad = torch.tensor([1.0], dtype=DTYPE)  # b's first step, a's second
    optimizer.step()
    return [a[0].item(), optimizer.state[a]["momentum_buffer"][0].item()]


def scenario():
    expected, actual = run(with_b=False), run(with_b=True)
    print(f"expected (a alone): param, momentum_buffer = {expected}")
    print(f"actual (a beside b, which starts at step 2): param, momentum_buffer = {actual}")
    if actual == expected:
        return False, f"a's param and buffer {actual} either way"
    close = all(math.isfinite(x) and abs(x - y) <= RTOL * max(abs(x), abs(y)) for x, y in zip(actual, expected))
    if not close:
        print("(the two differ by more than rounding: not this divergence)")
    return close, f"a's param and buffer {actual} beside b vs {expected} alone"


def main():
    try:
        shows, numbers = scenario()
    except Exception as exc:  # a missing keyword or kernel on this release, never the divergence
        text = str(exc).strip().splitlines()
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {text[0] if text else ''}")
        return 3
    print(f"torch {torch.__version__}: {'shows it' if shows else 'does not show it'}: {numbers}")
    return 1 if shows else 0


if __name__ == "__main__":
    sys.exit(main())
