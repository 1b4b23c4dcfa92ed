"""The report holds on any loadable file (issue 22): an odd results file beside a good one is named
on stderr and in the report and left out, the good one still makes the report; alone it is a clean
error (no traceback). The embedded data survives any string; only http(s) addresses become links;
``-o`` to a folder writes its index.html."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conformance.entry_points.cli import main
from conformance.results.report import build_report, divergence_of, http_url
from conformance_runs import builtin_run, load
from test_report import Page

REQUIRED_RUN = ("id", "status", "started", "torch", "python", "machine", "records_expected")
REQUIRED_RECORD = ("nodeid", "kind", "spec", "case", "op", "backend", "device", "dtype", "outcome")


def good() -> dict:
    return load(builtin_run())


def required_only(document: dict) -> dict:
    """Only the schema's required run and record fields."""
    document["run"] = {k: document["run"][k] for k in REQUIRED_RUN}
    document["records"] = [{k: r[k] for k in REQUIRED_RECORD} for r in document["records"]]
    document.pop("cases", None)
    return document


def with_impl(value):
    def change(document: dict) -> dict:
        document["run"].setdefault("options", {})["conformance_impl"] = value
        return document
    return change


def bare_nan(document: dict) -> str:
    document["records"][0]["max_abs_error"] = float("nan")
    return json.dumps(document)  # allow_nan: the literal NaN, not strict JSON


def with_median(median: str, reference: str = "0.001"):
    """Two benchmark records of one instance: the reference backend's, and one whose median is
    ``median`` as written in the file (e.g. -0.5 or 1e600, which JSON readers take as inf)."""
    def change(document: dict) -> str:
        for backend, value in (("reference", reference), ("coo", median)):
            document["records"].append(dict(
                document["records"][0], kind="benchmark", nodeid=f"bench::x[{backend}]", backend=backend,
                outcome="passed", timing={"samples": [f"@{value}@"], "median": f"@{value}@"},
                benchmark={"size": [4, 2], "density": 0.5}))
        return re.sub(r'"@([^@"]+)@"', r"\1", json.dumps(document))
    return change


def deep_nesting(document: dict) -> str:
    text = json.dumps(document)
    return text.replace('"records_expected": ', '"records_expected": ' + "[" * 200_000 + "]" * 200_000 + ", \"x\": ", 1)


ODD = {
    "bare-nan": bare_nan,
    "nesting-200000-deep": deep_nesting,
    "impl-int": with_impl(3),
    "impl-list-of-ints": with_impl([1, 2]),
    "negative-median": with_median("-0.5"),
    "median-1e600": with_median("1e600"),
}


def write(tmp_path: Path, name: str, change) -> Path:
    out = change(good())
    path = tmp_path / f"{name}.json"
    path.write_text(out if isinstance(out, str) else json.dumps(out), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(ODD))
