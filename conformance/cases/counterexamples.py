"""Shrunk counterexamples of generated properties, written as a ready-to-commit spec and as a
standalone script.

The spec (same schema as ``specs/*.yaml``, loadable by :func:`conformance.specs.load.load_spec`) takes
its golden values from the op's NumPy float64 reference -- never from the code under test -- and
says so in its source and derivation. The script holds the failing example exactly as drawn and
judges it with the harness's own code (:mod:`conformance.cases.reproduce`) on the implementation
under test (the candidate's import target, or the built-in backend), exiting 1 while it still fails.
The example is also kept for ``conformance replay`` to run first (:func:`save_failing_example`).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import yaml

from conformance.backends.base import Backend
from conformance.backends.reference import GOLDEN_SOURCE
from conformance.cases.reproduce import encode_example
from conformance.cases.search import as_failure
from conformance.cases.trial import DivergenceObserved, Property, Trial
from conformance.core import tolerances
from conformance.core.text import failing_example_path, safe_name
from conformance.core.types import Unsupported
from conformance.ops import OPS
from conformance.judging.runner import run_item
from conformance.judging.verdict import first_line
from conformance.specs.load import load_spec, nonfinite_values

if TYPE_CHECKING:  # annotations only: records are found in the OPS registry
    from conformance.ops.base import Op

# ---------------------------------------------------------------- where they are written


def reports_directory(config) -> Path:
    """The run's reports folder: the results file's folder (``--conformance-results``), else
    ``reports/`` of the directory pytest was started from -- where the user stands, never the
    rootdir (``conformance check`` runs the specs inside the installed package)."""
    results = config.getoption("conformance_results", None)
    if not results:
        try:
            results = config.getini("conformance_results")
        except ValueError:
            results = None
    here = Path(config.invocation_params.dir)
    if results:
        path = Path(results)
        return (path if path.is_absolute() else here / path).parent
    return here / "reports"


def counterexamples_directory(config) -> Path:
    """``--conformance-counterexamples DIR`` (relative to where pytest was started), else
    ``counterexamples/`` in :func:`reports_directory`."""
    directory = config.getoption("conformance_counterexamples", None)
    if not directory:
        return reports_directory(config) / "counterexamples"
    path = Path(directory)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


# ---------------------------------------------------------------- the failing example itself


def save_failing_example(directory: Path, item_name: str, example: Any) -> Path:
    path = failing_example_path(directory, item_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(pickle.dumps(example))
    partial.replace(path)  # a reader sees the whole example or none
    return path


def load_failing_example(directory: Path, item_name: str, prop: Property | None = None,
                         dtype: str = "float64") -> tuple[list, str | None]:
    """([the example], None), ([], None) when none was saved, or ([], why) when it cannot be read or,
    given ``prop``, is not an example of it (another op's, or an older suite's input objects): the
    op's cases of it must encode in spec notation, as a failure shows them."""
    path = failing_example_path(directory, item_name)
    if not path.exists():
        return [], None
    if not path.is_file():
        return [], f"the saved failing example {path} is not a file; not run"
    try:
        example = pickle.loads(path.read_bytes())  # noqa: S301 - the user's own run wrote it
    except Exception as exc:  # noqa: BLE001 - written by another version of the suite: the search still runs
        return [], f"the saved failing example {path} cannot be read ({type(exc).__name__}: {exc})"
    if prop is not None:
        try:
            for _, inputs in prop.to_cases(example, dtype):
                OPS[prop.op].encode_inputs(inputs)
        except Exception as exc:  # noqa: BLE001 - not judged: it would fail (or error) for the harness's reasons
            return [], (f"the saved failing example {path} is not an example of {prop.id} "
                        f"({first_line(exc)}); not run")
    return [example], None


# ---------------------------------------------------------------- YAML in spec notation (the op records encode)


class _FlowListDumper(yaml.SafeDumper):
    pass


def _flat(value) -> bool:
    """Scalars and (nested) lists of scalars: written inline, as the hand-written specs do."""
    if isinstance(value, list):
        return all(_flat(item) for item in value)
    return not isinstance(value, dict)


def _represent_list(dumper, data):
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=_flat(data))


def _represent_dict(dumper, data):
    inline = all(_flat(value) for value in data.values()) and len(repr(data)) < 160
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=inline)


