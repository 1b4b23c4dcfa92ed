"""The suite's folders for what it compiles in this environment (the C++ kernels' build, Inductor's
caches), one per torch installation and Python: ``$XDG_CACHE_HOME/torch_sparse_conformance/``, else
``~/.cache/torch_sparse_conformance/``. Asked without importing the kernels (which an older torch
cannot import: conformance/core/torch_release.py)."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import torch


def suite_cache_directory(kind: str) -> Path:
    """The suite's folder for what it compiles (``kind``: the kernels' source hash, ``inductor``) in this
    environment: under ``$XDG_CACHE_HOME/torch_sparse_conformance/``, else ``~/.cache/...``."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "torch_sparse_conformance" / environment_tag(kind)


def environment_tag(kind: str) -> str:
    """``kind`` tagged with this environment's torch, Python and torch's install folder."""
    # keyed by where torch is installed: the compile command names its headers, so two environments
    # with the same torch version (a venv and the system's) took turns recompiling in one directory
    install = hashlib.sha256(str(Path(torch.__file__).resolve().parent).encode()).hexdigest()[:8]
    tag = f"torch{torch.__version__}-py{sys.version_info.major}{sys.version_info.minor}-{kind}-{install}"
    return tag.replace("+", "_")
