"""``kernel`` and ``kernel-triton``: the fused kernels of ``conformance.kernels`` as backends.

``kernel`` picks the kernels a user gets by default: C++ on CPU tensors, Triton on CUDA tensors.
``kernel-triton`` forces the Triton kernels; on CPU tensors they run in Triton's interpreter
(``TRITON_INTERPRET=1``, set here before triton is first imported), so their correctness is checked
on machines without a GPU. Both drive the kernels through the ops' candidate contracts.
"""

from __future__ import annotations

import contextlib
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from types import MappingProxyType
from typing import Any, Iterator

from conformance.core.types import RunContext, Unsupported
from conformance.backends.base import Backend
from conformance.core.divergences import Divergence, register
from conformance.core.rounding import TOWARD_ZERO
from conformance.core.torch_release import NotInTorch
from conformance.ops import OPS

import torch

if not torch.cuda.is_available() and "triton" not in sys.modules:
    # without a GPU the Triton kernels can only run interpreted, and triton reads this flag on import
    os.environ.setdefault("TRITON_INTERPRET", "1")

KERNEL_OBJECTS = MappingProxyType({"coalesce": "coalesce", "adagrad": "Adagrad", "sparse_adam": "SparseAdam",
                                   "masked_mean": "masked_mean"})


@contextlib.contextmanager
def kernel_impl(impl: str) -> Iterator[None]:
    """Run the optimizers (which read ``$CONFORMANCE_KERNEL_IMPL``) on one kernel path."""
    previous = os.environ.get("CONFORMANCE_KERNEL_IMPL")
    os.environ["CONFORMANCE_KERNEL_IMPL"] = impl
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("CONFORMANCE_KERNEL_IMPL", None)
        else:
            os.environ["CONFORMANCE_KERNEL_IMPL"] = previous


# Compiled on CUDA, the Triton kernels run with whatever triton the installed torch pins (3.5 for
# torch 2.9 and newer): no version check there. Only Triton's *interpreter* (CPU tensors,
# TRITON_INTERPRET=1) has a floor: the kernels are checked in the interpreters of triton 3.5 and
# newer (they loop with `while` on device values rather than `range` over kernel scalars, which
# older interpreters passed as plain Python numbers); older interpreters are untested.
MIN_INTERPRETER_TRITON = (3, 5)


def _triton_version() -> tuple[int, ...] | None:

    try:
        text = version("triton")
    except PackageNotFoundError:
        return None
    return tuple(int(part) for part in text.split("+")[0].split(".")[:2] if part.isdigit())


def _ensure_triton_can_run(ctx: RunContext) -> None:
    found = _triton_version()
    if found is None:
        raise Unsupported("the Triton kernels need the triton package (pip install triton)")
    if ctx.device == "cuda":
        return  # compiled kernels: any triton that torch ships with
    if found < MIN_INTERPRETER_TRITON:
        raise Unsupported(
            f"the Triton kernels are checked in Triton's interpreter from triton "
            f"{'.'.join(map(str, MIN_INTERPRETER_TRITON))} on (older interpreters pass kernel scalars "
            f"differently); this environment has triton {'.'.join(map(str, found))}")
    if "triton" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        from conformance.kernels import _triton  # optional dependency: triton, imported after TRITON_INTERPRET is set
    except ImportError as exc:
        raise Unsupported(f"the Triton kernels need the triton package: {exc}") from exc
    if not _triton.INTERPRETED:
        if torch.cuda.is_available():
            raise Unsupported("with CUDA present the Triton kernels are compiled for CUDA tensors; "
                              "Triton's interpreter (for cpu tensors) needs TRITON_INTERPRET=1 set "
                              "before triton is imported, or a process without CUDA")
        raise Unsupported("triton was imported before TRITON_INTERPRET=1 was set, so its kernels "
                          f"cannot run on {ctx.device} tensors in this process")


# drawn examples per generated item of the Triton kernels on cpu, where Triton's interpreter runs each launch
# in NumPy (~40 ms an example: 8 examples of its 114 generated items were a quarter of the main job's item time);
# on cuda, and with --conformance-examples, the run's count
INTERPRETED_EXAMPLES = 3


