"""Spec files: every shipped spec loads, and each kind of bad input names its file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from conformance.ops import OPS
from conformance.specs.load import SpecError, load_spec

SPECS = sorted((Path(__file__).parent.parent / "specs").glob("*.yaml"))


@pytest.mark.parametrize("path", SPECS, ids=[p.name for p in SPECS])
def test_shipped_specs_load_and_cite_sources(path):
    spec = load_spec(path)
    assert spec.cases
    for case in spec.cases:
        # a public document: its title, and its address or the claim derived by hand (no local files)
        assert case.source and case.source.get("title"), f"{case.id} has no source"
        assert case.source.get("url") or case.source.get("derivation"), f"{case.id}: source without url or derivation"
        for address in (case.source.get("url"), case.source.get("see")):
            assert address is None or address.startswith("https://"), f"{case.id}: {address}"
        if "github.com/pytorch/pytorch/blob/" in (case.source.get("url") or ""):
            assert f"/blob/{case.source['commit']}/" in case.source["url"], f"{case.id}: source code not at a commit"
        if case.expected is not None:
            assert case.derivation, f"{case.id} gives golden values without a derivation"


def test_every_op_has_a_spec():
    assert {load_spec(path).op.name for path in SPECS} >= set(OPS)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text).lstrip())
    return path


GOOD_CASE = textwrap.dedent("""
    op: coalesce
    cases:
      - id: a
        inputs:
          tensor: {indices: [[0, 1]], values: [1.0, 2.0], size: [2]}
        expected:
          values: [1.0, 2.0]
