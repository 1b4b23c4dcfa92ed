"""What the running torch release has: the one place the suite asks, so that what an older release
lacks (an API, a keyword, a dtype kernel) is the affected items' ``unsupported`` outcome, "not in torch
X.Y: ...", never an error of the suite's or a crash at startup (docs/running.md#torch-releases)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from conformance.core.types import Unsupported

OLDEST = "2.1"  # the oldest release pyproject.toml claims (torch>=2.1)


def _release(text: str) -> tuple[int, int]:
    parts = text.split("+")[0].split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def _installed() -> str:
    """torch's version, read without importing torch (a usage error is reported before torch is imported)."""
    try:
        return version("torch")
    except PackageNotFoundError:
        import torch  # only where no distribution names it (a source build on sys.path): importing costs seconds

        return torch.__version__


RELEASE = _release(_installed())  # (major, minor) of the installed torch
RELEASE_TEXT = f"{RELEASE[0]}.{RELEASE[1]}"
NOT_IN_TORCH = f"not in torch {RELEASE_TEXT}"  # how each such reason starts (the report and tests read it)


class NotInTorch(Unsupported):
    """What the running torch release does not have (``what``, there from torch ``since`` on, where known)."""

    def __init__(self, what: str, since: str | None = None):
        super().__init__(f"{NOT_IN_TORCH}: {what}" + (f" (torch {since} and later)" if since else ""))
        self.what = what
        self.since = since


def at_least(release: str) -> bool:
    """Whether the running torch is ``release`` ("2.4") or later."""
    return RELEASE >= _release(release)


def require(release: str, what: str) -> None:
    """Raise :class:`NotInTorch` unless the running torch is ``release`` or later."""
    if not at_least(release):
        raise NotInTorch(what, release)
