"""A benchmark's page and the summary figure as a reader sees them, opened in headless Chromium: the page opens on the
result (score in a unit that fits, valid or not and why, the RCP check that does not apply at tiny scale), then every
run with its verdict and why, their provenance, and the figures, whose text is the benchmark's (its metric by name),
whose every run's crossing of the target is marked, and whose labels stay inside the figure. Built from logs and
reports written here (the whole workflow's report is opened by tests/workflow/test_readme.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlperf_wf.config import registry
from mlperf_wf.results import overview, plots
from tests.results.test_overview import MADE_WITH
from tests.results.test_plots import summary_of, ten_run_report

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield chromium
        chromium.close()


def tiny_report(tmp_path: Path) -> Path:
    report = ten_run_report(tmp_path)
    for run in report["runs"]:
        run["minutes"] /= 100
        run.update(status="success", compliance="passed", verdict="passed", compliance_problems=[], samples_to_converge=2304.0)
        run.update(final_eval_accuracy=0.92, made_with=MADE_WITH, dropped=None)
    report["runs"][0]["dropped"], report["runs"][9]["dropped"] = "fastest", "slowest"
    counted = list(range(1, 9))
    report.update(
        division="closed", required_runs=10, convergence_unit="samples_count", valid_submission=False,
        valid_submission_reasons=["scale is 'tiny': tiny-scale runs use generated data and a tiny model, not the benchmark's"],
        score={"time_to_train_minutes": 0.0207, "olympic_minutes": 0.0207, "scaling_factor": 1.0, "scaling_source": "none", "counted_runs": counted},
        rcp={"verdict": "Fail", "message": "RCP found", "samples_to_converge": 2304, "reference_mean": 3.0e6, "min_allowed_mean": 2.8e6},
        rcp_not_checked=None,
    )  # fmt: skip
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    return path


def test_the_benchmark_page_opens_on_the_result_and_its_figures_say_the_benchmark_s_words(tmp_path, browser):
    report_file = tiny_report(tmp_path)
    figures = [path for path in plots.benchmark_figures(report_file, tmp_path / "plots") if path.suffix == ".svg"]
    page_file = overview.write(report_file, figures, tmp_path / "overview.html")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(page_file.as_uri())
    shown = page.inner_text("body")
    page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)
    assert shown.index("Score: 1.24 seconds") < shown.index("Valid submission: no") < shown.index("Runs"), shown[:600]
    assert "runs 1, 2, 3, 4, 5, 6, 7 and 8 counted" in shown and "[1, 2" not in shown
    assert "RCP check: does not apply at tiny scale" in shown and "Fail" not in shown
    rows = page.locator("table").first.locator("tr")
    assert rows.count() == 11
    assert "run 0 (" in rows.nth(1).inner_text() and "reached the target at 2304 samples" in rows.nth(1).inner_text()
    assert "no: fastest" in rows.nth(1).inner_text() and "—" not in rows.nth(1).inner_text().split("\t")[4]
    provenance = page.locator("h2", has_text="Provenance")
    assert provenance.count() == 1 and "91702b50b0f4" in page.locator("table").nth(1).inner_text()
    metric = registry.load_benchmark("llama2_70b_lora").quality_metric
    assert page.locator("svg text", has_text=metric).count() == 1, "the convergence figure's axis names the metric"
    assert page.locator("svg text", has_text="eval_accuracy:").count() == 0
    assert page.locator('svg [id^="crossing-run-"]').count() == 10, "each run's crossing of the target is marked"


def test_the_summary_figure_keeps_its_text_inside_the_frame_on_a_log_axis(tmp_path, browser):
    reports = summary_of(tmp_path, {"llama2_70b_lora": 2.3, "retinanet": 85.0, "rgat": 0.0207, "bert": None})
    plots.summary(reports, tmp_path / "summary.csv", tmp_path / "summary")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto((tmp_path / "summary.svg").as_uri())
    texts = page.locator("svg text")
    said = [texts.nth(i).text_content() for i in range(texts.count())]
    assert {"0.1", "1", "10", "100"} <= set(said), "decades on a log axis"
    assert "1.24 seconds, tiny, not a valid submission" in said and "85 minutes, tiny, not a valid submission" in said
    frame = page.locator("svg").first.bounding_box()
    for i in range(texts.count()):
        box = texts.nth(i).bounding_box()
        assert box["x"] >= frame["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"] + 0.5, said[i]
        assert box["y"] >= frame["y"] and box["y"] + box["height"] <= frame["y"] + frame["height"] + 0.5, said[i]