""")


def error_of(path: Path) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return info.value


def test_good_spec_loads(tmp_path):
    spec = load_spec(write(tmp_path, GOOD_CASE))
    assert [case.id for case in spec.cases] == ["a"]
    assert spec.cases[0].dtypes == ("float32", "float64")


def test_yaml_syntax_error_names_line(tmp_path):
    error = error_of(write(tmp_path, GOOD_CASE.replace("size: [2]}", "size: [2]")))
    assert error.line == 6 and "invalid YAML" in str(error)  # PyYAML notices on the next line


def test_unknown_op_names_line(tmp_path):
    error = error_of(write(tmp_path, GOOD_CASE.replace("op: coalesce", "op: coalesc")))
    assert error.line == 1 and "op" in error.message and "coalesce" in error.message


def test_wrong_type_names_field_and_line(tmp_path):
    error = error_of(write(tmp_path, GOOD_CASE.replace("size: [2]", "size: two")))
    assert error.line == 5
    assert "cases[0].inputs.tensor" in error.message


def test_missing_expected_names_the_case(tmp_path):
    error = error_of(write(tmp_path, GOOD_CASE.replace("expected:\n      values: [1.0, 2.0]", "")))
    assert error.line == 3 and "cases[0]" in error.message


def test_inconsistent_tensor_names_inputs_line(tmp_path):
    error = error_of(write(tmp_path, GOOD_CASE.replace("values: [1.0, 2.0], size", "values: [1.0], size")))
    assert error.line == 4 and "nnz=2" in error.message


def test_out_of_range_index(tmp_path):
    error = error_of(write(tmp_path, GOOD_CASE.replace("[[0, 1]]", "[[0, 5]]")))
    assert "indices of dim 0 must lie in [0, 2)" in error.message


def test_duplicate_case_id(tmp_path):
    text = GOOD_CASE + textwrap.indent(textwrap.dedent("""
        - id: a
          inputs:
            tensor: {indices: [[0]], values: [1.0], size: [1]}
          expected:
            values: [1.0]
    """).lstrip(), "  ")
    error = error_of(write(tmp_path, text))
    assert "duplicate case id 'a' (first on line 3)" in error.message and error.line == 8


def test_unknown_source_key(tmp_path):
    error = error_of(write(tmp_path, GOOD_CASE.replace("  - id: a\n", "  - id: a\n    source: blog\n")))
    assert "unknown source 'blog'" in error.message and error.line == 4


def test_bad_regex_in_expected_error(tmp_path):
    text = """
        op: sparse_adam
        cases:
          - id: e
            inputs:
              param: [1.0]
              grads: [{dense: [1.0]}]
            expected_error: {type: RuntimeError, match: "(unclosed"}
    """
    error = error_of(write(tmp_path, text))
    assert "invalid regular expression" in error.message and error.line == 7


def test_error_text_has_file_and_line(tmp_path):
    path = write(tmp_path, GOOD_CASE.replace("size: [2]", "size: two"))
    assert str(error_of(path)).startswith(f"{path}:5: ")


@pytest.mark.parametrize("tensor, sparse_dim, nnz", [
    ("{indices: [], values: [1.0, 2.0, 3.0], size: []}", 0, 3),            # a sparse scalar
    ("{indices: [], values: [[1.0, 2.0]], size: [2]}", 0, 1),              # an all-dense hybrid
    ("{indices: {fill: 0, shape: [0, 2]}, values: [1.0, 2.0], size: []}", 0, 2),
    ("{indices: [], values: [], size: [3]}", 1, 0),                        # empty, as before
    ("{indices: [], values: {fill: 0.0, shape: [0, 2]}, size: [3, 2]}", 1, 0),  # empty hybrid
])
def test_empty_indices_take_their_shape_from_size_and_values(tmp_path, tensor, sparse_dim, nnz):
    from conformance.core.tensors import CooArray, encode_coo

    spec = load_spec(write(tmp_path, GOOD_CASE.replace("{indices: [[0, 1]], values: [1.0, 2.0], size: [2]}", tensor)))
    coo = OPS["coalesce"].decode_inputs(spec.cases[0].inputs, "float64")
    assert coo.indices.shape == (sparse_dim, nnz)
    again = CooArray.decode(encode_coo(coo))  # and the encoding a counterexample is written in reads back
    assert again.indices.shape == coo.indices.shape and again.values.shape == coo.values.shape


def test_empty_indices_with_entries_and_sparse_dims_is_an_error(tmp_path):
    error = error_of(write(tmp_path, GOOD_CASE.replace("[[0, 1]]", "[]")))
    assert error.line == 4 and "cases[0].inputs" in error.message  # the inputs: line
    assert "imply 1 sparse dims and 2 entries" in error.message


def test_expected_error_kind_loads_and_defaults_to_contract(tmp_path):
    text = """
        op: sgd
        cases:
          - id: e
            inputs:
              param: [1.0]
              grads: [{dense: [1.0]}]
            expected_error: {type: RuntimeError, match: "add", kind: torch-limitation}
          - id: f
            inputs:
              param: [1.0]
              grads: [{dense: [1.0]}]
            expected_error: {type: RuntimeError}
    """
    spec = load_spec(write(tmp_path, text))
    assert [c.expected_error.kind for c in spec.cases] == ["torch-limitation", "contract"]
    error = error_of(write(tmp_path, text.replace("kind: torch-limitation", "kind: limitation")))
    assert error.line == 7 and "cases[0].expected_error.kind" in error.message and "torch-limitation" in error.message
    shipped = load_spec(Path(__file__).resolve().parents[1] / "specs" / "sgd.yaml")
    kinds = {c.id: c.expected_error.kind for c in shipped.cases if c.expected_error}
    assert kinds["dense-gradient-into-a-sparse-momentum-buffer"] == "torch-limitation"
    assert kinds["weight-decay-with-sparse-gradient"] == "contract"


@pytest.mark.parametrize("path", SPECS, ids=[p.name for p in SPECS])
def test_references_on_shipped_cases_warn_nothing(path):
    """The NaN/inf cases (0/0, inf - inf) are documented behaviour: the NumPy references compute
    them without a RuntimeWarning, so a run's console stays quiet (Op.__init_subclass__)."""
    import warnings

    nonfinite = 0
    for case in load_spec(path).cases:
        if case.expected_error is not None:
            continue
        inputs = case.op.decode_inputs(case.inputs, "float64")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            outputs = case.op.reference(inputs)
        nonfinite += any(not np.isfinite(np.asarray(v, dtype=np.float64)).all() for v in outputs.values()
                         if np.asarray(v).dtype.kind == "f")
    if path.stem in ("masked_mean", "sparse_adam", "adagrad"):
        assert nonfinite, f"{path.name}: no case gives a non-finite output, so this test shows nothing"


DIVERGENT = GOOD_CASE + """\
    known_divergences:
      - backends: [coo]
        torch: "<2.14"
        reason: a bug torch 2.14 fixed
"""


