"""The backends, by name: built-ins, plus third-party ones from the
``torch_sparse_conformance.backends`` entry-point group (each entry point names a Backend)."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from conformance.core.types import RunContext, Unsupported
from conformance.backends.base import Backend

BUILTIN_BACKEND_MODULES = (
    "conformance.backends.reference",
    "conformance.backends.dense",
    "conformance.backends.coo",
    "conformance.backends.masked",
    "conformance.backends.masked_mean_idioms",
    "conformance.backends.kernel",
    "conformance.backends.torch_paths",
    "conformance.backends.compiled",
)

ENTRY_POINT_GROUP = "torch_sparse_conformance.backends"


def builtin_backends() -> dict[str, Backend]:

    backends: dict[str, Backend] = {}
    for module_name in BUILTIN_BACKEND_MODULES:
        module = importlib.import_module(module_name)
        for backend in getattr(module, "BACKENDS", None) or [module.BACKEND]:  # a module may hold several
            backends[backend.name] = backend
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        backend = entry.load()
        backends[backend.name] = backend
    return backends


__all__ = ["Backend", "RunContext", "Unsupported", "builtin_backends"]
