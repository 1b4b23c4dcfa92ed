"""The package's layout by pipeline stage, kept so: the lower layers (what ops and backends are
made of) never import the stages above them, and op names stay in the op records -- nothing
outside ops/, backends/, kernels/ and specs/ names an op."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from conformance.ops import OPS

PACKAGE = Path(__file__).resolve().parents[1] / "conformance"
LOWER = ("types", "tensors", "compare", "rounding", "devices", "xla_support", "ops", "kernels", "backends")
UPPER = ("specs", "cases", "run", "results", "verdict", "check", "cli")


def _stage(path: Path) -> str:
    return path.relative_to(PACKAGE).with_suffix("").parts[0]


def _imported_stages(path: Path) -> set[str]:
    stages = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
            [a.name for a in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            parts = name.split(".")
            if parts[0] == "conformance" and len(parts) > 1:
                stages.add(parts[1])
    return stages


def test_lower_layers_never_import_the_stages_above_them():
    upward = {str(path.relative_to(PACKAGE)): sorted(_imported_stages(path) & set(UPPER))
              for path in PACKAGE.rglob("*.py") if _stage(path) in LOWER}
    assert not {k: v for k, v in upward.items() if v}, upward


def test_no_op_name_outside_the_op_records():
    literal = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, OPS)))
    found = Counter()
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.split("/")[0] in ("ops", "backends", "kernels", "specs"):
            continue
        count = len(literal.findall(path.read_text(encoding="utf-8")))
        if count:
            found[relative] = count
    assert not found, f"op names outside ops/, backends/, kernels/ and specs/ (module: count): {dict(found)}; " \
                      f"put them in the op record"
