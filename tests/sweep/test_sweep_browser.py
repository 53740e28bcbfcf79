"""The HTML leaderboard in a real headless browser (Debian's chromium + chromium-driver, driven by selenium).

Skipped in one line when selenium, chromium or chromedriver is not installed; a browser that is installed
but does not start is a failure. Install on Debian:
``apt-get install -y chromium chromium-driver`` and ``pip install selenium``.
"""

from __future__ import annotations

import shutil

import pytest

webdriver = pytest.importorskip("selenium.webdriver")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="chromium / chromedriver not installed")


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,2000",
                "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        drv = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    except Exception as exc:  # installed but not starting (version skew, no /dev/shm...) is a failure
        pytest.fail(f"headless chromium ({CHROMIUM}, {CHROMEDRIVER}) is installed but did not start: "
                    + " ".join(str(exc).split()), pytrace=False)
    yield drv
    drv.quit()


def test_html_loads_without_console_errors_and_shows_tables_and_plots(browser, report):
    from selenium.webdriver.common.by import By

    browser.get(report.html_path.resolve().as_uri())
    assert browser.title == "quantgym test leaderboard"
    errors = [e for e in browser.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
    assert errors == []
    tables = browser.find_elements(By.CSS_SELECTOR, "table.lb")
    assert [t.get_attribute("id") for t in tables] == [
        "inputs", "pb-conservative", "pb-aggressive", "pb-uncertainty", "all-rows"]
    cons = browser.find_element(By.ID, "pb-conservative")
    assert cons.is_displayed()
    headers = [th.text for th in cons.find_elements(By.TAG_NAME, "th")]
    assert headers[:3] == ["#", "agent", "Sharpe covid_2020"]
    agents = {tr.find_elements(By.TAG_NAME, "td")[1].text for tr in cons.find_elements(By.CSS_SELECTOR, "tbody tr")}
    assert {"Equal-Weight", "Risk Parity", "trend-x5", "trend-x20"} <= agents
    # every inline PNG decoded and laid out with a real size
    sizes = browser.execute_script(
        "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.getBoundingClientRect().width]);")
    assert len(sizes) == 4 and all(ok and nw > 100 and w > 100 for ok, nw, w in sizes)
    # the collapsed "all rows" table opens
    browser.find_element(By.CSS_SELECTOR, "details summary").click()
    assert browser.find_element(By.ID, "all-rows").is_displayed()


def test_the_console_check_sees_errors(browser, tmp_path):
    """Guard against a vacuous check: a page that logs an error and loads a missing image is caught."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><head><title>bad</title></head><body><img src="missing.png">'
                    '<script>console.error("boom")</script></body></html>')
    browser.get_log("browser")  # drain
    browser.get(page.as_uri())
    msgs = " ".join(e["message"] for e in browser.get_log("browser") if e.get("level") == "SEVERE")
    assert "boom" in msgs and "missing.png" in msgs