_FlowListDumper.add_representer(list, _represent_list)
_FlowListDumper.add_representer(dict, _represent_dict)


def to_yaml(data: dict) -> str:
    return yaml.dump(data, Dumper=_FlowListDumper, sort_keys=False, width=110, allow_unicode=True)


# ---------------------------------------------------------------- the spec


@dataclass
class Counterexample:
    spec_path: Path
    script_path: Path
    spec_text: str
    reproduced: list[str] = field(default_factory=list)  # "case: outcome" lines from run_item
    problems: list[str] = field(default_factory=list)


def _source_of(op: Op) -> dict:
    document = op.record_file
    return {"title": f"NumPy float64 reference of {op.name} ({document}: {op.name}.reference), "
                     "independent of the code under test",
            "section": "golden values of generated counterexamples",
            "derivation": f"computed in float64 by {op.name}.reference ({document}), which restates the op's "
                          f"documented behaviour in NumPy, on inputs exact in the case's dtype; never by the code "
                          f"under test"}


# Seconds the notes on the other built-in backends may take (the divergences they show, whether the
# committed spec would flag them): a failing item's timeout also covers its search and its replay,
# and a long trajectory on every backend can take minutes on a loaded machine.
NOTES_BUDGET = 15.0


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline


def _divergences_elsewhere(prop: Property, example: Any, dtype: str, failing: Backend,
                           others: dict[str, Backend], deadline: float | None = None) -> tuple[list[dict], list[str]]:
    """Known divergences the other built-in backends show on this example, and ones that fail too
    (those not tried by ``deadline`` are named as such)."""
    entries: dict[str, dict] = {}
    also_failing, untried = [], []
    for name, backend in others.items():
        if name == failing.name or backend.is_oracle or not backend.runs_on("cpu"):
            continue
        if _past(deadline):
            untried.append(name)
            continue
        try:
            prop.check(Trial(OPS[prop.op], backend, "cpu", dtype), example)
        except DivergenceObserved as hit:
            entry = entries.setdefault(hit.divergence.key, {
                "backends": [], "dtypes": [dtype], "reason": hit.divergence.reason,
                **({"link": hit.divergence.link} if hit.divergence.link else {})})
            entry["backends"].append(name)
        except Exception as exc:  # noqa: BLE001 - a note for the reader, not a verdict
            if type(exc).__name__ != "Unsupported":
                also_failing.append(f"{name}: {first_line(exc)}")
    if untried:
        also_failing.append(f"not tried ({NOTES_BUDGET:g} s for these notes ran out): {', '.join(untried)}")
    return list(entries.values()), also_failing


def build_spec(prop: Property, backend: Backend, device: str, dtype: str, example: Any, failure: BaseException,
               *, seed: int, replay: str, others: dict[str, Backend] | None = None,
               impl_target: str | None = None, deadline: float | None = None) -> tuple[dict, str]:
    """(spec document, short hash naming it) for a shrunk failing example."""
    op = OPS[prop.op]
    cases = prop.to_cases(example, dtype)
    digest = hashlib.sha256(json.dumps([op.encode_inputs(inputs) for _, inputs in cases], sort_keys=True,
                                       default=str).encode()).hexdigest()[:10]
    divergences, also_failing = _divergences_elsewhere(prop, example, dtype, backend, others or {}, deadline)
    first_line = (str(failure).strip().splitlines() or [type(failure).__name__])[0]
    document: dict[str, Any] = {
        "op": op.name,
        "title": f"generated counterexample: {prop.id} on {backend.name} ({device}, {dtype})",
        "description": (f"Shrunk by Hypothesis from the generated property {prop.id!r} ({prop.summary}). "
                        f"Backend {backend.name} ({impl_target or backend.description}) failed with: {first_line}"
                        + (f" Built-in backends failing on it too: {'; '.join(also_failing)}." if also_failing else "")),
        "sources": {GOLDEN_SOURCE: _source_of(op)},
        "cases": [],
    }
    for suffix, inputs in cases:
        case_id = safe_name(f"{prop.id}-{digest}" + (f"-{suffix}" if suffix else ""))
        case: dict[str, Any] = {
            "id": case_id,
            "source": GOLDEN_SOURCE,
            "description": f"{prop.summary}; {backend.name} on {device}/{dtype}: {first_line}"[:400],
            "derivation": (f"golden values computed by the NumPy float64 reference ({op.name}.reference in "
                           f"{op.record_file}) on these inputs, which are exact in {dtype}; not by the "
                           f"code under test. Found by the generated cases (seed {seed}); replay: {replay}"),
            "dtypes": [dtype],
            **_layouts_entry(prop, example),
            "inputs": op.encode_inputs(inputs),
        }
        try:
            reference = op.reference(inputs)
        except Exception as exc:  # the documented error
            case["expected_error"] = {"type": type(exc).__name__, "match": "^" + re.escape(str(exc)) + "$"}
        else:
            tolerance = tolerances.widest(tolerances.generated(op, inputs, dtype, reference))
            case["tolerance"] = {"rtol": float(f"{tolerance.rtol:.3g}"), "atol": float(f"{tolerance.atol:.3g}")}
            case["expected"] = op.encode_expected(reference)
            if any(nonfinite_values(case["expected"], ())):  # e.g. masked_mean with no valid entry: NaN
                case["nonfinite"] = True
        if divergences:
            case["known_divergences"] = divergences
        document["cases"].append(case)
    return document, digest


