"""``conformance merge``: join the results files of one run split with ``--conformance-shard K/N``
into one results file, the one an unsharded run on a single machine would have written.

The inputs must be the shards 1/N ... N/N of one run, each once: same torch (and torch_xla),
Python, NumPy, suite version and commit, Hypothesis seed, label, selected devices (and whether each
was available) and the same options, except those that only say where a shard wrote its files or
how it was scheduled (:data:`SHARD_LOCAL_OPTIONS`). Anything else is refused with what differs and
in which files; so are a file that is not a shard, overlapping shards (the same K twice, or an
item recorded by two files) and missing shards. Each input is validated against the results
schema (:func:`conformance.results.store.load_results`), and so is the merged document.

The merged run has the records of all shards (sorted by node id), the union of their case
contexts, ``records_expected`` summed and ``not_run`` joined; its status is ``complete`` only when
every shard's was and every shard has the records it says it collected (a "complete" shard with
fewer records than its ``records_expected``, or with none although its exit status is not 5, makes
the merged run interrupted). The shards' command lines, their path arguments included, must be the
same less the shard-local options (:func:`command_line`). ``run.shards`` keeps each shard's own metadata (file, id, host, machine, times,
status): the shards may have run on different machines, so the merged run's machine fingerprint
matches a single machine's only when all shards ran on machines with one fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from conformance.results.store import (FORMAT, SCHEMA_VERSION, Results, ResultsError, ResultsLocked,
                                       holding_lock, junit_beside, keep_previous, load_results, now, output_problem,
                                       schema_problem, write_output)
from conformance.core.record import ItemRecord
from conformance.results.shards import OPTION, Shard, parse_shard

DESCRIPTION = """\
Join the results files of one run split with --conformance-shard K/N into one results file, the
one an unsharded run on a single machine would have written:

  conformance merge reports/shard-1.json reports/shard-2.json reports/shard-3.json -o reports/results.json

