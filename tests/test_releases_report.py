"""The report across torch releases: one run per release in release order, and what moved from each
release to the next (conformance/results/report/releases.py; issue 51). The releases are TEST FIXTURES:
a real run's results relabelled as if from other torch releases, with items changed by the test."""

from __future__ import annotations

import json
import re

from conformance.entry_points.cli import main
from conformance.results.report.releases import moved_lines, release_order, what_moved
from conformance.results.store import load_results
from conformance_runs import builtin_run, fixture_copy, load

NOT_IN = "unsupported: not in torch 2.1: torch.optim.SGD's keyword fused="


def releases():
    """Three fixtures, given out of release order: 2.5.1, 2.1.2, 2.13.0. From 2.1.2 to 2.5.1 one item
    starts passing (it was not in 2.1) and one keeps failing for another reason; from 2.5.1 to 2.13.0
    one starts failing."""
    real = builtin_run()
    records = [r for r in load(real)["records"] if r["outcome"] == "passed" and r["backend"] == "coo"]
    appears, keeps, breaks = records[0]["nodeid"], records[1]["nodeid"], records[2]["nodeid"]
    paths = {}
    for release, changes in {
        "2.5.1": {keeps: ("failed", "state_sum differs: max abs error 0.25")},
        "2.1.2": {appears: ("unsupported", NOT_IN), keeps: ("failed", "values differ: max abs error 0.5")},
        # the same reason, another number: not a move
        "2.13.0": {keeps: ("failed", "state_sum differs: max abs error 0.125"), breaks: ("error", "TypeError: boom")},
    }.items():
        path = fixture_copy(real, f"release-{release}", torch=f"{release}+cpu", label=f"torch {release} (fixture)")
        document = load(path)
        for record in document["records"]:
            if record["nodeid"] in changes:
                record["outcome"], record["message"] = changes[record["nodeid"]]
        path.write_text(json.dumps(document))
        paths[release] = path
    return paths, appears, keeps, breaks


def test_what_moved_steps_through_the_releases_in_order_and_names_each_change():
    paths, appears, keeps, breaks = releases()
    runs = [load_results(paths[r]) for r in ("2.5.1", "2.1.2", "2.13.0")]
    assert release_order(runs) == [1, 0, 2]  # 2.1.2, 2.5.1, 2.13.0
    steps = what_moved(runs, {})
    assert [(s["from"], s["to"]) for s in steps] == [("2.1.2", "2.5.1"), ("2.5.1", "2.13.0")]
    first, second = (s["kinds"] for s in steps)
    assert [c["label"].split("::")[-1] for c in first["started_passing"]] == [appears.split("::")[-1]]
    assert first["started_passing"][0]["was"] == NOT_IN
    assert [(c["label"].split("::")[-1], c["was"], c["now"]) for c in first["reason"]] == [
        (keeps.split("::")[-1], "values differ: max abs error 0.5", "state_sum differs: max abs error 0.25")]
    assert not first["started_failing"] and not second["started_passing"] and not second["reason"]
    assert [(c["from"], c["to"], c["now"]) for c in second["started_failing"]] == [("passed", "error", "TypeError: boom")]
    lines = moved_lines(steps)
    assert lines[0].startswith("torch 2.1.2 -> 2.5.1: 0 started failing, 1 started passing, 0 another outcome, "
                               "1 the same outcome, another reason")


def test_one_release_alone_moves_nothing():
    paths, *_ = releases()
    run = load_results(paths["2.1.2"])
    assert release_order([run, run]) == [] and what_moved([run, run], {}) == []


def test_the_report_of_three_releases_has_the_what_moved_section_linking_each_change(tmp_path):
    paths, appears, keeps, breaks = releases()
    out = tmp_path / "releases.html"
    assert main(["report", *(str(paths[r]) for r in ("2.13.0", "2.1.2", "2.5.1")), "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    section = text[text.index('<section id="moved">'):]
    section = section[:section.index("</section>")]
    assert section.index("torch 2.1.2 → 2.5.1") < section.index("torch 2.5.1 → 2.13.0")
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S)[1])
    linked = [data["items"][int(i)] for i in re.findall(r'class="item-link" data-i="(\d+)"', section)]
    assert {(item["nodeid"], item["outcome"]) for item in linked} == {
        (appears, "passed"), (keeps, "failed"), (breaks, "error")}
    assert "not in torch 2.1: torch.optim.SGD&#39;s keyword fused=" in section
