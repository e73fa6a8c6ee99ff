"""The HTML report's front page leads with each benchmark's result in words: score in a unit that fits, validity
and why, the RCP check (not at tiny scale), every run's verdict and why, and what made the runs; valid
reStructuredText, as Snakemake renders the workflow's description."""

from __future__ import annotations

import json
from types import SimpleNamespace

from docutils.core import publish_parts

from mlperf_wf.results import front_page
from tests.results.test_overview import tiny_scored


def rendered(text: str) -> str:
    """The HTML Snakemake makes of it; a docutils warning (a broken reference, bad markup) fails."""
    return publish_parts(text, writer="html", settings_overrides={"halt_level": 2, "report_level": 2})["html_body"]


def test_the_front_page_leads_with_each_benchmark_s_result(tmp_path):
    report = tiny_scored(0.0207)
    report["runs"][0]["compliance_problems"] = ["opt_base_learning_rate: not the reference's *value*"]
    (tmp_path / "results/tiny/dlrmv4").mkdir(parents=True)
    (tmp_path / "results/tiny/dlrmv4/report.json").write_text(json.dumps(report))
    text = front_page.rst(tmp_path, ["results/tiny/dlrmv4/report.json", "results/tiny/rgat/report.json"])
    html = rendered(text)
    assert "<strong>dlrmv4</strong>: tiny scale, ruleset 6.0.0, closed division" in html
    assert "Score: <strong>1.24 seconds</strong> (olympic mean of runs 0, 1 and 2, scaling factor 1)" in html
    assert "Valid submission: <strong>no</strong>: scale is 'tiny'" in html.replace("&#x27;", "'")
    assert "RCP check: does not apply at tiny scale" in html and "Fail" not in html
    assert "Runs: 4 made, 10 required" in html
    assert "run 0 (seed 1234): <strong>passed</strong>, 30 seconds: reached the target at 64 samples; opt_base_learning_rate: not the reference's *value*" in (
        html.replace("&#x27;", "'")
    )
    assert "run 3 (seed 1237): <strong>non_converged</strong>, 3.5 minutes: did not reach the target (last eval 0.91); not scored: did not converge" in html
    assert "Provenance (3 runs' provenance.json): launcher local; host vm; GPUs none; image none; workflow commit 91702b50b0f4;" in html
    assert "mlperf-logging 4.1.68, torch 2.13.0+cpu" in html and "; run 3 has no provenance.json" in html
    assert "<strong>rgat</strong>: no report yet (results/tiny/rgat/report.json)" in html
    assert text.index("dlrmv4") < text.index("rgat"), "by name"


def test_the_report_s_description_opens_on_the_results(tmp_path):
    """workflow/report/workflow.rst as Snakemake renders it (Jinja, then docutils): the results come first."""
    from jinja2 import Environment

    from tests.workflow.test_readme import ROOT

    (tmp_path / "results/tiny/dlrmv4").mkdir(parents=True)
    (tmp_path / "results/tiny/dlrmv4/report.json").write_text(json.dumps(tiny_scored(0.0207)))

    config = {
        "results_in_words": front_page.rst(tmp_path, ["results/tiny/dlrmv4/report.json"]),
        "scale": "tiny",
        "rounds_checked": "dlrmv4: ruleset 6.0.0, closed division",
    }
    template = Environment().from_string((ROOT / "workflow/report/workflow.rst").read_text())
    html = rendered(template.render(snakemake=SimpleNamespace(config=config)))
    assert html.index("Score: <strong>1.24 seconds</strong>") < html.index("How they were made") < html.index("dlrmv4: ruleset 6.0.0, closed division")


def test_a_report_that_is_not_whole_is_one_line_on_the_front_page_never_a_crash(tmp_path):
    """The front page is written while the Snakefile is read: a report of another version (no score) must not stop
    every invocation."""
    from mlperf_wf.results import front_page

    made = tmp_path / "results/tiny/rgat/report.json"
    made.parent.mkdir(parents=True)
    made.write_text('{"benchmark": "rgat", "ruleset": "5.1.0", "division": "closed", "scale": "tiny", "runs": []}')
    text = front_page.rst(tmp_path, ["results/tiny/rgat/report.json"])
    assert "**rgat**: results/tiny/rgat/report.json is not a whole report (no 'score'): make it again" in text
