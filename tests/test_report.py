"""The HTML report built from real results files (and a test fixture standing for another torch version)."""

from __future__ import annotations

import pytest

import json
import re
from collections import Counter
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

from conformance.entry_points.cli import main
from conformance.results.report import build_report, divergence_of, repro_command, run_labels
from conformance.results.store import load_results
from conformance_runs import MUTANTS, REPO, adagrad_run, benchmark_run, builtin_run, fixture_copy, load, sharded_runs


class Page(HTMLParser):
    """Tags and attributes of a page, and the embedded report data."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self._in_data = False
        self.data_text = ""
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        self._in_data = tag == "script" and attrs.get("id") == "report-data"

    def handle_endtag(self, tag):
        self._in_data = False

    def handle_data(self, data):
        if self._in_data:
            self.data_text += data

    def find(self, tag, **attrs):
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())]


def second_torch_version(path):
    """TEST FIXTURE: a real run's results relabelled as if from torch 2.9.0, with one item failing."""
    document = load(path)
    record = next(r for r in document["records"] if r["outcome"] == "passed" and r["backend"] == "coo")
    fixture = fixture_copy(path, "torch-2.9-fixture", torch="2.9.0+cpu", label="torch 2.9.0 (test fixture)")
    changed = load(fixture)
    for r in changed["records"]:
        if r["nodeid"] == record["nodeid"]:
            r.update(outcome="failed", max_abs_error=0.5, max_rel_error=0.25,
                     message="values differs from the golden values (rtol=1.3e-06, atol=1e-05): max abs error 0.5\n"
                             "  expected [1.0, 2.0]\n  got      [1.0, 2.5]")
    fixture.write_text(json.dumps(changed))
    return fixture, record["nodeid"]