def _layouts_entry(prop: Property, example: Any) -> dict[str, Any]:
    """``{"layouts": {role: layout}}`` for an example that hands inputs over in other layouts than contiguous
    (Property.layouts_of), so that the spec case runs them so; empty otherwise."""
    layouts = prop.layouts_of(example) if prop.layouts_of is not None else {}
    shown = {role: layout.encode() for role, layout in layouts.items() if not layout.is_contiguous}
    return {"layouts": shown} if shown else {}


def write_counterexample(directory: Path, prop: Property, backend: Backend, device: str, dtype: str, example: Any,
                         failure: BaseException, *, seed: int, replay: str, impl_target: str | None = None,
                         others: dict[str, Backend] | None = None) -> Counterexample:
    """Write ``<property>-<backend>-<device>-<dtype>-<hash>.yaml`` and ``.py``; load the spec back
    and run each case through the suite's runner on the failing backend."""
    # a file candidate named by absolute path, so the script's and the spec's commands work from anywhere
    impl_target, replay = _absolute_impl(impl_target), _absolute_impls(replay)
    deadline = time.monotonic() + NOTES_BUDGET
    document, digest = build_spec(prop, backend, device, dtype, example, failure, seed=seed, replay=replay,
                                  others=others, impl_target=impl_target, deadline=deadline)
    directory.mkdir(parents=True, exist_ok=True)
    stem = safe_name(f"{prop.id}-{backend.name}-{device}-{dtype}-{digest}")
    op = OPS[prop.op]
    holdable = all(op.spec_can_hold(inputs) for _, inputs in prop.to_cases(example, dtype))
    # an example no spec case can hold yet (a lifecycle): the same document as notes beside the script, never a
    # .yaml that a run of the folder would fail to load
    spec_path = directory / (f"{stem}.yaml" if holdable else f"{stem}.notes.txt")
    header = (f"# Generated counterexample ({prop.id}, backend {backend.name}, {device}, {dtype}).\n"
              f"# Golden values: the NumPy float64 reference, not the code under test.\n"
              f"# Replay the search: {replay}\n"
              f"# Reproduce (judged by the suite, as in the run; from any directory): "
              f"python {shlex.quote(str((directory / f'{stem}.py').resolve()))}\n")
    text = header + to_yaml(document)
    spec_path.write_text(text, encoding="utf-8")
    script_path = directory / f"{stem}.py"
    script_path.write_text(render_script(prop, backend, device, dtype, document, example, impl_target=impl_target,
                                         replay=replay, spec_name=spec_path.name,
                                         run_as=shlex.quote(str(script_path.resolve()))),
                           encoding="utf-8")
    result = Counterexample(spec_path, script_path, text)
    if not holdable:
        result.problems.append("no spec case holds this example yet (the inputs are shown in the notes file); the "
                               "script reproduces it")
        return result
    try:
        spec = load_spec(spec_path)
    except Exception as exc:  # noqa: BLE001 - reported, so a writer bug cannot hide the counterexample
        result.problems.append(f"the written spec does not load: {exc}")
        return result
    for case in spec.cases:
        try:
            run_item(case, backend, device, dtype)
        except BaseException as exc:  # noqa: BLE001 - a SystemExit of the implementation too (as_failure)
            if not isinstance(exc, Exception) and as_failure(exc) is exc:
                raise
            line = (str(exc).strip().splitlines() or [""])[0]
            result.reproduced.append(f"{case.id}: fails ({type(exc).__name__}: {line})")
        else:
            result.reproduced.append(f"{case.id}: passes as a single case (the property needs the script)")
    result.problems += _other_backends_on(spec, others or {}, exclude=backend.name, dtype=dtype, deadline=deadline)
    return result


