"""stable_diffusion through Snakemake at tiny scale: generated mirrors, download and md5 verification,
preparation, runs that reach both stand-in targets, the 5.0.0 checker (open division) and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.workflow.test_workflow import new_workdir, output_cache, snakemake

__all__ = ["output_cache"]

RUNS = 1
CONFIG = ("--config", "benchmarks=[stable_diffusion]", f"runs={RUNS}")


@pytest.fixture(scope="module")
def project(tmp_path_factory, output_cache) -> Path:
    workdir = new_workdir(tmp_path_factory.mktemp("stable_diffusion"))
    snakemake(workdir, "--cores", "2", "--cache", *CONFIG, cache=output_cache)
    return workdir


@pytest.mark.slow
def test_tiny_runs_reach_both_stand_in_targets_and_pass_the_5_0_0_checker(project):
    report = json.loads((project / "results/tiny/stable_diffusion/report.json").read_text())
    assert report["ruleset"] == "5.0.0" and report["division"] == "open" and report["required_runs"] == 10
    targets = {t["metric"]: (t["comparison"], t["value"]) for t in report["quality_target"]["all"]}
    assert targets == {"FID": ("<=", 225.0), "CLIP": (">=", 0.65)}
    assert {r["compliance"] for r in report["runs"]} == {"passed"}
    for i in range(RUNS):
        lines = [
            json.loads(line.split(":::MLLOG ", 1)[1]) for line in (project / f"results/tiny/stable_diffusion/runs/{i}/result.txt").read_text().splitlines()
        ]
        evals = [e for e in lines if e["key"] == "eval_accuracy"]
        last = {e["metadata"]["metric"]: e["value"] for e in evals[-2:]}
        assert evals[-1]["metadata"]["samples_count"] == evals[-2]["metadata"]["samples_count"]
        assert last["FID"] <= 225.0 and last["CLIP"] >= 0.65
        run_stop = next(e for e in lines if e["key"] == "run_stop")
        assert run_stop["metadata"]["status"] == "success"
        assert next(e for e in lines if e["key"] == "submission_division")["value"] == "open"
