"""The report in a real headless Chromium (Debian's chromium + chromium-driver, driven by selenium):
the matrix is there, a click on a cell shows its details, the diff and the filter work; with a
stock-torch baseline and a candidate run, an xfail shows its reason and link, a failed candidate
item shows its inputs, golden values, torch's and the candidate's values, and the candidate column
reads without horizontal scrolling at 1600 px. Screenshots go to reports/screenshots/.

Skips when Chromium or its driver is not installed (``apt-get install chromium chromium-driver``),
except under CI=true, where CI is meant to have them: there it fails.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conformance.results.report import build_report
from conformance_runs import REPO, adagrad_run, builtin_run, load, stock_adagrad_run
from test_report import second_torch_version

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1600,1000", "--force-device-scale-factor=1"]
MISSING = "Chromium or chromedriver is not installed (Debian: apt-get install -y chromium chromium-driver)"
SCREENSHOTS = REPO / "reports" / "screenshots"


@pytest.fixture
def browser(tmp_path):
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {MISSING}")
        pytest.skip(MISSING)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_report_opens_and_clicks_through(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    real = builtin_run()
    fixture, flipped = second_torch_version(real)
    out = tmp_path / "index.html"
    build_report([real, fixture], out)
    browser.get(out.as_uri())
    wait = WebDriverWait(browser, 15)

    # the matrix is there, with a chip per item of both runs
    matrix = wait.until(EC.visibility_of_element_located((By.ID, "matrix-wrap")))
    chips = matrix.find_elements(By.CSS_SELECTOR, "button.chip")
    assert len(chips) == 2 * len(load(real)["records"])
    key = browser.find_element(By.ID, "run-key")
    assert "2.9.0 (test fixture)" in key.text  # the full labels, once, with each run's tag
    assert not browser.find_element(By.ID, "details").is_displayed()

    # click the one failing cell: its details appear
    failing = matrix.find_element(By.CSS_SELECTOR, "button.chip.o-failed")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", failing)
    failing.click()
    details = wait.until(EC.visibility_of_element_located((By.ID, "details")))
    assert browser.find_element(By.ID, "details-outcome").text == "failed"
    assert "expected [1.0, 2.0]" in browser.find_element(By.ID, "details-message").text
    assert flipped in browser.find_element(By.ID, "details-repro").text
    pairs = details.find_elements(By.CSS_SELECTOR, "table.pairs td code")
    assert [p.text for p in pairs] == ["[1.0, 2.0]", "[1.0, 2.5]"]
    assert "torch 2.9.0 (test fixture)" in details.text
    assert "selected" in failing.get_attribute("class")

    # the same item in the other run is one click away
    details.find_element(By.CSS_SELECTOR, "a.item-link").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "details-outcome"), "passed"))
    browser.find_element(By.ID, "details-close").click()
    wait.until(EC.invisibility_of_element_located((By.ID, "details")))

    # the diff view: the flipped item regressed, and its link opens it
    diff = browser.find_element(By.ID, "diff-0-1")
    assert diff.is_displayed()
    link = diff.find_element(By.CSS_SELECTOR, "details.regressed a.item-link")
    assert flipped.split("::")[1] in link.text
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "details-outcome"), "failed"))
    browser.find_element(By.ID, "details-close").click()
    Select(browser.find_element(By.ID, "diff-head")).select_by_index(0)
    assert browser.find_element(By.ID, "diff-none").is_displayed()
    Select(browser.find_element(By.ID, "diff-base")).select_by_index(1)
    assert browser.find_element(By.ID, "diff-1-0").is_displayed()

    # the filter keeps only the matching rows
    case = flipped.split("::")[1].split("[")[0]
    box = browser.find_element(By.ID, "filter")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
    box.send_keys(case)
    visible = [row for row in browser.find_elements(By.CSS_SELECTOR, "tr.case-row") if row.is_displayed()]
    assert visible and all(case in row.text for row in visible)

    # no error in the page's console
    try:
        logs = browser.get_log("browser")
    except Exception:  # not every driver offers logs
        logs = []
    assert not [entry for entry in logs if entry.get("level") == "SEVERE"], json.dumps(logs)[:2000]


def screenshot(browser, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    assert browser.save_screenshot(str(path)) and path.stat().st_size > 10_000, path
    return path


def visible_at_its_centre(browser, element) -> bool:
    """The element is what the page shows at its own centre (not covered, not scrolled away)."""
    return bool(browser.execute_script(
        "var r = arguments[0].getBoundingClientRect();"
        "var x = r.left + r.width / 2, y = r.top + r.height / 2;"
        "if (x < 0 || y < 0 || x > window.innerWidth || y > window.innerHeight) return false;"
        "var hit = document.elementFromPoint(x, y); return hit === arguments[0] || arguments[0].contains(hit);",
        element))


def test_a_reader_can_act_on_a_candidate_report(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    # stock torch; a right candidate (torch's own Adagrad, wrapped); a wrong one
    baseline, right, candidate = stock_adagrad_run(), adagrad_run("TorchAdagrad"), adagrad_run("SquareBeforeSumAdagrad")
    out = tmp_path / "index.html"
    build_report([baseline, right, candidate], out)
    browser.set_window_size(1600, 1000)
    browser.get(out.as_uri())
    wait = WebDriverWait(browser, 15)
    matrix = wait.until(EC.visibility_of_element_located((By.ID, "matrix-wrap")))
    wrap = browser.find_element(By.ID, "matrix-wrap")
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", wrap)
    screenshot(browser, "matrix-1600")

    # one column per implementation: the candidate's first, then stock torch's; no run columns
    backends = [th.text for th in matrix.find_elements(By.CSS_SELECTOR, "thead th.backend")]
    assert backends == ["candidate", "coo"], backends
    # the candidate column reads without horizontal scrolling at 1600 px
    assert browser.execute_script("return window.innerWidth") <= 1600
    assert browser.execute_script("return arguments[0].scrollLeft", wrap) == 0
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    head = matrix.find_element(By.CSS_SELECTOR, "thead th.backend.candidate")
    right = browser.execute_script("return arguments[0].getBoundingClientRect().right", head)
    wrap_right = browser.execute_script("var r = arguments[0].getBoundingClientRect(); return r.left + arguments[0].clientWidth", wrap)
    assert right <= wrap_right, (right, wrap_right)
    cells = matrix.find_elements(By.CSS_SELECTOR, "td.cell.candidate button.chip")
    assert cells and all(visible_at_its_centre(browser, c) for c in cells[:6])
    # full labels on hover: each run tag and chip carries the whole label
    tags = matrix.find_elements(By.CSS_SELECTOR, "td.cell .runtag")
    titles = {t.get_attribute("title") for t in tags}
    assert "stock torch" in titles and len(titles) == 3 and not any(t.endswith("…") for t in titles), titles

    # an xfail (stock torch's known divergence) shows its reason and its link
    xfail = matrix.find_element(By.CSS_SELECTOR, "td.cell button.chip.o-xfail")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", xfail)
    xfail.click()
    wait.until(EC.visibility_of_element_located((By.ID, "details-divergence")))
    reason = browser.find_element(By.ID, "details-divergence-reason")
    link = browser.find_element(By.ID, "details-divergence-link")
    assert reason.is_displayed() and "NaN" in reason.text
    assert link.is_displayed() and link.get_attribute("href").startswith("https://")
    screenshot(browser, "xfail-details")
    browser.find_element(By.ID, "details-close").click()

    # "hide rows where everything passed" keeps the xfail's row
    toggle = browser.find_element(By.ID, "hide-passing")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", toggle)
    toggle.click()
    row = xfail.find_element(By.XPATH, "./ancestor::tr")
    assert row.is_displayed()
    assert not [r for r in matrix.find_elements(By.CSS_SELECTOR, "tr.case-row.all-pass") if r.is_displayed()]
    toggle.click()

    # a failed candidate item: inputs, golden values (source, derivation), torch's and the candidate's values
    failed = matrix.find_element(By.CSS_SELECTOR, "td.cell.candidate button.chip.o-failed")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", failed)
    failed.click()
    wait.until(EC.visibility_of_element_located((By.ID, "details-values")))
    assert browser.find_element(By.ID, "details-verdict").text == "differs"
    values = browser.find_element(By.ID, "details-values")
    header = [th.text for th in values.find_elements(By.CSS_SELECTOR, "tr:first-child th")]
    assert header == ["output", "golden (expected)", "stock torch", "candidate"]
    state_sum = values.find_element(By.XPATH, ".//tr[th='state_sum']")
    assert [td.text for td in state_sum.find_elements(By.TAG_NAME, "td")] == ["[0, 9, 0, 0]", "[0, 9, 0, 0]", "[0, 5, 0, 0]"]
    inputs = browser.find_element(By.ID, "details-inputs-text")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", inputs)
    assert inputs.is_displayed() and '"grads"' in inputs.text and '"indices"' in inputs.text
    source = browser.find_element(By.ID, "details-source")
    assert source.is_displayed() and "source:" in source.text and "specs/adagrad.yaml:" in source.text
    golden = browser.find_element(By.ID, "details-golden-text")
    assert golden.is_displayed() and "state_sum" in golden.text
    screenshot(browser, "failed-candidate-details")
    browser.find_element(By.ID, "details-close").click()

    # the Diff section opens on the pair that differs: right candidate -> wrong one, with the regressions
    shown = [d for d in browser.find_elements(By.CSS_SELECTOR, "div.diff") if d.is_displayed()]
    assert len(shown) == 1 and shown[0].get_attribute("id") == "diff-1-2", [d.get_attribute("id") for d in shown]
    assert "regressed 6" in shown[0].text and "SquareBeforeSumAdagrad" in shown[0].text and "duplicates-summed-before-squaring" in shown[0].text
