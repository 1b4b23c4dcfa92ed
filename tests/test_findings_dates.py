"""Findings dated by release (issue 51): each recorded divergence of torch's has a torch-only reproducer, its
exit codes measured on the releases say which releases show it, and the registrations' ``torch=`` ranges
and docs/findings.md's table agree with those measurements (findings/dates.json)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from conformance.entry_points import dating


def _run(torch_version: str, codes: dict[str, int | None]) -> dict:
    return {"torch": torch_version, "reproducers": "x",
            "findings": {name: {"exit": code, "verdict": f"v{code}", "seconds": 0.1} for name, code in codes.items()}}


def test_runs_merge_in_release_order_and_a_range_is_read_from_them(tmp_path):
    files = []
    for version, codes in {"2.12.1+cu126": {"a": 1, "b": 3}, "2.2.2": {"a": 3, "b": 1}, "2.9.1": {"a": 1, "b": 0},
                           "2.13.0+cpu": {"a": 0, "b": None}}.items():
        path = tmp_path / f"findings-torch-{version}.json"
        path.write_text(json.dumps(_run(version, codes)))
        files.append(path)
    dates = dating.merge(files)
    assert dates["releases"] == ["2.2.2", "2.9.1", "2.12.1", "2.13.0"]
    assert dating.shown_on(dates["findings"]["a"]) == (["2.9.1", "2.12.1"], ["2.13.0"])
    assert dating.range_text(dates["findings"]["a"]) == "2.9.1-2.12.1"
    assert dating.range_text(dates["findings"]["b"]) == "2.2.2-2.2.2"
    # a registration's range is checked against every release that ran it (cannot run, crashed: not asked)
    from conformance.core.divergences import Divergence

    assert dating.disagreements(dates["findings"]["a"], Divergence("a", "r", torch="<2.13").shown_by) == []
    assert dating.disagreements(dates["findings"]["a"], Divergence("a", "r").shown_by) == [
        "2.13.0 does not show it, inside the registered range"]
    assert dating.disagreements(dates["findings"]["a"], Divergence("a", "r", torch=">=2.10,<2.13").shown_by) == [
        "2.9.1 shows it, outside the registered range"]
    table = dating.table(dates, {"a": "<2.13", "b": None})
    assert "| finding | 2.2.2 | 2.9.1 | 2.12.1 | 2.13.0 | shows it | registered |" in table
    assert "| `a` | – | ■ | ■ | □ | 2.9.1-2.12.1 | `torch<2.13` |" in table
    assert "| `b` | ■ | □ | – | ? | 2.2.2-2.2.2 | every release |" in table
    # the reproducers there are now: a removed one's runs are left out
    assert list(dating.merge(files, names=["a"])["findings"]) == ["a"]


def test_a_run_without_torch_is_refused_naming_its_file(tmp_path):
    path = tmp_path / "findings-torch-x.json"
    path.write_text(json.dumps({"torch": None, "findings": {}}))
    with pytest.raises(ValueError, match="findings-torch-x.json: no torch version"):
        dating.merge([path])


def test_the_generated_section_is_replaced_and_the_rest_kept(tmp_path):
    doc = tmp_path / "findings.md"
    doc.write_text(f"# head\n\n{dating.BEGIN}\nold\n{dating.END}\n\ntail\n")
    assert dating.write_section(doc, "new table\n")
    assert doc.read_text() == f"# head\n\n{dating.BEGIN}\nnew table\n{dating.END}\n\ntail\n"
    assert not dating.write_section(doc, "new table\n")
    (tmp_path / "plain.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="plain.md: no generated section"):
        dating.write_section(tmp_path / "plain.md", "x")


# ------------------------------------------------------------------ the suite's own records and measurements

RECORDS = dating.finding_records()
DATES = json.loads(dating.DATES.read_text())


def test_every_finding_of_torch_has_a_reproducer_and_every_reproducer_a_finding():
    names = {record.finding_name for record in RECORDS}
    scripts = set(dating.reproducers())
    assert sorted(names - scripts) == [], "recorded torch divergences without findings/reproducers/<name>.py"
    assert sorted(scripts - names) == [], "reproducers that no registration or spec entry names"


def test_every_finding_was_measured_on_the_releases_of_the_sweep():
    assert len(DATES["releases"]) >= 1
    unmeasured = sorted(set(dating.reproducers()) - set(DATES["findings"]))
    assert unmeasured == [], "reproducers never run: nox -t findings, then commit findings/dates.json"


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: f"{record.finding_name}:{record.key}")
def test_each_registration_states_the_releases_measured_to_show_it(record):
    codes = DATES["findings"].get(record.finding_name, {})
    if record.devices == ("cuda",):  # dated on a GPU machine only: here each release says it cannot run it
        assert codes and all(c["exit"] == dating.CANNOT_RUN and "no CUDA device" in c["verdict"]
                             for c in codes.values()), codes
        return
    assert dating.shown_on(codes)[0], f"{record.finding_name}: no measured release shows it"
    assert dating.disagreements(codes, record.shown_by) == [], \
        f"{record.key}: torch={record.torch!r} against the measurements ({dating.range_text(codes)})"


def test_docs_findings_table_is_generated_from_the_measurements():
    text = dating.FINDINGS_DOC.read_text()
    section = text.split(dating.BEGIN, 1)[1].split(dating.END, 1)[0]
    registered = {name: record.torch for name, record in dating.registered_findings().items()}
    assert section == "\n" + dating.table(DATES, registered), \
        "docs/findings.md's table is stale: python -m conformance.entry_points.dating table reports/releases/findings-torch-*.json"


# ------------------------------------------------------------------ running the reproducers (child processes)

@pytest.mark.slow
def test_a_reproducers_exit_code_is_its_verdict_and_a_traceback_is_a_crash(tmp_path):
    scripts = {"shows": "import sys; print('shows it'); sys.exit(1)",
               "fixed": "print('does not show it')",
               "cannot": "import sys; print('cannot run: TypeError'); sys.exit(3)",
               "crashes": "raise KeyError('the script itself')"}
    for name, text in scripts.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    data = dating.run_all(sys.executable, tmp_path, timeout=60, progress=lambda line: None)
    codes = {name: result["exit"] for name, result in data["findings"].items()}
    assert codes == {"cannot": 3, "crashes": None, "fixed": 0, "shows": 1}
    assert data["findings"]["crashes"]["verdict"].startswith("crashed: KeyError")
    assert data["torch"] and data["reproducers"] == dating.fingerprint(tmp_path)