The files must be shards 1/N ... N/N of one run, each once: the same torch, Python, NumPy, suite
commit, Hypothesis seed, label, devices, options and command line, path arguments included (except
where a shard wrote its files and how many xdist workers it had). A shard marked complete that
lacks records it collected makes the merged run interrupted. Exit status 0 when merged; 2 when a file is unreadable or not valid
against the results schema, the files are not the shards of one run (what differs is named),
shards overlap or are missing.
"""

# run options that say where a shard wrote its files or how it was scheduled, not what it ran
SHARD_LOCAL_OPTIONS = frozenset({
    "conformance_shard", "conformance_results", "conformance_results_every", "conformance_counterexamples",
    "xmlpath", "args", "rootdir", "numprocesses", "maxworkerrestart",
})
# options of the command line (``run.options.args``) that say where a shard wrote its files, which
# run it was or how it was scheduled: left out, with their values, when the shards' command lines
# (their path arguments above all) are compared
SHARD_LOCAL_ARGS = frozenset({
    "--conformance-shard", "--conformance-results", "--conformance-results-every", "--conformance-counterexamples",
    "--conformance-run-id", "--junitxml", "--junit-xml", "-n", "--numprocesses", "--maxworkerrestart",
    "--max-worker-restart", "--rootdir", "--basetemp",
})
# run fields that must be the same in every shard of one run
SAME_RUN_FIELDS = ("torch", "torch_xla", "python", "numpy", "hypothesis_seed", "label")


class MergeError(Exception):
    """Inputs that do not make one run; the message names the files and what differs."""


@dataclass
class Merged:
    document: dict[str, Any]
    shards: list[tuple[Shard, Results]]
    warnings: list[str] = field(default_factory=list)

    @property
    def records(self) -> list[ItemRecord]:
        return self.document["records"]


def _shard(results: Results) -> Shard:
    text = (results.run.get("options") or {}).get("conformance_shard")
    if text is None:
        raise MergeError(f"{results.path}: not a shard (its run has no {OPTION} K/N); merge joins the results "
                         f"files of one run split with {OPTION} 1/N ... N/N")
    try:
        return parse_shard(str(text))
    except ValueError as exc:
        raise MergeError(f"{results.path}: run option conformance_shard {exc}") from None


def _identity(run: dict[str, Any]) -> dict[str, Any]:
    """What must be equal in every shard of one run, flattened to 'field' / 'options.name' keys."""
    fields: dict[str, Any] = {name: run.get(name) for name in SAME_RUN_FIELDS}
    suite = run.get("suite") or {}
    fields["suite.version"] = suite.get("version")
    fields["suite.git_commit"] = suite.get("git_commit")
    devices = run.get("devices") or {}
    fields["devices"] = ", ".join(
        f"{name} {'available' if not (info or {}).get('unavailable') else 'unavailable'}"
        for name, info in sorted(devices.items())) or "none"
    for name, value in sorted((run.get("options") or {}).items()):
        if name not in SHARD_LOCAL_OPTIONS:
            fields[f"options.{name}"] = value
    return fields


def command_line(args: list[Any], rootdir: str | None = None) -> list[str]:
    """A shard's pytest command line as the shards of one run share it: without the options of
    :data:`SHARD_LOCAL_ARGS` (and their values), absolute paths under the shard's rootdir relative
    to it (the runners may have checked out in different folders). Two shards whose path arguments
    differ (``specs`` and ``other_specs``) differ here, whatever their records say."""
    out: list[str] = []
    skip = False
    root = Path(rootdir) if rootdir else None
    for arg in map(str, args):
        if skip:
            skip = False
            continue
        name = arg.partition("=")[0]
        if name in SHARD_LOCAL_ARGS:
            skip = "=" not in arg
            continue
        if arg.startswith("-n") and (arg[2:].isdigit() or arg[2:] in ("auto", "logical")):
            continue
        if root is not None and not arg.startswith("-") and Path(arg).is_absolute():
            try:
                arg = Path(arg).relative_to(root).as_posix() or "."
            except ValueError:
                pass
        out.append(arg)
    return out


def _check_one_run(loaded: list[tuple[Shard, Results]]) -> None:
    identities = [(results.path, _identity(results.run)) for _, results in loaded]
    names = list(dict.fromkeys(name for _, fields in identities for name in fields))
    differences = []
    for name in names:
        values = [(path, fields.get(name)) for path, fields in identities]
        if len({repr(value) for _, value in values}) > 1:
            differences.append(f"{name} differs (" + "; ".join(f"{path}: {value!r}" for path, value in values) + ")")
    lines = [(results.path, command_line(args, (results.run.get("options") or {}).get("rootdir")))
             for _, results in loaded
             if isinstance(args := (results.run.get("options") or {}).get("args"), list)]
    if any(not _same_command_line(lines[0][1], line) for _, line in lines[1:]):
        differences.append("the command line, path arguments included, differs ("
                           + "; ".join(f"{path}: {' '.join(line)!r}" for path, line in lines) + ")")
    if differences:
        raise MergeError("not shards of one run: " + "; ".join(differences))


def _same_command_line(a: list[str], b: list[str]) -> bool:
    """Equal, token by token, where a path given absolute on one runner and relative on another
    (or under another checkout) counts as the same path when one ends with the other."""
    return len(a) == len(b) and all(x == y or _same_path(x, y) for x, y in zip(a, b))


def _same_path(x: str, y: str) -> bool:
    if x.startswith("-") or y.startswith("-") or not (x.startswith("/") or y.startswith("/")):
        return False
    return x.endswith("/" + y.lstrip("./")) or y.endswith("/" + x.lstrip("./"))


def _check_shards(loaded: list[tuple[Shard, Results]]) -> None:
    counts = sorted({shard.count for shard, _ in loaded})
    if len(counts) > 1:
        raise MergeError("shards of different splits: " + ", ".join(
            f"{results.path} is shard {shard}" for shard, results in loaded))
    count = counts[0]
    by_index: dict[int, list[Path]] = {}
    for shard, results in loaded:
        by_index.setdefault(shard.index, []).append(results.path)
    overlapping = [f"{' and '.join(map(str, paths))} are all shard {index}/{count}" if len(paths) > 2 else
                   f"{paths[0]} and {paths[1]} are both shard {index}/{count}"
                   for index, paths in sorted(by_index.items()) if len(paths) > 1]
    if overlapping:
        raise MergeError("overlapping shards: " + "; ".join(overlapping))
    missing = [f"{index}/{count}" for index in range(1, count + 1) if index not in by_index]
    if missing:
        have = ", ".join(f"{shard} from {results.path}" for shard, results in sorted(loaded, key=lambda p: p[0]))
        raise MergeError(f"missing shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} (have {have})")


def _short_of_records(results: Results) -> str | None:
    """Why a shard marked complete is not (its records fall short of what it collected, or it has
    none although it says it collected something), or None."""
    run, count = results.run, len(results.records)
    expected = run.get("records_expected")
    if isinstance(expected, int) and count < expected:
        return f"has {count} records of the {expected} it collected"
    if count == 0 and run.get("exit_status") != 5:  # pytest's 5: this shard collected nothing
        return (f"has no records (and exit status {run.get('exit_status')!r}, not 5, the status of a shard that "
                "collected nothing)")
    return None


def _exit_status(statuses: list[Any]) -> int | None:
    """One run's exit status from its shards': 0 when all passed; a shard that collected nothing
    (5) counts as passed when another ran something; otherwise the highest."""
    if any(status is None for status in statuses):
        return None
    ran = [status for status in statuses if status != 5]
    if not ran:
        return 5
    return max(ran)


def _joined(values: Iterable[Any]) -> Any:
    distinct = list(dict.fromkeys(v for v in values if v is not None))
    if len(distinct) <= 1:
        return distinct[0] if distinct else None
    return ", ".join(str(v) for v in distinct)


def _whole_run_args(args: list[Any], output: Path | str | None) -> list[Any]:
    """The command line of the whole run: the shard's args without ``--conformance-shard K/N``,
    with ``--conformance-results`` naming the merged file."""
    out, skip = [], None
    for arg in args:
        if skip is not None:
            if skip == "results":
                out.append(str(output))
            skip = None
            continue
        if arg == OPTION:
            skip = "shard"
            continue
        if isinstance(arg, str) and arg.startswith(OPTION + "="):
            continue
        if output is not None and arg == "--conformance-results":
            out.append(arg)
            skip = "results"
            continue
        if output is not None and isinstance(arg, str) and arg.startswith("--conformance-results="):
            arg = f"--conformance-results={output}"
        out.append(arg)
    return out


def merge_results(paths: Iterable[Path | str], output: Path | str | None = None) -> Merged:
    """The merged document of the shards in ``paths`` (MergeError when they are not one run)."""
    loaded = _load_shards(paths, output)
    records, cases, incomplete, warnings = _joined_records(loaded)
    run = _merged_run(loaded, incomplete, output)
    document = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "run": run,
                "records": [records[key] for key in sorted(records)], "cases": dict(sorted(cases.items()))}
    _validate(document)
    return Merged(document, loaded, warnings)


def _load_shards(paths: Iterable[Path | str], output: Path | str | None) -> list[tuple[Shard, Results]]:
    """The shards in ``paths``, each loaded and validated, checked to be one run and sorted by index."""
    files = [Path(p) for p in paths]
    if not files:
        raise MergeError("no results files given")
    seen: dict[Path, Path] = {}
    for path in files:
        resolved = path.resolve()
        if resolved in seen:
            raise MergeError(f"{path}: given twice (also as {seen[resolved]})")
        seen[resolved] = path
    if output is not None and Path(output).resolve() in seen:
        raise MergeError(f"-o {output}: is one of the inputs; write the merged file elsewhere")
    loaded: list[tuple[Shard, Results]] = []
    for path in files:
        try:
            results = load_results(path)
        except ResultsError as exc:
            raise MergeError(str(exc)) from None
        loaded.append((_shard(results), results))
    _check_shards(loaded)
    _check_one_run(loaded)
    loaded.sort(key=lambda pair: pair[0].index)
    return loaded


def _joined_records(loaded: list[tuple[Shard, Results]]
                    ) -> tuple[dict[str, ItemRecord], dict[str, Any], set[Path], list[str]]:
    """The shards' records by node id (MergeError on one recorded twice), their case contexts, the
    files of the shards that are not complete and the warnings saying why."""
    warnings = []
    records: dict[str, ItemRecord] = {}
    owner: dict[str, Path] = {}
    cases: dict[str, Any] = {}
    incomplete: set[Path] = set()
    for shard, results in loaded:
        if results.run.get("status") != "complete":
            incomplete.add(results.path)
            warnings.append(f"{results.path}: shard {shard} is {results.run.get('status')!r}, not complete "
                            f"({len(results.run.get('not_run') or [])} of its items not run): the merged run is "
                            "marked interrupted")
        else:
            short = _short_of_records(results)
            if short:
                incomplete.add(results.path)
                warnings.append(f"{results.path}: shard {shard} says it is complete but {short}: the merged run is "
                                "marked interrupted")
        for record in results.records:
            key = record["nodeid"]
            if key in records:
                raise MergeError(f"overlapping shards: {owner[key]} and {results.path} both have a record of {key}")
            records[key] = record
            owner[key] = results.path
        for key, context in results.cases.items():
            cases.setdefault(key, context)
    return records, cases, incomplete, warnings


def _merged_run(loaded: list[tuple[Shard, Results]], incomplete: set[Path],
                output: Path | str | None) -> dict[str, Any]:
    """The merged run's metadata: the first shard's, with what differs between shards joined."""
    runs = [results.run for _, results in loaded]
    first = runs[0]
    run: dict[str, Any] = {key: value for key, value in first.items()}
    run["id"] = uuid.UUID(bytes=hashlib.sha256(" ".join(str(r.get("id")) for r in runs).encode()).digest()[:16],
                          version=5).hex
    run["status"] = "interrupted" if incomplete else "complete"
    interrupted_by = _joined(r.get("interrupted_by") for r in runs)
    run.pop("interrupted_by", None)
    if interrupted_by is not None:
        run["interrupted_by"] = interrupted_by
    run["exit_status"] = _exit_status([r.get("exit_status") for r in runs])
    run["started"] = min(r["started"] for r in runs)
    finished = [r.get("finished") for r in runs]
    run["finished"] = None if None in finished else max(end for end in finished if end is not None)
    run["updated"] = now()
    _merge_machines(run, runs)
    run["options"] = _whole_run_options(first, output)
    expected = [r.get("records_expected") for r in runs]
    run["records_expected"] = None if None in expected else sum(expected)
    run["not_run"] = sorted({key for r in runs for key in r.get("not_run") or []})
    run["shards"] = [{"shard": str(shard), "file": str(results.path), "id": results.run.get("id"),
                      "hostname": results.run.get("hostname"), "machine": results.run.get("machine"),
                      "started": results.run.get("started"), "finished": results.run.get("finished"),
                      "status": results.run.get("status"), "exit_status": results.run.get("exit_status"),
                      "records": len(results.records)}
                     for shard, results in loaded]
    return run


def _merge_machines(run: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    """Set ``run``'s platform, host, CPU, devices and machine from the shards' ``runs``: one value
    where they agree, joined (or a fingerprint of the shards') where they differ."""
    first = runs[0]
    for name in ("platform", "hostname", "cpu_model"):  # optional: left out when no shard has it
        run[name] = _joined(r.get(name) for r in runs) or first.get(name)
        if run[name] is None:
            del run[name]
    counts = {r.get("cpu_count") for r in runs}
    run["cpu_count"] = counts.pop() if len(counts) == 1 else None
    run["backends"] = list(dict.fromkeys(name for r in runs for name in r.get("backends") or ()))
    run["devices"] = {name: {"name": _joined(((r.get("devices") or {}).get(name) or {}).get("name") for r in runs),
                             "unavailable": info.get("unavailable")}
                      for name, info in (first.get("devices") or {}).items()}
    fingerprints = sorted({r["machine"]["fingerprint"] for r in runs})
    if len(fingerprints) > 1:
        run["machine"] = {"fingerprint": "shards-" + hashlib.sha256("|".join(fingerprints).encode()).hexdigest()[:16],
                          "cpu_model": run["cpu_model"], "cpu_count": run["cpu_count"],
                          "arch": _joined(r["machine"].get("arch") for r in runs)}


def _whole_run_options(first: dict[str, Any], output: Path | str | None) -> dict[str, Any]:
    """The first shard's options as the whole run's: no shard, the merged file as its results."""
    options = dict(first.get("options") or {})
    options["conformance_shard"] = None
    if isinstance(options.get("args"), list):
        options["args"] = _whole_run_args(options["args"], output)
    if output is not None:
        options["conformance_results"] = str(output)
    return options


def _validate(document: dict[str, Any]) -> None:
    problem = schema_problem(document)
    if problem:  # a bug of this module, not of the inputs (each of which was valid)
        raise MergeError(f"the merged document {problem}")


def write_merged(paths: Iterable[Path | str], output: Path | str) -> Merged:
    """Merge ``paths`` and write the result to ``output`` atomically: never over a device, a folder or
    a file that is not a results file of this suite (:func:`conformance.results.store.output_problem`),
    nor while a run holds the file's lock; a complete file of another run is kept in ``.previous/``,
    as a run keeps it (:func:`conformance.results.store.keep_previous`)."""
    problem = output_problem(output, "results")
    if problem:
        raise MergeError(f"-o {output}: {problem}")
    merged = merge_results(paths, output)
    output = Path(output)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        with holding_lock(output):
            keep_previous(output, merged.document["run"]["id"], [junit_beside(output)])
            write_output(output, json.dumps(merged.document, indent=1, allow_nan=False) + "\n", "results")
    except ResultsLocked as exc:
        raise MergeError(f"-o {output}: {exc.message}; nothing was written (merge when it has finished, or give "
                         "another -o path)") from None
    except OSError as exc:  # UnsafeOutput, the previous file not kept, a full disk
        raise MergeError(f"-o {output}: {exc.strerror or exc}") from None
    return merged
