"""Every key of the workflow config means the same from ``--config KEY=VALUE`` as from a ``--configfile``: Snakemake
reads a ``--config`` value as a number or boolean where the whole value is one, else with YAML's BaseLoader, which
leaves every nested value as text (``'full_hyperparameters={llama31_8b: {global_batch_size: 64}}'`` arrives with
``"64"``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mlperf_wf.config.workflow_config import WorkflowConfig, command_line_value
from mlperf_wf.plan import plan as planning
from mlperf_wf.results import status

ROOT = Path(__file__).resolve().parents[2]

ENTRIES = [
    "full_hyperparameters={llama31_8b: {global_batch_size: 64}}",
    "full_hyperparameters={llama31_8b: {opt_base_learning_rate: 0.0001, opt_learning_rate_warmup_samples: 4096}}",
    "full_hyperparameters={flux1: {opt_base_learning_rate: 1.0e-4}}",
    "full_geometry={gpt3: {nodes: 16, walltime_minutes: 720}}",
    "full_scratch={llama31_8b: {npy_index: 50}}",
    "node_check={enabled: false, matrix_size: 4096, allreduce_gbps: 12.5}",
    "power={enabled: true}",
    "runs=3",
    "benchmarks=[llama31_8b, flux1]",
    "ruleset=6.1.0",
]


def from_configfile(entry: str) -> dict:
    key, _, value = entry.partition("=")
    return {key: yaml.safe_load(value)}


def from_command_line(entry: str) -> dict:
    key, _, value = entry.partition("=")
    return {key: command_line_value(value)}


def test_the_command_line_reader_is_snakemake_s():
    from snakemake.cli import parse_config

    for entry in ENTRIES:
        assert from_command_line(entry) == parse_config([entry]), entry


@pytest.mark.parametrize("entry", ENTRIES)
def test_every_key_means_the_same_from_config_and_configfile(entry):
    assert WorkflowConfig.parse(from_command_line(entry)).filled() == WorkflowConfig.parse(from_configfile(entry)).filled()


def test_a_batch_size_from_the_command_line_plans_like_one_from_a_file():
    config = status.load_config(ROOT, ["scale=full", "benchmarks=[llama31_8b]", "full_hyperparameters={llama31_8b: {global_batch_size: 64}}"])
    assert config["full_hyperparameters"]["llama31_8b"]["global_batch_size"] == 64
    line = planning.load(config, project_root=ROOT).of("llama31_8b").train_job(0).command
    assert "--gbs 64 --mbs 2" in line


@pytest.mark.slow
def test_snakemake_s_own_config_option_takes_a_batch_size(tmp_path):
    workdir = tmp_path / "project"
    shutil.copytree(ROOT / "config", workdir / "config")
    argv = [sys.executable, "-m", "snakemake", "-n", "-s", str(ROOT / "workflow" / "Snakefile"), "-d", str(workdir), "results/llama31_8b/report.json"]
    argv += ["--config", "scale=full", "full_hyperparameters={llama31_8b: {global_batch_size: 64}}"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=workdir)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "llama31_8b (6.1.0): GBS 64 = 8 replicas x micro batch 2 x 4 accumulation; RCP: RCP found (llama31_8b_ref_64)" in output


def test_a_mapping_from_the_command_line_is_merged_into_the_files_as_snakemake_merges_it(tmp_path):
    """``status``/``preflight --config`` read a mapping as Snakemake does: key by key over config.yaml and site.yaml."""
    from snakemake.utils import update_config

    shutil.copytree(ROOT / "config", tmp_path / "config")
    site = {"full_container": {"rgat": {"squashfs": "/images/rgat.sqsh"}}}
    (tmp_path / "config" / "site.yaml").write_text(yaml.safe_dump(site))
    entry = "full_container={rgat: {digest: 'sha256:" + "ab" * 32 + "'}}"
    config = status.load_config(tmp_path, [entry])
    expected = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    update_config(expected, site)
    update_config(expected, from_command_line(entry))
    assert config["full_container"]["rgat"] == {**WorkflowConfig.parse(expected).filled()["full_container"]["rgat"]}
    assert config["full_container"]["rgat"]["squashfs"] == "/images/rgat.sqsh" and config["full_container"]["rgat"]["digest"].startswith("sha256:ab")
