"""Custom-kernel backend: fused sparse optimizer steps, COO coalesce and masked mean.

CPU tensors run C++ kernels (compiled with ninja on first use and cached under
``~/.cache/torch_sparse_conformance/``); CUDA tensors run Triton kernels. Set
``CONFORMANCE_KERNEL_IMPL=cpp|triton|auto`` (or pass ``impl=`` to the functions)
to force a path; ``triton`` on CPU tensors needs ``TRITON_INTERPRET=1``.

Importing this package builds nothing; the first kernel call does.

On CUDA tensors the optimizer steps never wait for the GPU (bad gradient indices are reported by
a later ``step()`` or by ``check_index_errors()``), and ``capturable=True`` makes ``step()``
capturable in a CUDA graph; see docs/kernels-gpu.md.
"""

from ._build import (KernelBuildError, build_directory, build_in_background, is_built, load_cpu_kernels,
                     suite_cache_directory, wait_for_background_build)
from ._functions import coalesce, masked_mean
from ._ops import IMPL_ENV_VAR, resolve_impl
from ._optim import Adagrad, SparseAdam

__all__ = [
    "Adagrad",
    "SparseAdam",
    "coalesce",
    "masked_mean",
    "KernelBuildError",
    "build_directory",
    "build_in_background",
    "is_built",
    "load_cpu_kernels",
    "suite_cache_directory",
    "wait_for_background_build",
    "resolve_impl",
    "IMPL_ENV_VAR",
]
