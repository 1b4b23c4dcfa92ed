"""Issue 22's probes around `conformance check` and the run it starts, recreated as tests: each
produces its fault on purpose and checks what happens now (docs/robustness.md). The runs are
narrowed to tests/data/robustness_adagrad.yaml (three cases) so each costs a few seconds."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conformance.specs.load import SpecError, load_spec

SPEC = textwrap.dedent("""\
    op: coalesce
    cases:
      - id: a
        derivation: "1 + 2 = 3"
        dtypes: [float32]
        inputs:
          tensor: {indices: [[1, 1]], values: [1.0, 2.0], size: [2]}
        expected:
          values: [3.0]
""")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


# ------------------------------------------------------------------ spec files

def test_two_unknown_keys_of_mixed_type_are_one_clear_error(tmp_path):
    # a bare `on:` reads as the boolean true; with a str typo beside it sorted() once raised TypeError
    path = write(tmp_path, SPEC.replace("cases:", "on: push\ntpyo: 1\ncases:"))
    with pytest.raises(SpecError, match=r"unexpected field True \(YAML reads a bare on/off/yes/no as a boolean\)"):
        load_spec(path)


def test_a_duplicate_key_is_an_error_naming_both_lines(tmp_path):
    path = write(tmp_path, SPEC.replace("    dtypes: [float32]\n", "    dtypes: [float32]\n    dtypes: [float64]\n"))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value) == f"{path}:6: duplicate key 'dtypes' (first given on line 5)"
