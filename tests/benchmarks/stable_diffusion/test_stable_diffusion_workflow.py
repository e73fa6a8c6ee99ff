"""stable_diffusion through Snakemake at tiny scale: generated mirrors, download and md5 verification,
preparation, runs that reach both stand-in targets, the 5.0.0 checker (open division) and the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks.demo_seeds import check_the_slowest_demo_seed
from tests.benchmarks.scaffold import run_events, tiny_campaign, tiny_report
from tests.workflow.test_workflow import output_cache

__all__ = ["output_cache"]

RUNS = 1


@pytest.fixture(scope="module")
def project(tmp_path_factory, output_cache) -> Path:
    return tiny_campaign(tmp_path_factory.mktemp("stable_diffusion"), "stable_diffusion", RUNS, output_cache)


@pytest.mark.slow
def test_tiny_runs_reach_both_stand_in_targets_and_pass_the_5_0_0_checker(project):
    report = tiny_report(project, "stable_diffusion")
    assert report["ruleset"] == "5.0.0" and report["division"] == "open" and report["required_runs"] == 10
    targets = {t["metric"]: (t["comparison"], t["value"]) for t in report["quality_target"]["all"]}
    assert targets == {"FID": ("<=", 225.0), "CLIP": (">=", 0.65)}
    assert {r["compliance"] for r in report["runs"]} == {"passed"}
    for i in range(RUNS):
        lines = run_events(project, "stable_diffusion", i)
        evals = [e for e in lines if e["key"] == "eval_accuracy"]
        last = {e["metadata"]["metric"]: e["value"] for e in evals[-2:]}
        assert evals[-1]["metadata"]["samples_count"] == evals[-2]["metadata"]["samples_count"]
        assert last["FID"] <= 225.0 and last["CLIP"] >= 0.65
        run_stop = next(e for e in lines if e["key"] == "run_stop")
        assert run_stop["metadata"]["status"] == "success"
        assert next(e for e in lines if e["key"] == "submission_division")["value"] == "open"


@pytest.mark.slow
def test_the_slowest_demo_seed_reaches_the_target_within_its_recorded_evaluations_under_other_rounding(project):
    check_the_slowest_demo_seed(project, "stable_diffusion")
