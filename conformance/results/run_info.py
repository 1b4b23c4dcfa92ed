"""A run's metadata, written at the head of its results file (``run``): the versions (torch,
torch_xla, Python, NumPy, the suite and its git commit), the machine and its fingerprint (runs on the
same machine have comparable timings), each device's hardware or why it is unavailable, the run's
options and status fields.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import platform
import socket
import subprocess
import sys
import uuid
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from conformance import __version__
from conformance.core.text import valid_text
from conformance.results.writing import now, to_jsonable

def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def torch_xla_version() -> str | None:
    """torch_xla's version when it is installed, without importing it (that starts a runtime)."""
    module = sys.modules.get("torch_xla")
    if module is not None and getattr(module, "__version__", None):
        return str(module.__version__)
    return _version("torch_xla") or _version("torch-xla")


@lru_cache(maxsize=None)
def suite_git() -> dict[str, Any]:
    """The suite's git commit and whether its work tree has changes (None outside a checkout)."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10)
        if commit.returncode != 0:
            return {"git_commit": None, "git_dirty": None}
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
        return {"git_commit": commit.stdout.strip(),
                "git_dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}


def device_info(names: Iterable[str]) -> dict[str, dict[str, str | None]]:
    """For each device: its hardware name, or the reason it is unavailable."""
    from conformance.core.devices import DEVICES, unavailable_reason  # imports torch: see run_metadata

    info: dict[str, dict[str, str | None]] = {}
    for name in names:
        if name not in DEVICES:
            continue
        reason = unavailable_reason(name)
        hardware = None
        if reason is None:
            try:
                if name == "cpu":
                    hardware = _cpu_model()
                elif name == "cuda":
                    import torch  # see run_metadata

                    hardware = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
                else:
                    support = importlib.import_module(f"conformance.core.{name}_support")
                    hardware = str(getattr(support, f"{name}_hardware")())
            except Exception as exc:  # a name is nice to have, never worth failing a run
                hardware = f"unknown ({type(exc).__name__})"
        info[name] = {"name": hardware, "unavailable": reason}
    return info


def machine_fingerprint(run: dict) -> str:
    """Same fingerprint: timings of the two runs can be compared (hostname deliberately left out)."""
    accelerators = sorted(f"{d}={v.get('name')}" for d, v in (run.get("devices") or {}).items()
                          if d != "cpu" and v.get("name"))
    parts = [run.get("cpu_model"), str(run.get("cpu_count")), platform.machine(), platform.system(), *accelerators]
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:16]


def run_metadata(*, devices: Iterable[str] = ("cpu",), options: dict | None = None, label: str | None = None,
                 hypothesis_seed: Any = None, run_id: str | None = None,
                 backends: Iterable[str] = ()) -> dict[str, Any]:
    # torch and numpy when a run starts, not on import: the readers of results files (report, merge,
    # gate) import this module through conformance.results.store and never need them
    import torch

    try:
        import numpy  # lazy: as torch above
        numpy_version = numpy.__version__
    except ImportError:  # pragma: no cover - numpy is a dependency
        numpy_version = None

    run: dict[str, Any] = {
        "id": run_id or uuid.uuid4().hex,  # conformance check gives its own, to know the file is its run's
        "label": label if label is None else valid_text(label),
        "status": "running",
        "exit_status": None,
        "started": now(),
        "finished": None,
        "updated": now(),
        "torch": str(torch.__version__),
        "torch_xla": torch_xla_version(),
        "python": platform.python_version(),
        "numpy": numpy_version,
        "platform": platform.platform(),
        "hostname": valid_text(socket.gethostname()),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "devices": device_info(devices),
        "backends": list(backends),  # the run's backends as the registry lists them: the report's column order
        "suite": {"version": __version__, **suite_git()},
        "hypothesis_seed": hypothesis_seed,
        "options": to_jsonable(options or {}),
        "records_expected": None,
        "not_run": [],
    }
    run["machine"] = {"fingerprint": machine_fingerprint(run), "cpu_model": run["cpu_model"],
                      "cpu_count": run["cpu_count"], "arch": platform.machine()}
    return run
