"""llama2_70b_lora's own checks: the hyperparameters its tiny runs log, why its tiny target needs the pretrained base,
and its full-scale DAG and command. Its tiny campaign is ``tiny_project`` (tests/conftest.py), which the workflow's
own tests (tests/workflow/test_workflow.py) share."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from mlperf_wf.results.compliance import check
from tests.benchmarks.demo_seeds import check_the_slowest_demo_seed
from tests.workflow.test_workflow import job_counts, snakemake

NAME = "llama2_70b_lora"


@pytest.mark.slow
def test_logged_hyperparameters_are_the_trainers(tiny_project):
    logged = {}
    for line in (tiny_project / "results/tiny/llama2_70b_lora/runs/0/result.txt").read_text().splitlines():
        record = json.loads(line.removeprefix(":::MLLOG "))
        logged.setdefault(record["key"], record["value"])
    assert logged["lora_rank"] == 16 and logged["lora_alpha"] == 32
    assert logged["opt_base_learning_rate"] == 4e-4 and logged["opt_gradient_clip_norm"] == 0.3
    assert logged["global_batch_size"] == 8 and logged["seed"] == 1234
    assert logged["train_samples"] == 4096 and logged["eval_samples"] == 256
    assert logged["config_filename"] == "mlperf_wf/benchmarks/llama2_70b_lora/hyperparameters.py"


@pytest.mark.slow
def test_lora_on_an_untrained_base_cannot_reach_the_target(tiny_project, tmp_path):
    """The tiny target needs the pretrained checkpoint's capability: LoRA on a random base stalls."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from mlperf_wf.benchmarks.llama2_70b_lora.hyperparameters import Hyperparameters
    from mlperf_wf.benchmarks.llama2_70b_lora.trainer import train
    from mlperf_wf.run.harness import TinyRun
    from tests.mllogs import tiny_run_spec

    checkpoint = tiny_project / "resources/tiny/datasets/llama2_70b_fused_qkv"
    random_base = tmp_path / "random_base"
    shutil.copytree(checkpoint, random_base)
    LlamaForCausalLM(LlamaConfig.from_pretrained(checkpoint)).save_pretrained(random_base)
    spec = tiny_run_spec(
        "llama2_70b_lora",
        "6.1.0",
        tmp_path / "result.txt",
        tiny_project / "resources/tiny/prepared/llama2_70b_lora/dataset",
        0.925,
        {"checkpoint": random_base},
    )
    budget = 80  # about 3x the steps the pretrained base needs
    hp = Hyperparameters(max_steps=budget)
    with TinyRun(spec, hp) as run:
        summary = train(run, hp)
    assert summary["status"] == "aborted"
    assert summary["eval_loss"] > 0.925
    assert check(spec.result_file, "6.1.0").verdict == "non_converged"


def test_full_scale_dry_run_lists_the_real_plan(full_dry_runs):
    """Beside every benchmark's checks (tests/benchmarks/test_every_benchmark.py): this one's DAG and command. How
    quickly: bench/dry_run.py (a timed assertion here would fail on a busy CI machine, not on a slow DAG)."""
    ran = full_dry_runs(NAME)
    workdir = ran.folder
    assert ran.counts == {
        "download": 2,
        "verify": 2,
        "preprocess_shard": 1,
        "assemble_prepared": 1,
        "train": 10,
        "check_compliance": 10,
        "campaign_identity": 1,
        "report": 1,
    }
    # the default target adds the figures and the summary
    assert job_counts(snakemake(workdir, "-n", "--config", "scale=full").stdout)["summarize"] == 1
    out = ran.output
    for line in ran.train_lines:
        # the job's own preflight, the emptied run folder, the node check, then the page cache
        assert "|| exit 2; node_check_attempt=" in line and "--excluded results/excluded-nodes.txt || exit 1; run_status=0; (if { sync && " in line
        assert "; fi; docker run --rm --gpus all --network=host --ipc=host" in line
        assert "accelerate launch --num_processes 8 --config_file configs/default_config.yaml scripts/train.py" in line
    for seed in range(1234, 1244):
        assert f"--seed {seed} " in out
    assert not (workdir / "resources").exists() and not (workdir / "results").exists()


@pytest.mark.slow
def test_the_slowest_demo_seed_reaches_the_target_within_its_recorded_evaluations_under_other_rounding(tiny_project):
    check_the_slowest_demo_seed(tiny_project, "llama2_70b_lora")


def test_the_target_eval_loss_flag_is_mlperf_logging_s_target_for_the_round(tmp_path, monkeypatch):
    """The reference stops at ``--target_eval_loss``; the number the plan writes there is the one in mlperf-logging's
    closed rules for the configured round (read here from the rules file itself, not through the plan's reader)."""
    from importlib import resources
    from pathlib import Path

    import yaml

    from mlperf_wf.config.workflow_config import WorkflowConfig
    from mlperf_wf.plan import plan as planning

    root = Path(__file__).resolve().parents[3]
    (tmp_path / "config").symlink_to(root / "config")
    monkeypatch.chdir(tmp_path)
    config = {**yaml.safe_load((root / "config" / "config.yaml").read_text()), "scale": "full"}
    plan = planning.Plan(WorkflowConfig.parse(config), project_root=Path("/project"), workdir=tmp_path)
    rules = resources.files("mlperf_logging.compliance_checker") / f"training_{plan.of(NAME).ruleset()}" / f"closed_{NAME}.yaml"
    checks = [record["KEY"]["ATLEAST_ONE_CHECK"] for record in yaml.safe_load(rules.read_text()) if "ATLEAST_ONE_CHECK" in record.get("KEY", {})]
    (target,) = {float(number) for check in checks for number in re.findall(r"v\['value'\] <= ([0-9.]+)", check)}
    rendered = re.findall(r"--target_eval_loss (\S+)", plan.of(NAME).train_job(0).command)
    assert rendered and {float(value.strip("'\"")) for value in rendered} == {target}