@pytest.mark.parametrize("version, shown", [("2.13.0+cpu", True), ("2.9.0+cu128", True), ("2.13.1", True),
                                            ("2.14.0", False), ("2.15.0+cu132", False),
                                            ("2.14.0.dev20260101", False)])
def test_a_known_divergence_applies_on_the_torch_releases_it_names(tmp_path, monkeypatch, version, shown):
    """Issue 28: torch 2.14 fixed fused SGD's half-precision bug, and on torch 2.15.0 the case's xfail
    read as an unexpected pass (xpass); ``torch:`` names the releases that show it, and on any other the
    entry does not apply (the local label, +cpu, is not part of the release)."""
    case = load_spec(write(tmp_path, DIVERGENT)).cases[0]
    assert case.known_divergences[0].torch == "<2.14"
    monkeypatch.setattr(torch, "__version__", version)
    assert (case.divergence_for("coo", "cpu", "float32") is not None) is shown


def test_a_torch_release_range_that_does_not_parse_is_an_invalid_spec(tmp_path):
    """A typo must not make the entry apply on no torch at all: an invalid-spec naming field and line."""
    error = error_of(write(tmp_path, DIVERGENT.replace('"<2.14"', '"2.14"')))
    assert error.line == 10 and "known_divergences[0].torch" in error.message and "'<2.14'" in error.message


NINES = "9" * 5000  # parses as a version; int() refuses it (4,300 digits) when the run matches it


@pytest.mark.parametrize("torch_versions, says", [
    (f"<{NINES}", "Exceeds the limit (4300 digits)"), (f"=={NINES}.*", "Exceeds the limit"),
    (f"~={NINES}.1", "Exceeds the limit"), (f">=2.10,!={NINES}", "Exceeds the limit"),
    ("<2.14\\0", "Invalid specifier"),
    ("<1!0", None), ("==2.13.*", None), ("===2.13.0", None), ("<2.14.dev0", None), ("==2.13.*,<1!0", None),
    ("<2.14\\n", None), (",".join(["<2.14"] * 5000), None),
])
def test_a_torch_release_range_that_cannot_be_evaluated_is_an_invalid_spec_at_load(tmp_path, torch_versions, says):
    """Issue 52 (F3): a 5,000-digit version parsed, then failed when the run matched it (a collection error,
    no item run); now load evaluates every clause: an invalid-spec naming file, line and field, or a spec
    that loads and matches torch releases as packaging does."""
    path = write(tmp_path, DIVERGENT.replace('"<2.14"', f'"{torch_versions}"'))
    if says is None:  # each names 2.13.0
        assert load_spec(path).cases[0].known_divergences[0].shown_by("2.13.0+cpu") is True
        return
    error = error_of(path)
    assert str(error).startswith(f"{path}:10: cases[0].known_divergences[0].torch: "), str(error)[:300]
    assert says in error.message and len(error.message) < 500, error.message[:600]


@pytest.mark.parametrize("layouts, field, says", [
    ("{tensor: transposed}", "layouts.tensor", "has no input role 'tensor'"),
    ("{indices: channels_last}", "layouts.indices", "takes contiguous, strided, transposed"),
    ("{values: {strided: {offset: -1}}}", "layouts.values", "offset"),
    ("{values: sideways}", "layouts.values", "sideways"),
    # a storage of 10**11 entries was an allocation error in every item; now the spec names the field
    ("{values: {strided: {offset: 100000000000, step: 2}}}", "layouts.values.strided.offset", "maximum of 1000000"),
    ("{values: {strided: {step: 99999999999}}}", "layouts.values.strided.step", "maximum of 1000"),
])
def test_a_case_naming_a_layout_it_cannot_take_is_an_error_naming_the_role(tmp_path, layouts, field, says):
    error = error_of(write(tmp_path, GOOD_CASE.replace("    inputs:", f"    layouts: {layouts}\n    inputs:")))
    assert error.line == 4 and field in str(error) and says in str(error), str(error)


def test_a_case_may_name_the_layouts_its_inputs_are_handed_over_in(tmp_path):
    from conformance.core.layouts import STRIDED, TRANSPOSED, Layout

    spec = load_spec(write(tmp_path, GOOD_CASE.replace(
        "    inputs:", "    layouts: {values: {strided: {offset: 1, step: 2}}, indices: transposed}\n    inputs:")))
    assert spec.cases[0].layouts == {"values": Layout(STRIDED, 1, 2), "indices": Layout(TRANSPOSED)}
