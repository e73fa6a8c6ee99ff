"""qwen35_397b_grpo's full-scale plan: the reference's 64 x 4 geometry for every launcher (golden), the dry run of
the full-scale DAG listing the three train jobs, and conformance with what our reference copy holds. One and two
nodes (geometry overrides) are in ``tests/benchmarks/qwen35_397b_grpo/golden/qwen35_397b_grpo.json`` through tests/plan/test_plan.py; regenerate
both with ``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py tests/benchmarks/qwen35_397b_grpo/test_qwen35_397b_grpo_plan.py -k qwen35``.

The reference's launcher, recipes and converter live in the NeMo-RL submodule (3fca04c9), which is not in our copy:
only the files of ``llm_post_training/`` itself can be checked here."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from mlperf_wf.benchmarks.qwen35_397b_grpo import prepare
from mlperf_wf.config.registry import load_benchmark, load_dataset
from tests.benchmarks.scaffold import reference_pyxis_job
from tests.conftest import reference_source
from tests.plan.test_plan import workdir  # noqa: F401 - workdir is a fixture
from tests.workflow.test_workflow import job_counts, new_workdir, planned_image_job_lines, snakemake

NAME = "qwen35_397b_grpo"


def test_the_references_64_node_plan_matches_its_golden_file(workdir):  # noqa: F811
    pyxis = reference_pyxis_job(NAME, workdir)
    command = pyxis["command"]
    assert '/opt/mlperf-wf/patches/mlperf_wf_qwen35_run.sh --nodes 64 --node-rank "${SLURM_NODEID}"' in command
    assert "uv run /workspace/llm/run_grpo_nemo_gym.py --config qwen_35/configs/grpo_qwen35_397b_swe_openhands_async_gbs256.yaml" in command
    for override in ("++grpo.val_start_at=18", "++grpo.max_num_steps=30", "++policy.megatron_cfg.optimizer.lr=1.0e-6", "++policy.max_grad_norm=0.125"):
        assert override in command


def test_full_scale_dry_run_gives_each_of_the_three_runs_its_seed(full_dry_runs):
    """Beside every benchmark's checks (test_every_benchmark.py): this one's command."""
    ran = full_dry_runs(NAME)
    seeds = {re.search(r"\+\+grpo\.seed=(\d+)", line).group(1) for line in ran.train_lines}
    assert len(seeds) == 3


CONVERTED = "qwen35_397b_megatron_checkpoint"


def test_the_conversion_is_made_once_before_the_runs_by_a_one_step_job_of_the_run_s_launch(full_dry_runs):
    """convert_ckpt.sh as a preparation output: the workflow does not download the conversion (nobody publishes it), its
    make_in_image job runs the runs' own launch with ``++grpo.max_num_steps=1`` and the conversion's folder read-write,
    its mllog in its own folder, then seals it; the verify stage checks it and every run mounts it read-only."""
    ran = full_dry_runs(NAME)
    assert ran.counts["make_in_image"] == 1 and ran.counts["download"] == 3 and ran.counts["verify"] == 4, ran.counts
    assert f"mlperf-wf download --dataset {CONVERTED} " not in ran.output
    [made] = planned_image_job_lines(ran.output, NAME)
    mount = f"resources/full/datasets/{CONVERTED}:/inputs/nemo_gym/mcore_ckpt"
    assert f"{mount}:rw" in made and "++grpo.max_num_steps=1 " in made and "++grpo.max_num_steps=30" not in made
    assert f"resources/full/made_in_image/{CONVERTED}:/results:rw" in made and "/runs/" not in made
    assert "++grpo.seed=1233 " in made  # a seed no run has (the runs: 1234-1236)
    # its 64 nodes checked as a run's, on every input it reads but the one it makes, recorded beside its folder
    assert f"node_check_attempt=resources/full/made_in_image/{CONVERTED}-node-check/" in made
    assert "--input checkpoint=" in made and "--input megatron_checkpoint=" not in made
    assert made.endswith(f"mlperf-wf seal --dataset {CONVERTED} resources/full/datasets/{CONVERTED} >> logs/full/make_in_image/{CONVERTED}.log 2>&1")
    for run in ran.train_lines:
        assert f"{mount}:ro" in run and "++grpo.max_num_steps=30 " in run
    # the runs' launch: their image on their geometry (64 nodes, one launcher a node)
    launch = re.compile(r"srun --nodes=\d+ --ntasks-per-node=\d+ --mpi=\S+ --overlap --container-image=\S+")
    assert set(launch.findall(made)) == set(launch.findall(ran.train_lines[0])) and "srun --nodes=64 --ntasks-per-node=1 " in made


def _made_once(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """A full-scale folder where everything up to the conversion exists, each made after what it is made from."""
    folder = new_workdir(tmp_path / "full")
    full = folder / "resources" / "full"
    made = {
        "published": full / "datasets" / "r2e_gym_subset",
        "checkpoint": full / "datasets" / "qwen35_397b_a17b_checkpoint",
        "task_images": full / "datasets" / "r2e_gym_task_images",
        "published_verified": full / "verified" / "r2e_gym_subset.json",
        "checkpoint_verified": full / "verified" / "qwen35_397b_a17b_checkpoint.json",
        "task_images_verified": full / "verified" / "r2e_gym_task_images.json",
        "shard": full / "prepared" / NAME / "shards" / prepare.SHARD,
        "prepared": full / "prepared" / NAME / "dataset",
        "converted": full / "datasets" / CONVERTED,
    }
    for number, (key, path) in enumerate(made.items()):
        if key.endswith("_verified"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}\n")
        else:
            path.mkdir(parents=True, exist_ok=True)
        os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))
    return folder, made


@pytest.mark.parametrize(("newer", "remade"), [("prepared", False), ("task_images_verified", False), ("checkpoint_verified", True)])
def test_only_a_newer_checkpoint_makes_the_conversion_again(tmp_path, newer, remade):
    """``made_from: [checkpoint]``: the prepared tasks and the SIF images only start the one-step job, so a re-prepared
    tree does not remake (and delete) 0.8 TB of conversion; a newer checkpoint does."""
    folder, made = _made_once(tmp_path)
    os.utime(made[newer], (1_800_000_000, 1_800_000_000))
    proc = snakemake(folder, "-n", f"resources/full/datasets/{CONVERTED}", "--rerun-triggers", "mtime", "--config", "scale=full", f"benchmarks=[{NAME}]")
    planned = "make_in_image" in job_counts(proc.stdout) if "Job stats:" in proc.stdout else False
    assert planned == remade, proc.stdout[-3000:]


def test_the_definition_matches_the_reference_documents():
    """Every value the full-scale plan takes from a reference file is in that file, at our pinned commit."""
    folder = reference_source("llm_post_training")
    if folder is None:
        pytest.skip("the mlcommons/training excerpt is not on this machine (../shared/reference-src)")
    for name in ("README.md", "qwen35_grpo_rcp_launch_instructions.md", "download_dataset.sh", "download_checkpoint.sh", "verify_dataset.sh"):
        assert (folder / name).is_file(), name
    verify = (folder / "verify_dataset.sh").read_text()
    for filename, expected in prepare.EXPECTED["full"].items():
        assert f'"{filename}"' in verify and f'"{expected.sha256}"' in verify
        assert f'"{expected.rows}"' in verify and f'"{expected.bytes}"' in verify
    download = (folder / "download_dataset.sh").read_text()
    data = load_dataset("r2e_gym_subset").source
    assert f'DATASET_ID="{data.repository}"' in download and f'DATASET_REVISION="{data.revision}"' in download
    assert 'container_image_dir="/inputs/nemo_gym/sif"' in download and "tools/create_r2e_gym_easy_subset_jsonl.py" in download
    checkpoint = load_dataset("qwen35_397b_a17b_checkpoint").source
    ckpt_script = (folder / "download_checkpoint.sh").read_text()
    assert f'MODEL_ID="{checkpoint.repository}"' in ckpt_script and f'MODEL_REVISION="{checkpoint.revision}"' in ckpt_script
    readme = (folder / "README.md").read_text()
    assert prepare.NEMO_RL_COMMIT in readme
    launch = (folder / "qwen35_grpo_rcp_launch_instructions.md").read_text()
    bench = load_benchmark(NAME)
    for word in bench.full.command:
        if word.startswith("++") and "{" not in word:
            key = word.split("=")[0]
            assert key in launch, f"{key}: not among the Hydra overrides of qwen35_grpo_rcp_launch_instructions.md"
    for path in (
        "/workspace/llm/run_grpo_nemo_gym.py",
        "qwen_35/configs/grpo_qwen35_397b_swe_openhands_async_gbs256.yaml",
        "/inputs/nemo_gym/sif",
        "/opt/nemo-rl",
    ):
        assert path in launch, path
    assert "--val-start 18" in readme and "--max-steps 30" in readme and "--lr 1.0e-6" in readme and "--clip 0.125" in readme
    for variable in ("HF_CKPT_PATH", "NRL_MEGATRON_CHECKPOINT_DIR", "QWEN35_CURRICULUM_DATA_PATH", "NEMO_GYM_SWE_VALIDATION_DATA_PATH", "NEMO_GYM_SWE_SIF_DIR"):
        assert variable in bench.full.env and f"`{variable}`" in readme
    assert "64 nodes x 4 GPUs" in readme and (bench.full.geometry.nodes, bench.full.geometry.gpus_per_node) == (64, 4)


def test_the_converter_and_the_image_use_the_submodule_commit_the_definition_pins():
    submodule = load_benchmark(NAME).reference.submodule
    assert submodule is not None and submodule.path == "llm_moe_grpo/RL" and submodule.commit == prepare.NEMO_RL_COMMIT
    containers = Path(__file__).resolve().parents[3] / "src/mlperf_wf/benchmarks" / NAME / "container"
    assert f"NEMO_RL_REVISION={submodule.commit}" in (containers / "Dockerfile").read_text()
    assert submodule.commit in (containers / "Apptainer.def").read_text()


def test_the_round_patch_logs_the_missing_6_1_0_keys_once_before_init_stop_and_the_configs_submission(tmp_path):
    """The patch wraps mlperf-logging's MLLogger (the reference's logger writes through it) in a fresh interpreter,
    as sitecustomize loads it in the image."""
    import subprocess

    containers = Path(__file__).resolve().parents[3] / "containers"
    log = tmp_path / "result.txt"
    script = (
        "from mlperf_logging import mllog\n"
        f"mllog.config(filename={str(log)!r})\n"
        "logger = mllog.get_mllogger()\n"
        "logger.event(key='submission_org', value='NVIDIA')\n"
        "logger.event(key='config_filename', value='own.yaml')\n"
        "logger.end(key='init_stop')\n"
        "logger.start(key='run_start')\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": f"{containers / 'hooks'}:{containers.parent / 'src/mlperf_wf/benchmarks' / NAME / 'container' / 'patches'}",
        "MLPERF_WF_HOOKS": "mlperf_wf_qwen35_397b_grpo",
        "MLPERF_SUBMISSION_ORG": "workflow-org",
        "MLPERF_WF_PRECISION": "bfloat16",
    }
    subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True)
    records = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in log.read_text().splitlines() if ":::MLLOG " in line]
    keys = [record["key"] for record in records]
    assert keys.index("init_stop") > max(keys.index(f"lowest_numerical_precision_in_{part}") for part in ("linear", "attn", "comm"))
    values = {record["key"]: record["value"] for record in records}
    assert values["submission_org"] == "workflow-org" and values["lowest_numerical_precision_in_comm"] == "bfloat16"
    assert values["config_filename"] == "own.yaml" and keys.count("config_filename") == 1  # the reference's own is kept


def test_tiny_dry_run_generates_downloads_and_verifies_the_four_inputs_then_runs_three(tmp_path):
    folder = new_workdir(tmp_path / "tiny")
    proc = snakemake(folder, "-n", "--config", f"benchmarks=[{NAME}]")
    counts = job_counts(proc.stdout)
    assert counts["train"] == 3 and counts["check_compliance"] == 3
    assert counts["generate_tiny_mirror"] == counts["download"] == counts["verify"] == 4
    assert "make_in_image" not in counts  # the tiny tier mirrors the conversion's stand-in like any dataset
