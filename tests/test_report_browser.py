"""The report in a real headless Chromium (Debian's chromium + chromium-driver, driven by selenium):
the matrix is there, a click on a cell shows its details, the diff and the filter work.

Skips only when Chromium or its driver is not installed (``apt-get install chromium chromium-driver``);
selenium itself is a test dependency (``pip install selenium``).
"""

from __future__ import annotations

import json
import shutil

import pytest

from conformance.results.report import build_report
from conformance_runs import builtin_run, load
from test_report import second_torch_version

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,1000"]

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="Chromium or chromedriver is not installed (Debian: apt-get install -y chromium chromium-driver)")


@pytest.fixture
def browser(tmp_path):
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
    matrix = wait.until(EC.visibility_of_element_located((By.ID, "matrix-table")))
    chips = matrix.find_elements(By.CSS_SELECTOR, "button.chip")
    assert len(chips) == 2 * len(load(real)["records"])
    headers = [th.text for th in matrix.find_elements(By.CSS_SELECTOR, "thead th.run")]
    assert any("2.9.0 (test fixture)" in h for h in headers), headers
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