def test_report_merges_runs_of_two_torch_versions(tmp_path, capsys):
    real = builtin_run()
    fixture, flipped = second_torch_version(real)
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "torch-sparse-conformance-results", "schema_version": 2}')
    out = tmp_path / "site" / "index.html"
    assert main(["report", str(real), str(fixture), str(broken), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"left out {broken}: unknown results schema version 2" in err

    text = out.read_text(encoding="utf-8")
    page = Page(text)
    # self-contained: no external scripts, styles, images or fonts
    assert not page.find("link") and all("src" not in a for t, a in page.tags if t in ("script", "img", "iframe"))
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert "unknown results schema version 2" in text  # named in the report too

    data = json.loads(page.data_text)
    torch_version = load_results(real).run["torch"]
    assert data["runs"] == [f"torch {torch_version}", "torch 2.9.0 (test fixture)"]
    records = load(real)["records"]
    assert len(data["items"]) == 2 * len(records)

    # the matrix: a chip per item, coloured by outcome, pointing at its details
    chips = page.find("button")
    chips = [a for a in chips if "chip" in a.get("class", "")]
    assert len(chips) == len(data["items"])
    for chip in chips:
        item = data["items"][int(chip["data-i"])]
        assert f"o-{item['outcome']}" in chip["class"]
    failed = [i for i, it in enumerate(data["items"]) if it["outcome"] == "failed"]
    assert len(failed) == 1 and data["items"][failed[0]]["nodeid"] == flipped
    item = data["items"][failed[0]]
    assert item["pairs"] == [{"expected": "[1.0, 2.0]", "got": "[1.0, 2.5]"}]
    assert item["repro"] == f"python -m conformance replay '{flipped}' --timeout 0"  # the run's: none

    # the diff between the runs: the flipped item regressed
    assert page.find("div", id="diff-0-1", **{"class": "diff"})
    assert 'regressed 1</span>' in text


@pytest.mark.slow  # about 2-3.5 s: the fast tier stays within its 90 s (95.8 s on 2026-11-28)
def test_report_speed_charts(tmp_path):
    out = tmp_path / "speed.html"
    build = build_report([benchmark_run("TorchAdagrad"), benchmark_run("SlowAdagrad")], out)
    assert not build.problems
    text = out.read_text(encoding="utf-8")
    assert text.count("<svg") == 1  # one benchmark instance x device x dtype
    # no reference backend in these runs: bars say so instead of a ratio
    assert "no reference time" in text
    # relative to the candidate itself, the slow run is well above 1x
    build_report([benchmark_run("TorchAdagrad"), benchmark_run("SlowAdagrad")], out, speed_baseline="candidate")
    text = out.read_text(encoding="utf-8")
    ratios = [float(x) for x in re.findall(r"candidate · torch [^<]*: ([0-9.e+-]+)× candidate", text)]
    assert len(ratios) == 2 and min(ratios) == 1.0


def test_report_with_no_readable_file_says_so(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    out = tmp_path / "index.html"
    assert main(["report", str(bad), "-o", str(out)]) == 1
    assert "no readable results file" in capsys.readouterr().err
    assert "not valid JSON" in out.read_text(encoding="utf-8")


def test_repro_commands_carry_the_runs_options():
    results = load_results(adagrad_run("SquareBeforeSumAdagrad"))
    record = results.records[0]
    command = repro_command(record, results.run)
    assert command == record["rerun"] == (
        f"python -m conformance replay 'specs/adagrad.yaml::{record['case']}[candidate-cpu-{record['dtype']}]' "
        f"--impl adagrad={REPO / MUTANTS}:SquareBeforeSumAdagrad --timeout 0")  # absolute: it runs from any
    # directory; the run had no per-item timeout (--conformance-timeout 0), and neither has its replay


def test_run_labels_are_unique():
    a, b = load_results(adagrad_run("TorchAdagrad")), load_results(adagrad_run("SquareBeforeSumAdagrad"))
    # no --conformance-label: torch's version and the candidate tell them apart
    assert run_labels([a, b]) == [f"{a.label} + mutants.py:TorchAdagrad", f"{b.label} + mutants.py:SquareBeforeSumAdagrad"]
    a2 = load_results(adagrad_run("TorchAdagrad"))
    # same torch, same candidate, same host, same file name: numbered
    name = f"{a.label} + mutants.py:TorchAdagrad"
    assert run_labels([a, a2]) == [f"{name} (#1)", f"{name} (#2)"]
    a2.run["hostname"] = "other-host"
    assert run_labels([a, a2]) == [f"{name} ({a.run['hostname']})", f"{name} (other-host)"]


def test_report_carries_case_context_and_reads_at_a_glance(tmp_path):
    """Case context from the results' cases map, xfail reasons and links, the candidate column first,
    columns where everything was skipped named instead of drawn, and xfail rows kept by the filter."""
    from conformance.results.report import divergence_of
    from conformance_runs import stock_adagrad_run

    stock = stock_adagrad_run()
    document = load(stock)
    assert document["cases"]["specs/adagrad.yaml::tutorial-step-1"]["source"]["url"].startswith("https://")
    # TEST FIXTURE: the same run with a cuda column that was skipped everywhere
    skipped = [dict(r, nodeid=r["nodeid"].replace("-cpu-", "-cuda-"), device="cuda", outcome="skipped",
                    message="Skipped: cuda not available: no driver") for r in document["records"]]
    document["records"] += skipped
    fixture = tmp_path / "with-cuda.json"
    fixture.write_text(json.dumps(document))
    out = tmp_path / "index.html"
    build_report([fixture, adagrad_run("SquareBeforeSumAdagrad")], out)
    text = out.read_text(encoding="utf-8")
    page = Page(text)
    data = json.loads(page.data_text)

    xfail = next(it for it in data["items"] if it["outcome"] == "xfail")
    assert xfail["divergence"]["reason"] and xfail["divergence"]["link"].startswith("https://")
    context = data["cases"][xfail["case_key"]]
    assert context["inputs"] and context["line"] > 0 and context["source"]
    failed = next(it for it in data["items"] if it["outcome"] == "failed")
    assert failed["verdict"] == "differs" and set(failed["values"]["state_sum"]) == {"expected", "torch", "got"}

    assert [a["title"] for a in page.find("th") if "backend" in a.get("class", "").split()] == ["candidate", "coo"]
    coo_on_cuda = sum(1 for r in skipped if r["backend"] == "coo")
    assert coo_on_cuda > 0 and f"coo on cuda ({coo_on_cuda})" in text and "cuda not available" in text  # named, not drawn
    assert not [a for a in page.find("th") if a.get("title") == "coo on cuda"]
    rows = [a for a in page.find("tr") if "case-row" in a.get("class", "")]
    assert all("all-pass" not in a["class"] for a in rows if "xfail" in a["data-outcomes"].split())


def test_divergence_of_reads_the_xfail_reason():
    record = {"outcome": "xfail", "message": "known divergence: 0 / 0 in float16 (https://example.org/issue/1)"}
    assert divergence_of(record) == {"reason": "0 / 0 in float16", "link": "https://example.org/issue/1"}
    assert divergence_of({"outcome": "xfail", "message": "known divergence: no link"}) == {"reason": "no link", "link": None}
    assert divergence_of({"outcome": "failed", "message": "x"}) is None
    assert divergence_of({"outcome": "xfail", "divergence": {"reason": "r", "link": None}}) == {"reason": "r", "link": None}


# ------------------------------------------------------------------ a report that says what it is (issue 30, point 7)

def test_the_heading_and_title_name_the_run_not_an_item(tmp_path):
    from test_results_files import document, record

    path = tmp_path / "r.json"
    path.write_text(json.dumps(document([record("only-case")], label="nightly", torch="2.13.0")))
    out = tmp_path / "index.html"
    build_report([path], out)
    text = out.read_text(encoding="utf-8")
    heading = "nightly · torch 2.13.0: coalesce on coo (cpu)"
    assert f"<title>{heading}</title>" in text and f"<h1>{heading}</h1>" in text
    build_report([path, path], out)
    assert "<h1>2 runs: nightly (#1) vs nightly (#2) · torch 2.13.0: coalesce on coo (cpu)</h1>" in \
        out.read_text(encoding="utf-8")


def test_a_verdict_is_stated_at_the_top(tmp_path):
    from test_results_files import document, record

    path = tmp_path / "r.json"
    path.write_text(json.dumps(document([record("c", backend="candidate", outcome="failed")], label="mine")))
    out = tmp_path / "check.html"
    build_report([path], out, verdict=["RESULT: FAIL (1 failed): 1 candidate item(s) failed or errored",
                                       "  failed:  specs/x.yaml::c[candidate-cpu-float32]"])
    text = out.read_text(encoding="utf-8")
    assert "<title>FAIL · mine · torch 2.13.0: coalesce on candidate (cpu)</title>" in text
    top = text[text.index("<body>"):text.index('<section id="runs">')]
    assert '<div id="verdict" class="verdict v-fail"><strong>RESULT: FAIL (1 failed)' in top
    assert "failed:  specs/x.yaml::c[candidate-cpu-float32]" in top


XLA_COUNTS = {"compile_time_samples": 2, "uncached_compile": 2, "cached_compile": 0}
DYNAMO_COUNTS = {"dynamo_graphs": 1, "dynamo_recompiles": 0, "dynamo_graph_breaks": 1, "dynamo_frames": 2, "steps": 2}


def _as_older_file(path, out):
    """TEST FIXTURE: a real results file as the suite wrote it before the compile counts were named
    ``compiles``: bare counts under ``xla_compiles`` (torch_xla's on its first record, the compiled
    backend's on its second)."""
    document = load(path)
    for record, counts in zip(document["records"], (XLA_COUNTS, DYNAMO_COUNTS)):
        record.pop("compiles", None)
        record["xla_compiles"] = dict(counts)
    out.write_text(json.dumps(document), encoding="utf-8")
    return out, [record["nodeid"] for record in document["records"][:2]]


def test_compile_counts_are_shown_with_their_compiler_also_from_an_older_file(tmp_path):
    """The report labels compile counts with what compiled them ("compiles (torch_xla)", "compiles
    (torch.compile/inductor)"), never "XLA compiles" for all; an older file's xla_compiles is read as compiles."""
    from conformance.core.record import INDUCTOR, XLA

    older, (xla_item, dynamo_item) = _as_older_file(builtin_run(), tmp_path / "older.json")
    out = tmp_path / "index.html"
    assert main(["report", str(older), "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    items = {item["nodeid"]: item for item in json.loads(Page(text).data_text)["items"]}
    assert items[xla_item]["compiles"] == {"compiler": XLA, "counts": XLA_COUNTS}
    assert items[dynamo_item]["compiles"] == {"compiler": INDUCTOR, "counts": DYNAMO_COUNTS}
    assert not any("xla_compiles" in item for item in items.values())
    assert '"compiles (" + it.compiles.compiler + ")"' in text and "XLA compiles" not in text


def test_an_older_results_file_gates_and_its_shards_merge(tmp_path, capsys):
    """gate and merge read files written before the rename: the gate compares them as any other, and the
    merged file has compiles where its shards had xla_compiles (and validates against today's schema)."""
    from conformance.results.store import load_results

    older, _ = _as_older_file(builtin_run(), tmp_path / "older.json")
    assert main(["gate", "--baseline", str(older), "--candidate", str(older), "--skip-timing"]) == 0
    shards = [_as_older_file(sharded_runs()[f"shard-{k}"], tmp_path / f"shard-{k}.json") for k in (1, 2, 3)]
    merged = tmp_path / "merged.json"
    assert main(["merge", *(str(path) for path, _ in shards), "-o", str(merged)]) == 0
    records = {record["nodeid"]: record for record in load_results(merged).records}
    assert not any("xla_compiles" in record for record in records.values())
    for _, (xla_item, dynamo_item) in shards:
        assert records[xla_item]["compiles"]["counts"] == XLA_COUNTS
        assert records[dynamo_item]["compiles"]["compiler"] == "torch.compile/inductor"
    capsys.readouterr()


def test_the_matrix_shows_torchs_paths_per_torch_version(tmp_path):
    """Issue 28: the report of the nox sessions' results (one file per torch version) shows, in each
    path's column (foreach, fused, compiled), one line per torch version, so the version whose path
    diverges reads off the row: torch 2.13's fused SGD in float16 leaves a 16-entry parameter unmoved
    (xfail), torch 2.14 and later move it (a TEST FIXTURE stands for torch 2.15.0: this torch's run
    with that item passed, as torch 2.15.0's run gives it)."""
    from conformance_runs import run_inprocess

    code, real = run_inprocess("paths-per-version", "specs/sgd.yaml", "--conformance-backend",
                               "foreach,fused,compiled", "--conformance-dtype", "float16",
                               "-k", "dense-step-of-sixteen-entries and not generated")
    assert code == 0
    document = load(real)
    fused = next(r for r in document["records"] if r["backend"] == "fused")
    fixture = fixture_copy(real, "torch-2.15-paths-fixture", torch="2.15.0+cu132", label="torch 2.15.0 (test fixture)")
    changed = load(fixture)
    passed = {key: fused[key] for key in ("nodeid", "kind", "spec", "case", "op", "backend", "device", "dtype",
                                          "rerun", "seconds") if key in fused}
    changed["records"] = [{**passed, "outcome": "passed", "message": None} if r["nodeid"] == fused["nodeid"] else r
                          for r in changed["records"]]
    fixture.write_text(json.dumps(changed))
    out = tmp_path / "index.html"
    assert main(["report", str(real), str(fixture), "-o", str(out)]) == 0

    page = Page(out.read_text(encoding="utf-8"))
    labels = json.loads(page.data_text)["runs"]
    assert labels[1] == "torch 2.15.0 (test fixture)"
    headers = {a["data-backend"] for a in page.find("th") if a.get("class", "").startswith("device")}
    assert {"foreach", "fused", "compiled"} <= headers
    shown = {chip["title"] for chip in page.find("button") if "chip" in chip.get("class", "")}
    this_torch = "passed" if fused["outcome"] == "passed" else "xfail"  # torch 2.14 and later: passed
    for label in labels:
        assert f"{label} · foreach · cpu · float16: passed" in shown
        assert any(title.startswith(f"{label} · compiled · cpu · float16: unsupported") for title in shown)
    fused_titles = [title for title in shown if title.startswith(f"{labels[0]} · fused · cpu · float16: ")]
    assert len(fused_titles) == 1 and fused_titles[0].startswith(f"{labels[0]} · fused · cpu · float16: {this_torch}")
    if this_torch == "xfail":  # the tooltip goes on with the known divergence's reason
        assert f" — {fused['divergence']['reason'][:200]}" in fused_titles[0], fused_titles[0]
    assert f"{labels[1]} · fused · cpu · float16: passed" in shown
    rows = [a for a in page.find("tr") if "case-row" in a.get("class", "")]
    assert len(rows) == 1 and ("differs" in rows[0]["class"]) is (this_torch != "passed")


# ------------------------------------------------------------------ a report read at a glance (issue 43, item 5)

@lru_cache(maxsize=None)
def fused_adagrad_run():
    """specs/adagrad.yaml's sparse steps on stock torch (coo: passes) and on torch's fused path (fused:
    unsupported on sparse gradients, with fused Adagrad's own reason), cpu; about 1 s."""
    from conformance_runs import run_inprocess

    code, path = run_inprocess("fused-adagrad", "specs/adagrad.yaml", "--conformance-backend", "coo,fused",
                               "-k", "tutorial-step-1 or duplicates-cancel-half")
    assert code == 0, f"the fused run failed (exit code {code})"
    return path


COUNT_LINK = re.compile(r'<a href="#matrix" class="count o-(\w+)" data-backend="([^"]*)" data-op="([^"]*)" '
                        r'data-outcome="(\w+)" data-run="(\d+)" title="[^"]*">(\d+)</a>')


def test_the_summary_counts_outcomes_per_backend_and_op_and_each_count_finds_its_chips(tmp_path):
    """At the top: per backend (a line per run) x op, how many items passed, failed, xfailed, were
    unsupported -- the counts of the results files, each a link whose (backend, op, outcome, run) are
    exactly those of as many chips in the matrix; the backends' totals over every op first."""
    paths = [fused_adagrad_run(), adagrad_run("SquareBeforeSumAdagrad")]
    out = tmp_path / "index.html"
    build_report(paths, out)
    text = out.read_text(encoding="utf-8")
    assert text.index('<section id="summary">') < text.index('<section id="runs">') < text.index('<section id="matrix">')

    want = Counter()
    for run, path in enumerate(paths):
        for r in load(path)["records"]:
            for op in (r["op"], ""):
                want[(r["backend"], op, r["outcome"], run)] += 1
    links = {}
    for colour, backend, op, outcome, run, n in COUNT_LINK.findall(text):
        assert colour == outcome and (backend, op, outcome, int(run)) not in links
        links[(backend, op, outcome, int(run))] = int(n)
    assert links == dict(want)
    # what the issue saw: the fused path's unsupported items and the wrong candidate's failures, counted
    assert links[("fused", "adagrad", "unsupported", 0)] > 0 and ("fused", "adagrad", "passed", 0) not in links
    assert links[("candidate", "adagrad", "failed", 1)] == 7 and links[("coo", "", "passed", 0)] > 0

    # each count finds its chips: as many as it says, of its backend, op, outcome and run
    page = Page(text)
    items = json.loads(page.data_text)["items"]
    chips = Counter()
    for chip in page.find("button"):
        if "chip" in chip.get("class", ""):
            it = items[int(chip["data-i"])]
            for op in (it["op"], ""):
                chips[(it["backend"], op, it["outcome"], it["run"])] += 1
    assert chips == want
    assert "focusedChips" in text and 'id="focus-bar"' in text  # what a click on a count runs, and says


def test_an_unsupported_items_reason_is_its_chips_tooltip_and_leads_its_details(tmp_path):
    """A reader of the mostly-unsupported columns (foreach, fused, compiled) reads why on hover: the
    chip's tooltip goes on with the item's reason, and the drawer's data has it to show first."""
    path = fused_adagrad_run()
    out = tmp_path / "index.html"
    build_report([path], out)
    page = Page(out.read_text(encoding="utf-8"))
    items = json.loads(page.data_text)["items"]
    titles = {int(a["data-i"]): a["title"] for a in page.find("button") if "chip" in a.get("class", "")}
    unsupported = [i for i, it in enumerate(items) if it["outcome"] == "unsupported"]
    assert unsupported and {items[i]["backend"] for i in unsupported} == {"fused"}
    for i in unsupported:
        reason = items[i]["message"].removeprefix("unsupported: ")
        assert "fused" in reason and items[i]["reason"] == reason
        assert titles[i].endswith(f": unsupported — {reason}"), titles[i]
    passed = [i for i, it in enumerate(items) if it["outcome"] == "passed"]
    assert passed and all(" — " not in titles[i] and items[i]["reason"] is None for i in passed)
    js = (Path(build_report.__code__.co_filename).parent / "report.js").read_text(encoding="utf-8")
    # the drawer: the heading, then the reason, before the facts
    assert js.index('"details-reason"') < js.index('el("dl", {class: "facts"})')


def test_outputs_a_candidate_does_not_return_are_marked_not_returned(tmp_path):
    """The side-by-side table's candidate column never shows a value the suite computed itself:
    Adagrad's std is sqrt(state_sum) + eps of the candidate's state, not the candidate's own std (with
    a right state_sum it reads the golden value whatever the candidate's step does): 'not returned'."""
    out = tmp_path / "index.html"
    path = adagrad_run("SquareBeforeSumAdagrad")
    build_report([path], out)
    text = out.read_text(encoding="utf-8")
    items = json.loads(Page(text).data_text)["items"]
    records = {r["nodeid"]: r for r in load(path)["records"]}
    with_std = [it for it in items if it["values"] and "std" in it["values"]]
    assert with_std
    for it in with_std:
        recorded = records[it["nodeid"]]["values"]
        assert recorded["std"]["got"] is not None  # the results file has the suite's value ...
        std = it["values"]["std"]
        assert std["got"] is None and "does not return std" in std["not_returned"]  # ... the page does not show it
        assert "sqrt(state_sum) + eps" in std["not_returned"]
        assert std["expected"] == recorded["std"]["expected"] and std["torch"] == recorded["std"]["torch"]
        for name in ("param", "state_sum"):  # what the candidate returns is shown as it returned it
            assert it["values"][name] == recorded[name] and "not_returned" not in it["values"][name]
    assert '"not returned"' in text  # the word the candidate's cell reads


def test_the_heading_counts_many_backends_instead_of_listing_them(tmp_path):
    from test_results_files import document, record

    backends = ["coo", "dense", "masked", "reference", "kernel", "foreach", "fused", "compiled"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document([record(f"c-{b}", backend=b, nodeid=f"specs/x.yaml::c[{b}-cpu-float32]")
                                         for b in backends], label="nightly", torch="2.13.0")))
    out = tmp_path / "index.html"
    build_report([path], out)
    text = out.read_text(encoding="utf-8")
    assert "<h1>nightly · torch 2.13.0: coalesce on 8 backends (cpu)</h1>" in text
    document_with_candidate = json.loads(path.read_text())
    document_with_candidate["records"][0]["backend"] = "candidate"
    path.write_text(json.dumps(document_with_candidate))
    build_report([path], out)
    assert "<h1>nightly · torch 2.13.0: coalesce on candidate and 7 other backends (cpu)</h1>" in \
        out.read_text(encoding="utf-8")


def test_the_backends_columns_follow_the_runs_registry_order_not_a_list_in_the_report(tmp_path):
    """The report names no backend: its columns follow each run's ``backends`` (the registry's order,
    written by the plugin; a real run's file has it), the candidate first; a file without it (older)
    orders its backends by name."""
    from test_results_files import document, record

    assert load(builtin_run())["run"]["backends"] == ["reference", "dense", "coo"]
    backends = ["zeta", "candidate", "alpha", "mid"]
    records = [record(f"c-{b}", backend=b, nodeid=f"specs/x.yaml::c[{b}-cpu-float32]") for b in backends]

    def columns(declared: list[str] | None) -> list[str]:
        doc = document(records, label="order", torch="2.13.0")
        if declared is None:
            doc["run"].pop("backends", None)
        else:
            doc["run"]["backends"] = declared
        path = tmp_path / "r.json"
        path.write_text(json.dumps(doc))
        build_report([path], tmp_path / "index.html")
        text = (tmp_path / "index.html").read_text(encoding="utf-8")
        summary = text[text.index('<section id="summary">'):text.index('<section id="runs">')]
        matrix = text[text.index('<section id="matrix">'):]
        found = [b for b in re.findall(r'data-backend="([^"]+)"', matrix) if b in backends]
        in_summary = [b for b in re.findall(r'data-backend="([^"]+)"', summary) if b in backends]
        assert list(dict.fromkeys(in_summary)) == list(dict.fromkeys(found)), (in_summary, found)
        return list(dict.fromkeys(found))

    assert columns(["zeta", "mid", "alpha"]) == ["candidate", "zeta", "mid", "alpha"]
    assert columns(None) == ["candidate", "alpha", "mid", "zeta"]
