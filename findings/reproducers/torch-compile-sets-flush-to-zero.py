"""torch-compile-sets-flush-to-zero: the first Inductor-compiled call on CPU turns on flush-to-zero for the process.

After the first torch.compile'd call on the CPU, later computations of the same process may treat
subnormal floats as zero: the library Inductor builds with -ffast-math runs start-up code that sets the
FTZ/DAZ bits of the calling thread, and ``float.fromhex("0x1p-1074") > 0`` is then False. Nothing in
torch.compile's documentation says it changes the process's floating-point environment. (The suite
turns it off again after each compiled call: conformance/core/float_env.py.)

Compared: ``float.fromhex("0x1p-1074") > 0`` (the smallest positive subnormal double) before and after one
call of torch.compile(lambda x: (x * 2).sum()) on torch.randn(8). Shown: True before, False after.

Exit 1 while torch shows it, 0 once it does not, 3 when this torch cannot run it.
"""

import sys

import torch


def subnormals_kept() -> bool:
    return float.fromhex("0x1p-1074") > 0 and torch.tensor(1e-310, dtype=torch.float64).item() > 0


def main():
    before = subnormals_kept()
    try:
        compiled = torch.compile(lambda x: (x * 2).sum())
        compiled(torch.randn(8))
    except Exception as exc:  # a missing compiler on this release
        print(f"torch {torch.__version__}: cannot run: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        return 3
    after = subnormals_kept()
    if before and not after:
        print(f"torch {torch.__version__}: shows it: subnormals are kept before the compiled call and flushed to "
              "zero after it (float.fromhex('0x1p-1074') > 0 is False)")
        return 1
    if not before:
        print(f"torch {torch.__version__}: cannot run: subnormals are flushed before any compiled call")
        return 3
    print(f"torch {torch.__version__}: does not show it: subnormals are kept after the compiled call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
