"""A coalesce from a thread-affine library, as Paddle, tinygrad and jittor are (issue 52): it may be
called only from the thread that imported it, and its kernel cache, one sqlite3 connection opened at
its first use, serves only the thread that opened it (sqlite3's ``check_same_thread``, as tinygrad's).
Right on every input when every call comes from the importing thread."""

from __future__ import annotations

import sqlite3
import threading

import torch

IMPORTED_IN = threading.get_ident()
_CACHE: list[sqlite3.Connection] = []  # the library's kernel cache, opened at its first use


def coalesce(tensor: torch.Tensor) -> torch.Tensor:
    if not _CACHE:
        _CACHE.append(sqlite3.connect(":memory:"))
        _CACHE[0].execute("create table kernels (name text primary key)")
    _CACHE[0].execute("insert or ignore into kernels values ('coalesce')")  # ProgrammingError in another thread
    if threading.get_ident() != IMPORTED_IN:
        raise RuntimeError(f"called from thread {threading.get_ident()}; this library was imported in thread "
                           f"{IMPORTED_IN} and runs only there")
    return tensor.coalesce()
