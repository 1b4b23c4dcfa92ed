"""K/N pieces of a run: which shard an item belongs to (``1 + sha256(node id) mod N``) and how
``K/N`` reads. The plugin's ``--conformance-shard`` (:mod:`conformance.run.shard`) and
``conformance merge`` both use it."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

OPTION = "--conformance-shard"
_FORM = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True, order=True)
class Shard:  # (not a NamedTuple: its fields would shadow tuple's index() and count())
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"K/N"`` with 1 <= K <= N; ValueError with a one-line reason otherwise."""
    match = _FORM.match(text or "")
    if not match:
        raise ValueError(f"{text!r} is not of the form K/N (e.g. 1/3: the first of three shards)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1:
        raise ValueError(f"{text!r}: the number of shards N must be at least 1")
    if not 1 <= index <= count:
        raise ValueError(f"{text!r}: the shard K must be between 1 and N={count}")
    return Shard(index, count)


def shard_of(nodeid: str, count: int) -> int:
    """The 1-based shard of the item ``nodeid`` among ``count`` shards."""
    digest = hashlib.sha256(nodeid.encode("utf-8")).digest()
    return 1 + int.from_bytes(digest[:8], "big") % count
