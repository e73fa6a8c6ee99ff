"""A benchmark's page of the HTML report says what report.json says: score or why none, the ruleset and division
used, validity and why not, the RCP check or why it was not made, every run by its folder with its verdict and the
checker's reasons, and the figures inline."""

from __future__ import annotations

import json

from mlperf_wf.results import overview

SVG = '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "x">\n<svg xmlns="http://www.w3.org/2000/svg"><text>bars</text></svg>\n'


def run(index: int, compliance: str, problems: list[str], dropped: str | None = None) -> dict:
    return {
        "index": index, "seed": 1234 + index, "minutes": 0.5 + index, "samples_to_converge": 64, "status": "success",
        "compliance": compliance, "compliance_problems": problems, "final_eval_accuracy": 0.91,
        "result_file": f"results/tiny/dlrmv4/runs/{index}/result.txt", "in_scored_window": True, "dropped": dropped,
    }  # fmt: skip


REPORT = {
    "benchmark": "dlrmv4", "ruleset": "6.0.0", "division": "open", "scale": "tiny", "required_runs": 10,
    "quality_target": {"comparison": ">=", "value": 0.8},
    "runs": [run(0, "passed_except_declared", ["opt_base_learning_rate: not the reference's"]), run(1, "failed", ["no run_stop"], "failed compliance")],
    "score": {"time_to_train_minutes": None, "olympic_minutes": None, "scaling_factor": 1.0, "scaling_source": "none", "counted_runs": []},
    "valid_submission": False, "valid_submission_reasons": ["scale is 'tiny'"],
    "rcp": None, "rcp_not_checked": "the open division has no RCP check (mlperf-logging checks closed results only)",
    "convergence_unit": "samples_count",
}  # fmt: skip


def test_the_page_says_what_the_report_says(tmp_path):
    report = tmp_path / "report.json"
    report.write_text(json.dumps(REPORT))
    figure = tmp_path / "time_to_train.svg"
    figure.write_text(SVG)
    text = overview.write(report, [figure], tmp_path / "overview.html").read_text()
    assert "ruleset <b>6.0.0</b>, <b>open division</b>" in text and "ruleset latest" not in text
    assert "<b>No score.</b>" in text and "Valid submission: <b>no</b>" in text and "scale is &#x27;tiny&#x27;" in text
    assert "RCP check: not made: the open division has no RCP check" in text
    assert "run 0 (results/tiny/dlrmv4/runs/0)" in text and "run 1 (results/tiny/dlrmv4/runs/1)" in text
    assert '<td class="passed_except_declared">passed_except_declared</td>' in text and "opt_base_learning_rate: not the reference&#x27;s" in text
    assert '<td class="failed">failed</td><td>no run_stop</td>' in text and "no: failed compliance" in text
    assert "<h2>time to train</h2>" in text and '<div class="figure"><svg xmlns' in text and "<?xml" not in text


def test_a_scored_closed_set_shows_its_score_and_rcp_result(tmp_path):
    scored = {
        **REPORT,
        "division": "closed",
        "scale": "full",
        "runs": [run(i, "passed", []) for i in range(3)],
        "score": {"time_to_train_minutes": 1.5, "olympic_minutes": 1.5, "scaling_factor": 1.0, "scaling_source": "none", "counted_runs": [1]},
        "rcp": {"verdict": "Fail", "message": "RCP found", "samples_to_converge": 64, "reference_mean": 3.0e6, "min_allowed_mean": 2.8e6},
        "rcp_not_checked": None,
    }
    text = overview.page(scored, {})
    assert "<b>Score: 1.5 minutes</b>" in text and "RCP check: <b>Fail</b> (RCP found)" in text and "reference mean 3e+06" in text
    assert text.count('<td class="passed">passed</td><td>reached the target at 64 samples</td>') == 3


MADE_WITH = {
    "scale": "tiny", "launcher": "local", "image": None, "command": "mlperf-wf train --benchmark dlrmv4 --run-index 0",
    "host": "vm", "gpus": [], "python": "3.11.7", "workflow_git": {"commit": "91702b50b0f49112b2e91e35eab9ca140c753a27", "dirty": False, "local_changes": None},
    "packages": {"mlperf-logging": "4.1.68", "torch": "2.13.0+cpu"},
}  # fmt: skip


def tiny_scored(minutes: float) -> dict:
    """A tiny closed set of three runs that passed (one did not converge), scored, with the RCP checker's answer."""
    runs = [{**run(i, "passed", []), "verdict": "passed", "made_with": MADE_WITH} for i in range(3)]
    runs.append({**run(3, "non_converged", []), "status": "aborted", "samples_to_converge": None, "verdict": "non_converged", "dropped": "did not converge"})
    score = {"time_to_train_minutes": minutes, "olympic_minutes": minutes, "scaling_factor": 1.0, "scaling_source": "none", "counted_runs": [0, 1, 2]}
    rcp = {"verdict": "Fail", "message": "RCP found", "samples_to_converge": 64, "reference_mean": 3.0e6, "min_allowed_mean": 2.8e6}
    reasons = ["scale is 'tiny'", "3 runs, dlrmv4 requires 10", "RCP check: Fail (RCP found)"]  # the scorer's, as report.json has them
    return {**REPORT, "division": "closed", "runs": runs, "score": score, "rcp": rcp, "rcp_not_checked": None, "valid_submission_reasons": reasons}


def test_the_score_has_a_unit_that_fits_and_names_the_counted_runs_in_words():
    assert "<b>Score: 1.24 seconds</b>" in overview.page(tiny_scored(0.0207), {})
    assert "<b>Score: 12.5 minutes</b>" in overview.page(tiny_scored(12.5), {})
    assert "<b>Score: 2.5 hours</b>" in overview.page(tiny_scored(150.0), {})
    text = overview.page(tiny_scored(0.0207), {})
    assert "runs 0, 1 and 2 counted" in text and "[0, 1, 2]" not in text


def test_a_tiny_rcp_check_says_it_does_not_apply():
    text = overview.page(tiny_scored(0.0207), {})
    assert "RCP check: does not apply at tiny scale" in text and "Fail" not in text
    full = overview.page({**tiny_scored(30.0), "scale": "full"}, {})
    assert "RCP check: <b>Fail</b> (RCP found)" in full


def test_each_run_says_why_in_words_and_shows_what_made_it():
    text = overview.page(tiny_scored(0.0207), {})
    assert text.count("passed</td><td>reached the target at 64 samples</td>") == 3 and "</td><td>—</td><td>0.5" not in text
    assert "did not reach the target (last eval 0.91)" in text
    assert "<h2>Provenance</h2>" in text
    for shown in ("local", "vm", "91702b50b0f4", "mlperf-logging 4.1.68", "torch 2.13.0+cpu", "mlperf-wf train --benchmark dlrmv4 --run-index 0"):
        assert shown in text, shown


def test_the_metric_is_the_benchmark_s():
    from mlperf_wf.config import registry

    text = overview.page(tiny_scored(0.0207), {})
    metric = registry.load_benchmark("dlrmv4").quality_metric
    assert f"quality target: {metric} &gt;= 0.8" in text and f"<th>final {metric}</th>" in text


def test_a_run_s_gpus_are_counted_by_kind():
    gpus = ["NVIDIA H100 80GB HBM3, 550.54"] * 8
    assert overview.gpus_in_words(gpus) == "8 × NVIDIA H100 80GB HBM3, 550.54" and overview.gpus_in_words([]) == "none"