class KernelBackend(Backend):
    """One kernel path of ``conformance.kernels``, run through each op's candidate contract."""

    def __init__(self, name: str, impl: str, description: str):
        self.name = name
        self.impl = impl
        self.description = description
        self.optimizer_object_twin = impl == "triton"  # kernel's optimizer classes, Triton's step kernel
        if impl == "triton":
            self.emulated_examples = MappingProxyType({"cpu": INTERPRETED_EXAMPLES})
        super().__init__({op: self._runner(op) for op in KERNEL_OBJECTS})

    def optimizer_class(self, op: str):
        if op not in KERNEL_OBJECTS or not OPS[op].is_optimizer:
            return None
        import conformance.kernels as kernels  # lazy: ~0.07 s, paid when the backend is used, not by builtin_backends()

        return getattr(kernels, KERNEL_OBJECTS[op])

    def warm_up(self, devices) -> bool:
        """The C++ kernels (this backend on cpu) compile on first use, 15-20 s on a fresh machine."""
        if self.impl != "auto" or "cpu" not in devices:
            return False
        try:
            # lazy: ~0.07 s, paid when the backend is used, not by builtin_backends()
            from conformance.kernels import build_in_background
        except NotInTorch:
            return False  # its items say so, item by item
        build_in_background()
        return True

    def first_run_builds(self, devices, ops) -> str | None:
        if self.impl != "auto" or "cpu" not in devices or (ops is not None and not set(ops) & set(self.runners)):
            return None
        try:
            from conformance.kernels import build_directory, is_built  # lazy, as in warm_up
        except NotInTorch:
            return None
        return None if is_built() else f"the C++ kernels, once (15-20 s of CPU; {build_directory()})"

    def warmed(self) -> None:
        if self.impl == "auto":
            try:
                from conformance.kernels import wait_for_background_build  # lazy, as in warm_up
            except NotInTorch:
                return
            wait_for_background_build()

    def drive_optimizer(self, op: str, ctx: RunContext, use):
        self._check_can_run(ctx)
        with kernel_impl(self.impl):
            return super().drive_optimizer(op, ctx, use)

    def _check_can_run(self, ctx: RunContext) -> None:
        if ctx.device not in ("cpu", "cuda"):
            raise Unsupported(f"conformance.kernels has no kernels for the {ctx.device} device")
        if self.impl == "triton":
            _ensure_triton_can_run(ctx)
        if (self.impl == "triton" or ctx.device != "cpu") and ctx.dtype.is_complex:
            raise Unsupported(f"conformance.kernels' Triton kernels take real floating dtypes, not {ctx.dtype} "
                              "(its C++ coalesce on cpu takes complex ones)")

    def _runner(self, op_name: str):
        op = OPS[op_name]

        def run(inputs: Any, ctx: RunContext):
            self._check_can_run(ctx)
            import conformance.kernels as kernels  # lazy: ~0.07 s (see optimizer_class)

            candidate = getattr(kernels, KERNEL_OBJECTS[op_name])
            with kernel_impl(self.impl):
                return op.run_candidate(candidate, inputs, ctx)

        return run


BACKEND = KernelBackend("kernel", "auto", "conformance.kernels: C++ on CPU, Triton on CUDA")
TRITON_BACKEND = KernelBackend("kernel-triton", "triton", "conformance.kernels' Triton kernels (Triton's interpreter on CPU)")
BACKENDS = (BACKEND, TRITON_BACKEND)


# generated rounds-correctly examples that miss round-to-nearest-even but match this mode are this divergence
TRITON_INTERPRETER_BF16_TRUNCATION = register(Divergence(
    "triton-interpreter-bfloat16-truncation",
    "Triton's interpreter (TRITON_INTERPRET=1, the kernels' CPU path) converts float32 to bfloat16 by "
    "truncation, ignoring fp_downcast_rounding='rtne' (triton 3.9.0: 1.1298828125 -> 1.125, where "
    "round-to-nearest-even gives 1.1328125); compiled Triton on a GPU rounds to nearest even",
    None, backends=(TRITON_BACKEND.name,), devices=("cpu",), dtypes=("bfloat16",), rounding=TOWARD_ZERO,
))
