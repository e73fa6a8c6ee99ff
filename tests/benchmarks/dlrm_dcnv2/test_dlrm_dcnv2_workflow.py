"""dlrm_dcnv2 through Snakemake: the preparation from the raw click logs (124 shards) killed halfway resumes shard
by shard, the tiny runs on its output reach the real AUROC target and pass the 6.0.0 checker, switching back to the
default (published) preparation keeps every shard made (slow); the full-scale plans list the published files or
the raw logs, every shard and the 10 reference runs without network."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mlperf_wf.benchmarks.dlrm_dcnv2 import prepare as prep
from mlperf_wf.benchmarks.dlrm_dcnv2 import prepare_from_raw
from tests.benchmarks.scaffold import kill_preparation_halfway_and_rerun, shards_run, tiny_campaign
from tests.workflow.test_workflow import job_counts, new_workdir, output_cache, planned_train_lines, snakemake

__all__ = ["output_cache"]  # the shared-cache fixture, used here too

RUNS = 1
CONFIG = ("--config", "benchmarks=[dlrm_dcnv2]", f"runs={RUNS}")
FROM_RAW = (*CONFIG, "preparation={dlrm_dcnv2: from_raw}")
DATASET = "resources/tiny/prepared/dlrm_dcnv2/dataset"


@pytest.fixture(scope="module")
def killed_preparation(tmp_path_factory, output_cache) -> dict:
    """Prepare the tiny days from the raw logs one job at a time, SIGKILL the whole Snakemake process group halfway,
    rerun."""
    workdir = new_workdir(tmp_path_factory.mktemp("dlrm_dcnv2"))
    return kill_preparation_halfway_and_rerun(workdir, "dlrm_dcnv2", FROM_RAW, len(prepare_from_raw.shards("tiny")), output_cache, timeout=600)


@pytest.fixture(scope="module")
def dlrm_project(killed_preparation, output_cache) -> Path:
    return tiny_campaign(killed_preparation["workdir"], "dlrm_dcnv2", RUNS, output_cache, FROM_RAW[-1])


@pytest.mark.slow
def test_killed_preparation_from_the_raw_logs_reruns_only_the_unfinished_shards(killed_preparation):
    done, rerun = killed_preparation["done_at_kill"], set(killed_preparation["rerun"])
    assert rerun | done == set(prepare_from_raw.shards("tiny")), "every shard is finished after the rerun"
    assert len(rerun & done) <= 1, f"finished shards ran again: {rerun & done}"
    assert len(rerun) < killed_preparation["total"]
    summary = json.loads((killed_preparation["workdir"] / "resources/tiny/prepared/dlrm_dcnv2/shards/raw_day_7/shard.json").read_text())
    assert summary["cut_stream_dropped_bytes"] > 0 and summary["rows"] == 48_000, "the day cut before its gzip trailer lost only its last line"


@pytest.mark.slow
def test_tiny_runs_reach_the_real_auroc_target_and_pass_the_6_0_0_checker(dlrm_project):
    from mlperf_wf.benchmarks.dlrm_dcnv2.hyperparameters import Hyperparameters

    report = json.loads((dlrm_project / "results/tiny/dlrm_dcnv2/report.json").read_text())
    assert report["ruleset"] == "6.0.0" and report["required_runs"] == 10
    assert [r["seed"] for r in report["runs"]] == [1234 + i for i in range(RUNS)]
    assert {r["compliance"] for r in report["runs"]} == {"passed"}
    # the forecast from the runs made (open division: validity only, no RCP test)
    assert report["forecast"] == {**report["forecast"], "finished": RUNS, "required": 10, "rcp_pass": None}
    assert 0 < report["forecast"]["valid"] < 1 and f"{RUNS} of 10 runs finished" in report["forecast"]["basis"]
    tiny = Hyperparameters()
    for i in range(RUNS):
        lines = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in (dlrm_project / f"results/tiny/dlrm_dcnv2/runs/{i}/result.txt").read_text().splitlines()]
        events = {e["key"]: e for e in lines}
        assert events["opt_name"]["value"] == "adagrad" and events["opt_adagrad_epsilon"]["value"] == 1e-8
        assert events["opt_base_learning_rate"]["value"] == tiny.learning_rate
        assert events["mlperf_wf_dense_learning_rate"]["value"] == tiny.dense_learning_rate
        assert events["global_batch_size"]["value"] == tiny.global_batch_size and events["eval_samples"]["value"] == 60_000
        assert events["submission_division"]["value"] == "open"
        accuracies = [e["value"] for e in lines if e["key"] == "eval_accuracy"]
        assert accuracies[-1] >= 0.80275 > max(accuracies[:-1]), "the run stops at the first evaluation past the real target"
        assert events["run_stop"]["metadata"]["status"] == "success"
    tree = dlrm_project / DATASET
    assert Path(os.readlink(tree / "day_0_sparse_multi_hot.npz")).parent.name == "multihot_day_0", "the runs read the from-raw days"


@pytest.mark.slow
def test_switching_back_to_the_published_dataset_keeps_every_shard_made(dlrm_project, output_cache):
    made_from_raw = {p.name for p in (dlrm_project / "resources/tiny/prepared/dlrm_dcnv2/shards").iterdir()}
    snakemake(dlrm_project, "--cores", "2", DATASET, "--cache", *CONFIG, cache=output_cache)
    shards = {p.name for p in (dlrm_project / "resources/tiny/prepared/dlrm_dcnv2/shards").iterdir()}
    assert made_from_raw | set(prep.shards("tiny")) == shards, "both preparations' shards are kept"
    assert Path(os.readlink(dlrm_project / DATASET / "day_0_sparse_multi_hot.npz")).parent.name == "day_0"
    assert {p.name for p in (dlrm_project / DATASET).iterdir() if not p.name.startswith(".")} == set(prep.layout("tiny"))


def test_full_scale_dry_run_lists_the_reference_dataset_shards_and_runs(tmp_path):
    workdir = new_workdir(tmp_path / "full")
    proc = snakemake(workdir, "-n", "results/dlrm_dcnv2/report.json", "--config", "scale=full")
    counts = job_counts(proc.stdout)
    assert counts == {
        "download": 1,
        "verify": 1,
        "preprocess_shard": 25,
        "assemble_prepared": 1,
        "train": 10,
        "check_compliance": 10,
        "campaign_identity": 1,
        "report": 1,
    }
    out = proc.stdout
    assert "--uri https://training.mlcommons-storage.org/metadata/dlrmv2-preprocessed-criteo-click-logs-reference.uri" in out
    assert sorted(shards_run(out)) == sorted(prep.shards("full"))
    train_lines = planned_train_lines(out, "dlrm_dcnv2")
    assert len(train_lines) == 10
    for line in train_lines:
        assert f"{workdir}/resources/full/prepared/dlrm_dcnv2:/data/criteo_multihot:ro" in line
        assert "torchrun --nproc_per_node 8 dlrm_main.py" in line and "--synthetic_multi_hot_criteo_path /data/criteo_multihot/dataset" in line
        assert "--interaction_type=dcn --dcn_num_layers=3 --dcn_low_rank_dim=512 --adagrad --learning_rate 0.004 " in line
    for seed in range(1234, 1244):
        # the run, then its processes' MLLOG files merged into its result file
        assert f"--seed {seed}) || run_status=$?; mlperf-wf merge-mllog results/dlrm_dcnv2/runs/{seed - 1234}/result.txt" in out
    assert "mlperf-wf compliance results/dlrm_dcnv2/runs/0/result.txt --ruleset 6.0.0" in out
    assert not (workdir / "resources").exists() and not (workdir / "results").exists()


def test_full_scale_dry_run_from_the_raw_logs_lists_every_shard_with_the_shards_it_reads(tmp_path):
    workdir = new_workdir(tmp_path / "full")
    proc = snakemake(workdir, "-n", "-p", "results/dlrm_dcnv2/report.json", "--config", "scale=full", "preparation={dlrm_dcnv2: from_raw}")
    counts = job_counts(proc.stdout)
    assert counts == {
        "download": 1,
        "verify": 1,
        "preprocess_shard": 124,
        "assemble_prepared": 1,
        "train": 10,
        "check_compliance": 10,
        "campaign_identity": 1,
        "report": 1,
    }
    out = proc.stdout
    assert "--endpoint https://huggingface.co --revision a1a472783e135c6786617567f51bb64bfc4b031a" in out
    assert "dlrmv2-preprocessed-criteo-click-logs-reference" not in out, "nothing of the published dataset is fetched"
    assert sorted(shards_run(out)) == sorted(prepare_from_raw.shards("full"))
    shards = "resources/full/prepared/dlrm_dcnv2/shards"
    assert (
        "mlperf-wf preprocess --benchmark dlrm_dcnv2 --scale full --shard scatter_day_4"
        " --input click_logs=resources/full/datasets/criteo_1tb_click_logs"
        " --verified click_logs=resources/full/verified/criteo_1tb_click_logs.stamps.json"
        f" --input shards={shards} --preparation from_raw"
    ) in out
    assert f"--shards {shards} --preparation from_raw --out resources/full/prepared/dlrm_dcnv2/dataset" in out
    assert "--synthetic_multi_hot_criteo_path /data/criteo_multihot/dataset" in out, "the runs read the same tree"
