"""What a counterexample script runs: its saved failing example judged by the harness's own code.

A generated item's failing example is written beside its spec as a script (``python
reports/counterexamples/<item>.py``, from any directory: :func:`main` puts the run's directory first
on ``sys.path``, so a candidate file that imports a module beside it loads as it did in the run).
The script holds the example exactly as the search drew it
and calls :func:`main`, which judges it as the search judges each example
(:func:`conformance.cases.search.judge_example`: the property's check, the known divergences and
the three-way verdict against stock torch). There is no second implementation of the properties:
the script needs the suite installed, as it is wherever the run that wrote it ran.

Exit status: 0 when the implementation passes the example now, 1 while it still fails it, 3 when
the backend cannot run it (unsupported), 4 when the implementation cannot be loaded.
"""

from __future__ import annotations

import base64
import pickle
import sys
from pathlib import Path
from typing import Any

from conformance.backends import builtin_backends
from conformance.backends.base import Backend
from conformance.backends.candidate import CandidateBackend, CandidateError, load_object
from conformance.core.interrupts import SignalWatch
from conformance.core.record import CANDIDATE
from conformance.core.target import CandidateTarget, TargetError
from conformance.core.types import Unsupported

PASSES, FAILS, UNSUPPORTED, CANNOT_LOAD = 0, 1, 3, 4


def encode_example(example: Any) -> str:
    """The example as text a script can hold (pickled, then base64 in lines of 100)."""
    text = base64.b64encode(pickle.dumps(example)).decode("ascii")
    return "\n".join(text[i:i + 100] for i in range(0, len(text), 100))


def decode_example(text: str) -> Any:
    return pickle.loads(base64.b64decode("".join(text.split())))  # noqa: S301 - the user's own run wrote it


def main(*, property_id: str, backend: str, device: str, dtype: str, impl: str | None, example: str,
         root: str) -> int:
    """Judge the script's example on the implementation it failed; print the verdict; its exit status."""
    # lazy: at module level the package would stand on 8 levels (tests/test_layout.py)
    from conformance.cases.properties import PROPERTIES
    from conformance.cases.search import judge_example

    prop = next((p for p in PROPERTIES if p.id == property_id), None)
    if prop is None:
        print(f"this suite has no generated property {property_id!r} (written by another version?)")
        return CANNOT_LOAD
    if root and (not sys.path or sys.path[0] != root):
        sys.path.insert(0, root)  # the run's directory first: the implementation's own imports find what they did
    try:
        if impl:
            target = CandidateTarget.parse(f"{prop.op}={impl}").resolved_from(root)  # as the run found it
            folder = str(Path(target.module).absolute().parent) if target.is_file else None
            if folder and folder not in sys.path:
                sys.path.insert(1, folder)  # then the file's own folder (a replay run elsewhere wrote this script)
            chosen: Backend = CandidateBackend(CANDIDATE, {prop.op: load_object(target)}, description=impl)
        else:
            chosen = builtin_backends()[backend]
    except (CandidateError, TargetError, KeyError) as exc:
        print(f"cannot load the implementation under test: {exc}")
        return CANNOT_LOAD
    try:
        with SignalWatch():  # a KeyboardInterrupt the implementation raises is its failure, as in the run
            result = judge_example(prop, chosen, device, dtype, decode_example(example))
    except Unsupported as exc:
        print(f"unsupported: {exc}")
        return UNSUPPORTED
    what = f"{property_id} on {impl or backend} ({device}, {dtype})"
    if result.failure is not None:
        message = str(result.failure).strip() or type(result.failure).__name__
        print(f"FAIL {what}:\n{message}")
        return FAILS
    print(f"ok   {what}: the example passes now")
    return PASSES


if __name__ == "__main__":  # pragma: no cover - scripts call main() themselves
    sys.exit(CANNOT_LOAD)
