"""report.html in a real headless browser (Debian's chromium through playwright's Python
package, never `playwright install`, as tests/integration/serve/test_serve_page.py): for each of
the four kinds of run the page loads from disk with no console error and no request leaving the
file, every section is there with content, the tables sort and the confusion matrix switches
between shares and counts. REPORT_SCREENSHOT=docs/img/report.png keeps the single-label page."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tfm_cls.report.page import SECTIONS, _front_svg

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="no chromium (apt-get install -y chromium) for the browser test")


def test_every_report_renders_with_all_sections_and_no_errors(report_runs, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, timeout=30_000)
        try:
            for kind, run in report_runs.items():
                page = browser.new_page(viewport={"width": 1100, "height": 900})
                problems, requests = [], []
                page.on("console", lambda m, problems=problems: problems.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e, problems=problems: problems.append(str(e)))
                page.on("request", lambda r, requests=requests: requests.append(r.url))
                url = (run / "report.html").resolve().as_uri()
                page.goto(url, timeout=20_000)
                assert problems == [], (kind, problems)
                assert requests == [url], (kind, requests)  # self-contained: nothing else is fetched
                for section in SECTIONS:
                    assert page.locator(f"section#{section} h2").count() == 1, (kind, section)
                    assert len(page.text_content(f"section#{section}").strip()) > 30, (kind, section)
                # the per-class (per-label, metrics) table sorts on a click
                if kind != "regression":
                    first = page.locator("section#per-class tbody tr td:first-child")
                    names = first.all_text_contents()
                    page.click("section#per-class th:nth-child(1)")
                    ascending = first.all_text_contents()
                    page.click("section#per-class th:nth-child(1)")
                    assert ascending == sorted(names) and first.all_text_contents() == sorted(names, reverse=True)
                if kind in ("single", "pair"):
                    cell = page.locator("section#outputs td[data-count]").first
                    share = cell.text_content()
                    page.click("button[data-cm=counts]")
                    assert cell.text_content() == cell.get_attribute("data-count") != share
                    assert page.locator("section#calibration svg").count() == 2  # before and after
                    assert "from sampling alone" in page.text_content("section#calibration #calibration-noise")
                if kind == "regression":
                    assert page.locator("section#outputs svg circle").count() > 10
                if kind == "wide":  # the front: one dot a candidate, the shipped one named
                    assert page.locator("section#candidates svg circle").count() == 2
                    assert "(shipped)" in page.text_content("section#candidates svg")
                    page.locator("section#candidates").screenshot(path=str(tmp_path / "candidates.png"))
                    # every name within the figure, in the page's own style: the fastest dot's sits right of
                    # the axis (a front of three, the longest name the fastest and shipped)
                    three = [{"name": name, "validation": {"accuracy": score}, "texts_per_second": speed,
                              "chosen": name == "bag_of_terms_3"} for name, score, speed in
                             (("wide_and_deep", 0.56, 150.0), ("bag_of_terms", 0.561, 50_000.0),
                              ("bag_of_terms_3", 0.563, 60_000.0))]
                    page.evaluate("svg => { document.querySelector('section#candidates svg').outerHTML = svg }",
                                  _front_svg(three, "accuracy"))
                    right = sum(page.locator("section#candidates svg").bounding_box()[k] for k in ("x", "width"))
                    for label in page.locator("section#candidates svg text").all():
                        box = label.bounding_box()
                        assert box["x"] + box["width"] <= right + 0.5, label.text_content()
                # attributions are highlighted tokens
                assert page.locator("section#errors span.tok").count() > 0, kind
                if kind == "single":
                    page.click("button[data-cm=norm]")
                    shot = Path(os.environ.get("REPORT_SCREENSHOT") or tmp_path / "report.png")
                    shot.parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(shot), full_page=True)
                    assert shot.stat().st_size > 20_000
                page.close()
        finally:
            browser.close()
