"""retinanet through Snakemake: two tiny runs (the demo makes the required five) reach mAP >= 0.340 and pass the 5.1.0 checker (slow), and the
full-scale plan lists the fiftyone receive, the shards and the five reference runs without network."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlperf_wf.benchmarks.retinanet import prepare as prep
from tests.benchmarks.demo_seeds import check_the_slowest_demo_seed
from tests.benchmarks.scaffold import run_events, tiny_campaign, tiny_report
from tests.workflow.test_workflow import job_counts, new_workdir, output_cache, planned_train_lines, snakemake

__all__ = ["output_cache"]

RUNS = 2


@pytest.fixture(scope="module")
def retinanet_project(tmp_path_factory, output_cache) -> Path:
    return tiny_campaign(tmp_path_factory.mktemp("retinanet"), "retinanet", RUNS, output_cache)


@pytest.mark.slow
def test_tiny_retinanet_runs_reach_the_target_and_pass_the_5_1_0_checker(retinanet_project):
    report = tiny_report(retinanet_project, "retinanet")
    assert report["ruleset"] == "5.1.0" and report["required_runs"] == 5
    assert report["quality_target"] == {"comparison": ">=", "value": 0.34}
    assert len({r["seed"] for r in report["runs"]}) == RUNS
    assert {r["compliance"] for r in report["runs"]} == {"passed"}
    for i in range(RUNS):
        events = run_events(retinanet_project, "retinanet", i)
        accuracies = [e for e in events if e["key"] == "eval_accuracy"]
        assert all("epoch_num" in e["metadata"] for e in accuracies) and accuracies[-1]["value"] >= 0.34
        assert all(e["value"] < 0.34 for e in accuracies[:-1])  # the run stops at its first evaluation past the target
        stop = next(e for e in events if e["key"] == "run_stop")
        assert stop["metadata"]["status"] == "success"


@pytest.mark.slow
def test_the_slowest_demo_seed_reaches_the_target_within_its_recorded_evaluations_under_other_rounding(retinanet_project):
    check_the_slowest_demo_seed(retinanet_project, "retinanet")


def test_full_scale_retinanet_dry_run_lists_the_fetch_receive_shards_and_five_reference_runs(tmp_path):
    workdir = new_workdir(tmp_path / "full")
    proc = snakemake(workdir, "-n", "-p", "results/retinanet/report.json", "--config", "scale=full")
    counts = job_counts(proc.stdout)
    assert counts == {
        "download": 2,
        "verify": 2,
        "preprocess_shard": len(prep.shards("full")),
        "assemble_prepared": 1,
        "train": 5,
        "check_compliance": 5,
        "campaign_identity": 1,
        "report": 1,
    }
    out = proc.stdout
    assert "--source file:resources/full/fetched/openimages_mlperf --expect catalog" in out
    train_lines = planned_train_lines(out, "retinanet")
    assert len(train_lines) == 5
    for line in train_lines:
        assert f"{workdir}/resources/full/prepared/retinanet:/datasets/open-images-v6-mlperf:ro" in line
        assert f"{workdir}/resources/full/datasets/resnext50_32x4d_backbone:/torch-model-cache/hub/checkpoints:ro" in line
        assert "torchrun --nproc_per_node=8 train.py --batch-size 32 --eval-batch-size 32 --epochs 8" in line
        assert "--data-path /datasets/open-images-v6-mlperf/dataset --lr 0.0001 --output-dir=/results" in line
        assert "-e MLPERF_SUBMISSION_BENCHMARK=retinanet" in line and "-e TORCH_HOME=/torch-model-cache" in line
    assert "mlperf-wf compliance results/retinanet/runs/0/result.txt --ruleset 5.1.0" in out
    assert not (workdir / "resources").exists() and not (workdir / "results").exists()
