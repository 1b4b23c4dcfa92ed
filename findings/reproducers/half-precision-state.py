"""half-precision-state: torch's Adagrad keeps its state_sum in float16/bfloat16 and rounds it at every step, so it stops growing.

torch's optimizers store their state in the parameter's dtype and round it at every step; the rounding
carries through the trajectory. Adagrad's state_sum += g**2 in float16 stops growing once g**2 is half an
ulp of the sum or less: with g = 1 it stays at 2048 in float16 (2048 + 1 is a tie, rounded to even) and
at 256 in bfloat16, whatever the number of steps.

Compared: 32 steps of torch.optim.Adagrad(lr=1, initial_accumulator_value=A) with the sparse gradient 1.0
at index 0 of a parameter [0], A = 2048 (float16) or 256 (bfloat16) -- where a sum of unit steps from 0
ends up after 2048 / 256 steps. Expected: state_sum = A + 32 (the float64 trajectory, exact in the dtype:
2080 / 288), within 1 ulp (what an implementation keeping its state in float32 and rounding the result
once to the dtype attains). torch gives A (16 ulps off); the dtype's own replay (A + 1 rounded in the
dtype, 32 times) is printed beside it. Either dtype off by more than 1 ulp shows it.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch

STEPS = 32
CASES = ((torch.float16, 2048.0, 2.0), (torch.bfloat16, 256.0, 2.0))  # dtype, A, the dtype's ulp at A + STEPS


def torch_state(dtype, initial):
    p = torch.zeros(1, dtype=dtype, requires_grad=True)
    optimizer = torch.optim.Adagrad([p], lr=1.0, initial_accumulator_value=initial)
    for _ in range(STEPS):
        p.grad = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.ones(1, dtype=dtype), (1,))
        optimizer.step()
    return optimizer.state[p]["sum"].item(), p.detach().item()


def replay(dtype, initial):
    """state_sum += 1, rounded to ``dtype`` at every step (torch's algorithm in that dtype)."""
    state = torch.tensor(initial, dtype=dtype)
    for _ in range(STEPS):
        state = state + torch.tensor(1.0, dtype=dtype)
    return state.item()


def main():
    numbers, failures, shows = [], [], False
    for dtype, initial, ulp in CASES:
        name = str(dtype).replace("torch.", "")
        expected = initial + STEPS  # float64; exact in the dtype
        try:
            state, param = torch_state(dtype, initial)
            replayed = replay(dtype, initial)
        except Exception as exc:  # a missing API or kernel on this release, never the divergence
            print(f"{name}: cannot run: {type(exc).__name__}: {exc}")
            failures.append(f"{type(exc).__name__}: {exc} ({name})")
            continue
        shows |= abs(state - expected) > ulp
        print(f"{name}: Adagrad(lr=1, initial_accumulator_value={initial}), {STEPS} steps of gradient 1: "
              f"state_sum {state!r} (param {param!r}); float64 {expected!r}; replayed in {name} {replayed!r}")
        numbers.append(f"{name} state_sum {state!r} vs {expected!r} ({abs(state - expected) / ulp:g} ulps)")
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