def _absolute_impl(impl: str | None, root: Path | None = None) -> str | None:
    """A file candidate's ``path/to/file.py:attr`` with the path made absolute (from ``root``, default
    the run's directory); a module target, or None, as it is."""
    if not impl:
        return impl
    module, colon, attribute = impl.partition(":")
    if not colon or not module.endswith(".py") or Path(module).is_absolute():
        return impl
    return f"{os.path.abspath(Path(root or Path.cwd()) / module)}:{attribute}"


def _absolute_impls(command: str, root: Path | None = None) -> str:
    """A ``replay`` command line with each ``--impl`` file candidate named by absolute path."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    changed = False
    for i in range(len(words) - 1):
        op, equals, target = words[i + 1].partition("=")
        if words[i] == "--impl" and equals:
            absolute = f"{op}={_absolute_impl(target, root)}"
            changed, words[i + 1] = changed or absolute != words[i + 1], absolute
    return shlex.join(words) if changed else command


def _other_backends_on(spec, others: dict[str, Backend], exclude: str, dtype: str,
                       deadline: float | None = None) -> list[str]:
    """Built-in backends the committed spec would flag (beyond its known divergences): worth
    knowing before committing it -- e.g. the runner's reference cross-check uses the dtype's
    default tolerance scaled by the op, not the case's tolerance."""
    notes, untried = [], []
    for name, other in others.items():
        if name == exclude or other.is_oracle or not other.runs_on("cpu") or not other.implements(spec.op.name):
            continue
        if _past(deadline):
            untried.append(name)
            continue
        for case in spec.cases:
            if case.divergence_for(name, "cpu", dtype) is not None:
                continue
            try:
                run_item(case, other, "cpu", dtype)
            except Unsupported:
                continue
            except Exception as exc:  # noqa: BLE001 - a note for the reader
                line = (str(exc).strip().splitlines() or [""])[0]
                notes.append(f"committed as is, case {case.id} would also flag built-in backend {name}: "
                             f"{type(exc).__name__}: {line}")
    if untried:
        notes.append(f"not run on the committed spec ({NOTES_BUDGET:g} s for these notes ran out): {', '.join(untried)}")
    return notes


# ---------------------------------------------------------------- the script

# The script holds the failing example as the search drew it and judges it with the harness's own
# code (conformance.cases.reproduce: the same check, known divergences and verdict as the item's),
# so it can never disagree with the run. It needs the suite installed, as wherever the run ran.
_SCRIPT = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "repro")),
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined, autoescape=False)
_SCRIPT.filters["pyrepr"] = repr
_SCRIPT.filters["doc"] = lambda text: _docstring_safe(str(text))


def _docstring_safe(text: str) -> str:
    """``text`` as it reads inside the script's (non-raw) docstring: backslashes doubled, no closing quotes."""
    return text.replace("\\", "\\\\").replace('"""', "'''")


def render_script(prop: Property, backend: Backend, device: str, dtype: str, document: dict, example: Any, *,
                  impl_target: str | None, replay: str, spec_name: str, run_as: str | None = None) -> str:
    """The counterexample script; ``run_as`` is its path as the user runs it (default: ``spec_name``'s .py)."""
    shown = "\n".join(to_yaml({"case": case["id"], "inputs": case["inputs"]}) for case in document["cases"])
    return _SCRIPT.get_template("script.py.j2").render(
        prop_id=prop.id, summary=prop.summary, backend=backend.name, device=device, dtype=dtype,
        impl=impl_target, spec_name=spec_name, replay=replay, script_name=run_as or spec_name.replace(".yaml", ".py"),
        root=str(Path.cwd()), cases=_docstring_safe(shown).rstrip(),
        example=encode_example(example))
