"""Builds and loads the C++ kernels (``csrc/sparse_kernels.cpp``) on first use.

The shared library is compiled with ninja through
``torch.utils.cpp_extension.load`` into a per-torch-version directory under the
user cache (``$CONFORMANCE_KERNELS_BUILD_DIR``, else
``$XDG_CACHE_HOME/torch_sparse_conformance/...``, else
``~/.cache/torch_sparse_conformance/...``), so later runs only re-link when the
source changed. Loading registers the operators ``torch.ops.conformance_kernels_cpu.*``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from conformance.core.caches import environment_tag, suite_cache_directory

_SOURCE = Path(__file__).resolve().parent / "csrc" / "sparse_kernels.cpp"
_EXTENSION_NAME = "conformance_kernels_cpu"
_LOCK = threading.Lock()
_LOADED = False
_FAILURE: "KernelBuildError | None" = None  # a compile that failed fails again without compiling again

#: Seconds the last call to :func:`load_cpu_kernels` spent building/loading.
last_load_seconds: float | None = None


class KernelBuildError(RuntimeError):
    """The C++ kernels could not be compiled or loaded."""


def build_directory() -> Path:
    """Directory holding the compiled extension for this torch/Python pair."""
    override = os.environ.get("CONFORMANCE_KERNELS_BUILD_DIR")
    # keyed by the source too: two checkouts with different kernels must not rebuild over each other
    source = hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:12]
    return Path(override) / environment_tag(source) if override else suite_cache_directory(source)


def is_built() -> bool:
    """Whether this environment's build folder holds the compiled kernels: a run then only loads them."""
    return (build_directory() / f"{_EXTENSION_NAME}.so").is_file()


def _stable_source(directory: Path) -> Path:
    """The source, copied into its build directory (named by the source's hash) and compiled from
    there: ninja rebuilds whenever the compile command changes, and the command names the source's
    path, so compiling a checkout's own file recompiled in every new checkout and whenever two
    checkouts took turns (15-20 s each time). The copy is written once; it is never rewritten, so
    its mtime does not change either."""
    copy = directory / _SOURCE.name
    if not copy.is_file():
        partial = directory / f".{_SOURCE.name}.{os.getpid()}"
        shutil.copyfile(_SOURCE, partial)
        os.replace(partial, copy)  # atomic: concurrent workers write the same bytes
    return copy


@contextmanager
def _only_builder(directory: Path):
    """Hold the build directory's own lock (``filelock``: the OS releases it when the process ends)
    while torch builds there. Up to torch 2.14 torch's own lock is a ``lock`` file it deletes when
    done (``FileBaton``): it stays behind when a process dies mid-build, and every later build would
    wait on it forever; holding ours, no other process is building, so such a file is stale and goes.
    torch 2.15 holds an advisory lock (``filelock``) on that file instead and leaves the file after
    every build; it blocks nothing, and goes the same way (nobody holds it while we hold ours)."""
    import filelock  # lazy: ~25 ms, only when the kernels are built

    with filelock.FileLock(str(directory / "conformance-build.lock")):
        (directory / "lock").unlink(missing_ok=True)
        yield


def _find_compiler() -> str | None:
    compiler = os.environ.get("CXX", "c++")
    return shutil.which(compiler)


def _registered() -> bool:
    """Whether this process already has the operators (a library is loaded once per process)."""
    try:
        torch._C._dispatch_find_schema_or_throw(f"{_EXTENSION_NAME}::coalesce", "")
    except RuntimeError:
        return False
    return True


BUILD_THREAD = "conformance-kernels-build"


def build_in_background() -> None:
    """Start :func:`load_cpu_kernels` in a daemon thread, so that compiling (15-20 s on a fresh
    machine) overlaps other work; the first caller that needs the kernels waits for it, and a
    failure is raised to that caller (not by the thread)."""
    if _LOADED or _FAILURE is not None or _LOCK.locked():
        return

    def build() -> None:
        try:
            load_cpu_kernels()
        except Exception:  # noqa: BLE001 - kept in _FAILURE, raised where the kernels are used
            pass

    # not a daemon: the interpreter waits for it at exit, rather than leave a half-built directory
    threading.Thread(target=build, name=BUILD_THREAD, daemon=False).start()


def wait_for_background_build() -> None:
    """Wait for :func:`build_in_background`'s thread, if one is running; what it built, or the error it
    met, is the kernels' first user's, as before."""
    for thread in threading.enumerate():
        if thread.name == BUILD_THREAD and thread is not threading.current_thread():
            thread.join()


def load_cpu_kernels(verbose: bool = False) -> None:
    """Compile (if needed) and load the C++ operators; idempotent and thread-safe."""
    global _LOADED, _FAILURE, last_load_seconds
    if _LOADED:
        return
    with _LOCK:
        if _LOADED:
            return
        if _FAILURE is not None:
            raise _FAILURE
        if _registered():
            _LOADED = True  # this module was imported again (pytester restores sys.modules): loading
            return          # the library twice would register its namespace twice, and abort
        if _find_compiler() is None:
            raise KernelBuildError(
                "conformance.kernels: the C++ CPU kernels are compiled on first use, but no "
                f"C++ compiler was found (looked for {os.environ.get('CXX', 'c++')!r}; set CXX "
                "or install g++/clang++). On CUDA tensors the Triton kernels need no compiler."
            )
        from torch.utils import cpp_extension  # lazy: ~0.35 s, only when the kernels are built or loaded

        try:
            cpp_extension.verify_ninja_availability()
        except RuntimeError as exc:
            raise KernelBuildError(
                "conformance.kernels: building the C++ kernels needs ninja (pip install ninja)"
            ) from exc
        directory = build_directory()
        directory.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        try:
            with _only_builder(directory):
                cpp_extension.load(
                    name=_EXTENSION_NAME,
                    sources=[str(_stable_source(directory))],
                    extra_cflags=["-O3", "-fopenmp", "-fno-math-errno"],
                    extra_ldflags=["-fopenmp"],
                    build_directory=str(directory),
                    is_python_module=False,
                    verbose=verbose,
                )
        except Exception as exc:  # compiler/linker errors surface as RuntimeError
            _FAILURE = KernelBuildError(
                f"conformance.kernels: failed to build the C++ kernels in {directory}: {exc}")
            raise _FAILURE from exc
        last_load_seconds = time.perf_counter() - started
        _LOADED = True