def test_an_odd_file_is_left_out_and_named(tmp_path, capsys, name):
    bad = write(tmp_path, name, ODD[name])
    out = tmp_path / "site" / "index.html"
    assert main(["report", str(builtin_run()), str(bad), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert re.search(rf"left out {re.escape(str(bad))}: \S", err), err
    assert "Traceback" not in err
    page = Page(out.read_text(encoding="utf-8"))
    data = json.loads(page.data_text)
    assert len(data["runs"]) == 1 and len(data["items"]) == len(good()["records"])  # the good file, whole
    assert str(bad) in out.read_text(encoding="utf-8")  # named in the report too

    # alone: a clean error, non-zero, no traceback
    assert main(["report", str(bad), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"left out {bad}: " in err and "no readable results file" in err and "Traceback" not in err


def test_a_file_with_only_the_required_fields_renders(tmp_path, capsys):
    minimal = write(tmp_path, "required-only", required_only)
    out = tmp_path / "index.html"
    assert main(["report", str(builtin_run()), str(minimal), "-o", str(out)]) == 0
    assert "left out" not in capsys.readouterr().err
    data = json.loads(Page(out.read_text(encoding="utf-8")).data_text)
    assert len(data["runs"]) == 2 and len(data["items"]) == 2 * len(good()["records"])
    assert main(["report", str(minimal), "-o", str(out)]) == 0  # alone too
    assert "left out" not in capsys.readouterr().err


def test_the_data_block_survives_any_string(tmp_path):
    document = good()
    label = "nightly <!-- rc1 --> & <b>'x'</b>"
    document["run"]["label"] = label
    message = "</script><script>alert(1)</script> <!-- <![CDATA[ ]]> \u2028\u2029 & ' \""
    document["records"][0]["message"] = message
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    out = tmp_path / "index.html"
    build_report([path], out)
    text = out.read_text(encoding="utf-8")
    block = text.split('<script type="application/json" id="report-data">', 1)[1].split("</script>", 1)[0]
    assert not set("<>&\u2028\u2029") & set(block)  # all written as \u escapes
    data = json.loads(Page(text).data_text)
    assert data["runs"] == [label]
    assert data["items"][0]["message"] == message
    assert text.count("<script") == 2  # the data block and the report's script, no other


def test_only_http_links(tmp_path):
    document = good()
    document["records"][0].update(outcome="xfail", divergence={"reason": "r", "link": "javascript:alert(1)"})
    document["records"][1].update(outcome="xfail", divergence={"reason": "r", "link": "https://example.org/1"})
    key = f"{document['records'][0]['spec']}::{document['records'][0]['case']}"
    document["cases"][key]["source"] = {"title": "t", "url": "data:text/html,<script>alert(2)</script>"}
    path = tmp_path / "links.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    out = tmp_path / "index.html"
    build_report([path], out)
    page = Page(out.read_text(encoding="utf-8"))
    hrefs = [a["href"] for t, a in page.tags if "href" in a]
    assert hrefs and all(h.startswith("#") or h.startswith(("http://", "https://")) for h in hrefs), hrefs
    data = json.loads(page.data_text)
    assert data["items"][0]["divergence"] == {"reason": "r", "link": None, "unsafe_link": "javascript:alert(1)"}
    assert data["items"][1]["divergence"] == {"reason": "r", "link": "https://example.org/1"}
    assert data["cases"][key]["source"]["href"] is None
    assert [http_url(u) for u in ("javascript:x", " JavaScript:x", "data:,x", "//evil", "https://a.b/c", "HTTP://a")] == \
        [None, None, None, None, "https://a.b/c", "HTTP://a"]
    assert divergence_of({"outcome": "xfail", "message": "known divergence: r (javascript:alert(1))"})["link"] is None


def test_output_to_a_folder(tmp_path, capsys):
    folder = tmp_path / "site"
    folder.mkdir()
    assert main(["report", str(builtin_run()), "-o", str(folder)]) == 0
    assert (folder / "index.html").is_file()
    assert main(["report", str(builtin_run()), "-o", f"{tmp_path / 'new'}/"]) == 0  # a trailing / names a folder
    assert (tmp_path / "new" / "index.html").is_file()
    capsys.readouterr()
    (tmp_path / "taken" / "index.html").mkdir(parents=True)  # its index.html is a folder
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for out in (tmp_path / "taken", a_file / "index.html"):
        assert main(["report", str(builtin_run()), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("conformance report: cannot write ") and "Traceback" not in err, err
    assert not list((tmp_path / "taken").iterdir())[1:]  # no temporary file left beside it


def test_generated_items_show_narrowed_and_budget(tmp_path):
    document = good()
    document["records"][0].update(narrowed="narrowed: lr_decay, maximize at torch's default (lr_decay=0)",
                                  budget_reached="budget reached after 3 examples (1 s; --conformance-budget)")
    path = tmp_path / "generated.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    out = tmp_path / "index.html"
    build_report([path], out)
    item = json.loads(Page(out.read_text(encoding="utf-8")).data_text)["items"][0]
    assert item["narrowed"].startswith("narrowed: lr_decay") and item["budget_reached"].startswith("budget reached")


def test_a_ratio_past_the_floats_draws_no_bar(tmp_path, capsys):
    """1e300 s against 1e-300 s: a ratio of inf, so no bar (and no error), the time still said."""
    path = write(tmp_path, "huge-ratio", with_median("1e300", reference="1e-300"))
    out = tmp_path / "index.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    assert "left out" not in capsys.readouterr().err
    text = out.read_text(encoding="utf-8")
    assert text.count("<svg") == 1 and "1e+300 s" in text and "size 4×2, density 0.5" in text


# ------------------------------------------------------------------ bounded cost of input (issue 30, point 4)

@pytest.mark.slow  # 2-3 s: the fast tier stays within its 90 s
def test_labels_messages_and_values_shown_are_capped(tmp_path):
    """A 1 MB label repeated on 300 chips, a 200,000-character message and a 50,000-element value:
    the page shows the first characters of each and how much more the results file keeps."""
    from conformance.results.report import LABEL_LIMIT, TEXT_LIMIT
    from test_results_files import document, record

    records = [record(f"c{i}") for i in range(300)]
    records[0].update(outcome="failed", message="m" * 200_000, values={"x": {"got": list(range(50_000))}})
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(document(records, label="L" * 1_000_000)), encoding="utf-8")
    out = tmp_path / "index.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert len(text) < 3_000_000, len(text)  # uncapped: over 300 MB
    assert f"… ({1_000_000 - LABEL_LIMIT:,} more characters in the results file)" in text
    item = json.loads(Page(text).data_text)["items"][0]
    assert item["message"] == "m" * TEXT_LIMIT + f"… ({200_000 - TEXT_LIMIT:,} more characters in the results file)"
    got = item["values"]["x"]["got"]
    assert len(got) == 10_001 and got[-1] == "… (40,000 more items in the results file)"
    assert len(json.loads(path.read_text())["records"][0]["message"]) == 200_000  # the file keeps it all


def test_a_value_nested_900_deep_is_shown_to_a_bound_not_a_recursion_error(tmp_path, capsys):
    """JSON reads a list nested 900 deep (under the parser's bound), and the schema leaves a case's
    inputs and source, a record's divergence and any extra field free: the report showed a
    RecursionError traceback (exit 1, no page); it shows DEPTH_LIMIT levels and says the rest is in
    the results file."""
    from conformance.results.report.common import DEPTH_LIMIT
    from test_results_files import document, record

    deep: object = 1.0
    for _ in range(900):
        deep = [deep]
    records = [record("c0")]
    records[0].update(outcome="failed", message="m", divergence={"a": deep}, extra=deep)
    data = document(records)
    data["cases"] = {f"{records[0]['spec']}::c0": {"inputs": {"param": deep}, "source": {"a": deep}}}
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "index.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    shown = json.dumps(json.loads(Page(out.read_text(encoding="utf-8")).data_text), ensure_ascii=False)
    assert shown.count(f"… (nested deeper than {DEPTH_LIMIT} levels in the results file)") == 2, shown[:2000]


def test_report_and_merge_refuse_an_input_beyond_the_documented_size(tmp_path, capsys, monkeypatch):
    from conformance.results import store
    from test_results_files import document, record

    path = tmp_path / "big.json"
    path.write_text(json.dumps(document([record("c", message="m" * 5000, options={"conformance_shard": "1/1"})])))
    monkeypatch.setattr(store, "MAX_INPUT_BYTES", 4096)
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 1
    assert f"left out {path}: larger than 4,096 bytes" in capsys.readouterr().err
    assert main(["merge", str(path), "-o", str(tmp_path / "m.json")]) == 2
    assert f"{path}: larger than 4,096 bytes" in capsys.readouterr().err
    assert store.load_results(path, max_bytes=None).records  # a caller may read it all
