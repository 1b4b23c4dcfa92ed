"""The HTML report built from real results files (and a test fixture standing for another torch version)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from conformance.cli import main
from conformance.results.report import build_report, repro_command, run_labels
from conformance.results.store import load_results
from conformance_runs import adagrad_run, benchmark_run, builtin_run, fixture_copy, load


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
    assert item["repro"].startswith(f"python -m pytest '{flipped}' --conformance-backend coo")

    # the diff between the runs: the flipped item regressed
    assert page.find("div", id="diff-0-1", **{"class": "diff"})
    assert 'regressed 1</span>' in text


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
    assert command == (f"python -m pytest '{record['nodeid']}' --conformance-backend candidate "
                       f"--conformance-device cpu --conformance-dtype {record['dtype']} "
                       "--conformance-impl adagrad=tests/candidates/mutants.py:SquareBeforeSumAdagrad")


def test_run_labels_are_unique():
    a, b = load_results(adagrad_run("TorchAdagrad")), load_results(adagrad_run("SquareBeforeSumAdagrad"))
    labels = run_labels([a, b])
    # same torch, same host, same file name (results.json in two folders): numbered
    assert labels == [f"{a.label} (#1)", f"{b.label} (#2)"]
    b.run["hostname"] = "other-host"
    assert run_labels([a, b]) == [f"{a.label} ({a.run['hostname']})", f"{b.label} (other-host)"]
