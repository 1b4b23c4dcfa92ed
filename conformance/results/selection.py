"""Which ops a set of changed files can affect, from the declarative map ``conformance/results/paths.yaml``
(or another file of the same form), and the git diff that lists a pull request's files."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Iterable

import yaml

ALL = "all"
OPTIMIZERS = "optimizers"  # a rule's ops: every op record that is an optimizer (Op.is_optimizer)


class SelectionError(Exception):
    """A paths map or a git diff that cannot be used."""


def glob_to_regex(pattern: str) -> re.Pattern:
    """``*`` within a folder, ``?`` one character, ``**/`` any number of folders, ``**`` anything."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


@dataclass
class Rule:
    patterns: list[str]
    ops: list[str] | str  # a list of op names, or ALL

    def matches(self, path: str) -> bool:
        return any(glob_to_regex(p).match(path) for p in self.patterns)


@dataclass
class OpSelection:
    """The ops some changed files select, and why each file selects what it does."""

    ops: set[str] = field(default_factory=set)
    reasons: dict[str, list[str]] = field(default_factory=dict)  # file -> ops (or ["all"])
    files: list[str] = field(default_factory=list)

    @property
    def everything(self) -> bool:
        from conformance.ops import OPS  # lazy: the op records import torch; cli's gate imports this module

        return self.ops >= set(OPS)


def op_rules() -> list[Rule]:
    """Each op's own files, from its record (``conformance.ops.OPS``), so that a new op needs no
    rule: any path that names the op (``**/*sparse_adam*``, also without underscores) or its torch
    class (``**/*SparseAdam*``): its record, its spec, a kernel's source, a candidate's file."""
    from conformance.ops import OPS  # lazy: see OpSelection.everything

    rules = []
    for name, op in OPS.items():
        words = {name, name.replace("_", "")}
        torch_class = op.torch_implementation
        if isinstance(torch_class, type):
            words.add(torch_class.__name__)
        rules.append(Rule(sorted(f"**/*{word}*" for word in words), [name]))
    return rules


def load_rules(path: Path | str | None = None) -> list[Rule]:
    """The op records' own rules (:func:`op_rules`), then the map's: ``conformance/results/paths.yaml``
    by default. A rule's ``ops`` is a list of op names, ``all``, or ``optimizers``."""
    from conformance.ops import OPS  # lazy: see OpSelection.everything

    if path is None:
        text = resources.files("conformance.results").joinpath("paths.yaml").read_text(encoding="utf-8")
        where = "conformance/results/paths.yaml"
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SelectionError(f"{path}: cannot read the paths map: {exc.strerror or exc}") from None
        where = str(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SelectionError(f"{where}: invalid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise SelectionError(f"{where}: expected a mapping with a 'rules' list")
    rules = op_rules()
    for index, raw in enumerate(data["rules"]):
        if not isinstance(raw, dict) or not isinstance(raw.get("paths"), list) or "ops" not in raw:
            raise SelectionError(f"{where}: rules[{index}] needs 'paths' (a list of globs) and 'ops'")
        ops = raw["ops"]
        if ops == OPTIMIZERS:
            ops = sorted(name for name, op in OPS.items() if op.is_optimizer)
        elif ops != ALL:
            if not isinstance(ops, list):
                raise SelectionError(f"{where}: rules[{index}].ops must be a list of op names, 'all' or "
                                     f"'{OPTIMIZERS}'")
            unknown = [op for op in ops if op not in OPS]
            if unknown:
                raise SelectionError(f"{where}: rules[{index}]: unknown op(s) {', '.join(unknown)}; "
                                     f"known: {', '.join(sorted(OPS))}")
        rules.append(Rule([str(p) for p in raw["paths"]], ops))
    return rules


def _spec_op(path: str, root: Path) -> str | None:
    if not (path.endswith((".yaml", ".yml")) and "specs/" in f"/{path}"):
        return None
    try:
        data = yaml.safe_load((root / path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return data.get("op") if isinstance(data, dict) and isinstance(data.get("op"), str) else None


def select_ops(files: Iterable[str], rules: list[Rule] | None = None, root: Path | str = ".") -> OpSelection:
    """The ops the changed ``files`` (paths relative to ``root``) select."""
    from conformance.ops import OPS  # lazy: see OpSelection.everything

    rules = load_rules() if rules is None else rules
    root = Path(root)
    selection = OpSelection()
    for raw_path in files:
        path = raw_path.strip().replace("\\", "/")
        if path.startswith("./"):
            path = path[2:]
        if not path:
            continue
        selection.files.append(path)
        chosen: set[str] = set()
        everything = False
        for rule in rules:
            if rule.matches(path):
                if rule.ops == ALL:
                    everything = True
                else:
                    chosen.update(rule.ops)
        spec_op = _spec_op(path, root)
        if spec_op in OPS:
            chosen.add(spec_op)
        if everything:
            chosen = set(OPS)
        selection.ops |= chosen
        selection.reasons[path] = [ALL] if everything else sorted(chosen)
    return selection


def changed_files_from_git(base_ref: str, root: Path | str = ".") -> list[str]:
    """Files changed between the merge base of ``base_ref`` and HEAD (a pull request's files)."""
    try:
        result = subprocess.run(["git", "-C", str(root), "diff", "--name-only", f"{base_ref}...HEAD"],
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SelectionError(f"cannot run git diff against {base_ref}: {exc}") from None
    if result.returncode != 0:
        raise SelectionError(f"git diff --name-only {base_ref}...HEAD failed: {result.stderr.strip()} "
                             "(is the base ref fetched? in CI use fetch-depth: 0)")
    return [line for line in result.stdout.splitlines() if line.strip()]


def read_changed_files(values: list[str]) -> list[str]:
    """``--changed-files`` values: paths, comma/space separated lists, or @FILE with one path a line."""
    files: list[str] = []
    for value in values:
        if value.startswith("@"):
            try:
                files += Path(value[1:]).read_text(encoding="utf-8").split()
            except OSError as exc:
                raise SelectionError(f"{value[1:]}: cannot read the list of changed files: {exc.strerror}") from None
        else:
            files += [part for part in re.split(r"[,\s]+", value) if part]
    return files


def pytest_args(selection: OpSelection) -> list[str]:
    """The pytest options that run only the selected ops' specs (empty: everything)."""
    if selection.everything or not selection.ops:
        return []
    return ["--conformance-op", ",".join(sorted(selection.ops))]
