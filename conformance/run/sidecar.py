"""The second watcher of a run in one process, a process of its own: ``python -I <this file>
<results file>``, started once per run with a results file by
:class:`conformance.run.plain_watchdog.Sidecar`, in the run's process group.

The run tells it, on its stdin, one command a line: ``expect`` + the node ids the run collected (JSON),
``done`` + each record the results file has or will have at its next write, ``arm`` + what to write
should the run die in the item it starts (the crash's record, and the native hang's message past
faulthandler's deadline: :meth:`PlainWatchdog._if_the_run_dies
<conformance.run.plain_watchdog.PlainWatchdog._if_the_run_dies>`), ``disarm`` when the item ended.
When its stdin closes -- the run's process ended, however -- while an item is armed, it adds that
item's record to the results file (status ``interrupted``), which is what no thread of the run
itself could do: faulthandler's watchdog ended a hang holding the GIL, or the item crashed the
process. It writes a few milliseconds after the run's process ended; conformance check waits for it
(the run's process group).

It imports the results store's atomic writer and nothing heavier (no torch, no pytest): it starts in
milliseconds and outlives the run whatever ended it.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

if __name__ == "__main__":  # run as a file (python -I): before the package's import below
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is the run's to handle
    # -I leaves this file's folders off sys.path: the package this file belongs to is the run's
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from conformance.results.writing import atomic_write_json, now  # noqa: E402 - after sys.path above


@dataclass
class Heard:
    """What the run said before its end."""

    armed: tuple[float, str] | None = None  # when the item started (time.monotonic), the arm payload
    done: dict[str, dict[str, Any]] = field(default_factory=dict)  # node id -> record
    expected: list[str] | None = None  # the node ids the run collected


def listen(lines: Iterable[str]) -> Heard:
    """Every command of the run, until its end closes the stream."""
    heard = Heard()
    for line in lines:
        kind, _, rest = line.rstrip("\n").partition(" ")
        if kind == "arm":
            heard.armed = (time.monotonic(), rest)
        elif kind == "disarm":
            heard.armed = None
        elif kind == "done":
            record = json.loads(rest)
            heard.done[record["nodeid"]] = record
        elif kind == "expect":
            heard.expected = json.loads(rest)
    return heard


def last_record(armed: tuple[float, str]) -> dict[str, Any]:
    """The armed item's record: the crash's, or the native hang's once its deadline had passed."""
    since, payload = armed
    elapsed = time.monotonic() - since
    what = json.loads(payload)
    record = what["record"]
    if elapsed >= what["hung_after"]:
        record["message"], record["timed_out"] = what["hung"], True
    return record


def add_to_results(path: Path, record: dict[str, Any], heard: Heard) -> None:
    """``record`` and the records done since the run's last write, into the results file at ``path``
    (status interrupted, what was not run); nothing when the run completed or wrote the record."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(document, dict):
        return
    run = document.get("run") or {}
    records = document.setdefault("records", [])
    if run.get("status") == "complete" or any(r.get("nodeid") == record["nodeid"] for r in records):
        return
    written = {r.get("nodeid") for r in records}
    records.extend(r for key, r in heard.done.items() if key not in written)  # those since its last write
    records.append(record)
    run["status"] = "interrupted"
    if heard.expected is not None:
        run["records_expected"] = len(heard.expected)
        keys = {r.get("nodeid") for r in records}
        run["not_run"] = sorted(key for key in heard.expected if key not in keys)
    else:
        run["not_run"] = [key for key in run.get("not_run") or [] if key != record["nodeid"]]
    run["finished"] = run["updated"] = now()
    atomic_write_json(path, document)


def main(argv: list[str]) -> int:
    heard = listen(sys.stdin)
    if heard.armed is None:
        return 0
    try:
        add_to_results(Path(argv[1]), last_record(heard.armed), heard)
    except (OSError, ValueError):  # no file to add to, or one that cannot be written: nothing to do
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
