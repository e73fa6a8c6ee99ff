"""flux1's full-scale plan: run.sub's 4 x 8 geometry for every launcher (golden), the dry run of the full-scale DAG
listing the ten train jobs, the round patch, and conformance with the reference itself. One and two nodes (geometry
overrides) are in ``tests/benchmarks/flux1/golden/flux1.json`` through tests/plan/test_plan.py; regenerate both with
``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py tests/benchmarks/flux1/test_flux1_plan.py -k flux1``.

The reference's code is torchtitan at 9603aa83, the text_to_image/torchtitan submodule, which is not in our copy of
mlcommons/training (its README is). ``reference_facts.yaml`` records what the plan relies on there (paths, option
definitions, the text of cited lines). The plan is checked against those facts always; the facts are checked against
a torchtitan tree at that commit when one is on the machine (``MLPERF_WF_TORCHTITAN``: a checkout, or a git directory
holding the commit; or ``../shared/reference-src/torchtitan-9603aa8``), and skipped otherwise."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from mlperf_wf.benchmarks.flux1.hyperparameters import Hyperparameters
from mlperf_wf.config.registry import load_benchmark
from tests.benchmarks.scaffold import reference_pyxis_job
from tests.conftest import reference_source
from tests.plan.test_plan import workdir  # noqa: F401 - workdir is a fixture

NAME = "flux1"
ROOT = Path(__file__).resolve().parents[3]
BENCH = load_benchmark(NAME)
FACTS = yaml.safe_load((BENCH.folder / "reference_facts.yaml").read_text())
CONTAINERS = ROOT / "containers"


def test_the_references_4_node_plan_matches_its_golden_file(workdir):  # noqa: F811
    pyxis = reference_pyxis_job(NAME, workdir)
    command = pyxis["command"]
    assert 'torchrun --nnodes 4 --rdzv_id 101 --rdzv_backend c10d --rdzv_endpoint "${MASTER_ADDR}:${MASTER_PORT}" --nproc_per_node 8' in command
    for part in (
        "-m torchtitan.experiments.flux.train --job.config_file torchtitan/experiments/flux/train_configs/flux_schnell_mlperf_preprocessed.toml",
        "--job.dump_folder=/logdir",
        "--parallelism.data_parallel_replicate_degree=4 --parallelism.data_parallel_shard_degree=8",
        "--training.dataset_path=/dataset/dataset/cc12m_preprocessed --eval.dataset_path=/dataset/dataset/coco_preprocessed",
        "--encoder.empty_encodings_path=/dataset/dataset/empty_encodings",
    ):
        assert part in command, part
    assert re.search(r"--training\.seed=\d+", command)


def test_full_scale_dry_run_gives_each_of_the_ten_runs_its_seed(full_dry_runs):
    """Beside every benchmark's checks (test_every_benchmark.py): this one's command."""
    ran = full_dry_runs(NAME)
    seeds = set(re.findall(r"--training\.seed=(\d+)", ran.output))
    assert len(seeds) == 10


def test_the_plan_uses_only_what_the_reference_facts_record():
    """Every option the command passes is one torchtitan defines, the config file is there, and the geometry, mounts
    and workdir are run.sub's and the Dockerfile's."""
    assert BENCH.reference.submodule is not None and BENCH.reference.submodule.commit == FACTS["commit"]
    assert BENCH.reference.submodule.repository == FACTS["repository"]
    command = BENCH.full.command
    options = [word[2:].split("=")[0] for word in command[command.index("torchtitan.experiments.flux.train") + 1 :] if word.startswith("--")]
    assert sorted(options) == sorted(FACTS["options"])
    config = command[command.index("--job.config_file") + 1]
    assert config in FACTS["files"]
    lines = FACTS["lines"]
    assert "-N4" in lines["run.sub:5"] and BENCH.full.geometry.nodes == 4
    assert "gpu:8" in lines["run.sub:6"] and BENCH.full.geometry.gpus_per_node == 8
    assert "04:00:00" in lines["run.sub:4"] and BENCH.full.geometry.walltime_minutes == 240
    assert "${DATAROOT}:/dataset" in lines["run.sub:116"] and BENCH.full.mounts["prepared"] == "/dataset"
    assert "${LOGDIR}:/logdir" in lines["run.sub:116"] and BENCH.full.mounts["results"] == "/logdir"
    assert lines["Dockerfile:11"] == f"WORKDIR {BENCH.full.workdir}"
    for flag in ("--rdzv_id 101", "--rdzv_backend c10d", "--local-ranks-filter", "--role rank --tee 3"):
        assert flag in lines["run.sub:117"] + " " + lines["run.sub:118"]
    hp = Hyperparameters()  # the tiny tier keeps the reference's closed optimiser values
    assert '"betas": (0.9, 0.95),' == lines["torchtitan/components/optimizer.py:281"] and (hp.adam_beta1, hp.adam_beta2) == (0.9, 0.95)
    assert lines["torchtitan/components/optimizer.py:282"].endswith("0.1,") and hp.weight_decay == 0.1
    toml = "torchtitan/experiments/flux/train_configs/flux_schnell_mlperf_preprocessed.toml"
    assert lines[f"{toml}:28"] == "eps = 1e-8" and hp.adam_epsilon == 1e-8
    assert lines[f"{toml}:31"] == "warmup_steps = 0" and hp.warmup_steps == 0
    assert lines[f"{toml}:41"].endswith("0.1") and hp.caption_dropout == 0.1
    from mlperf_wf.benchmarks.flux1 import encodings

    assert lines[f"{toml}:50"].endswith(str(encodings.AUTOENCODER_SHIFT)) and lines[f"{toml}:51"].endswith(str(encodings.AUTOENCODER_SCALE))


def test_the_container_and_the_readme_pin_the_submodule_commit():
    commit = FACTS["commit"]
    assert f"TORCHTITAN_COMMIT={commit}" in (ROOT / "src/mlperf_wf/benchmarks" / NAME / "container" / "Dockerfile").read_text()
    assert commit in (ROOT / "src/mlperf_wf/benchmarks" / NAME / "container" / "Apptainer.def").read_text()
    assert commit in (BENCH.folder / "README.md").read_text()
    readme = reference_source("text_to_image")
    if readme is not None:  # our copy of mlcommons/training: the README names the values the plan and the tiny tier use
        text = (readme / "README.md").read_text()
        for fact in ("29,696", "0.586", "Every 262,144 training samples", "flux_schnell_mlperf_preprocessed.toml", "divided by `8.0`"):
            assert fact in text, fact


def _torchtitan() -> tuple[str, Path] | None:
    """('tree', folder) or ('git', git dir) of a torchtitan at the pinned commit on this machine, if any."""
    given = os.environ.get("MLPERF_WF_TORCHTITAN")
    candidates = [Path(given)] if given else []
    shared = reference_source("text_to_image")
    if shared is not None:
        candidates += [shared.parents[1] / "torchtitan-9603aa8", shared / "torchtitan"]
    for path in candidates:
        if (path / "torchtitan" / "experiments" / "flux").is_dir():
            return "tree", path
        if path.is_dir() and subprocess.run(["git", "--git-dir", str(path), "cat-file", "-e", FACTS["commit"]], capture_output=True).returncode == 0:
            return "git", path
    return None


def test_the_reference_facts_hold_in_torchtitan_at_the_pinned_commit():
    found = _torchtitan()
    if found is None:
        pytest.skip("no torchtitan tree at 9603aa83 here (MLPERF_WF_TORCHTITAN, or ../shared/reference-src/torchtitan-9603aa8)")
    kind, path = found

    def read(relative: str) -> list[str]:
        if kind == "tree":
            return (path / relative).read_text().splitlines()
        shown = subprocess.run(["git", "--git-dir", str(path), "show", f"{FACTS['commit']}:{relative}"], capture_output=True, text=True)
        assert shown.returncode == 0, f"{relative}: not in torchtitan at {FACTS['commit'][:8]}"
        return shown.stdout.splitlines()

    for relative in FACTS["files"]:
        assert read(relative), relative
    for option, where in FACTS["options"].items():
        relative, line = where.rsplit(":", 1)
        assert read(relative)[int(line) - 1].strip().startswith(option.split(".")[1] + ":"), where
    for where, text in FACTS["lines"].items():
        relative, line = where.rsplit(":", 1)
        assert read(relative)[int(line) - 1].strip() == text, where


@pytest.fixture
def patch_module(monkeypatch, tmp_path):
    """The round patch on stand-ins of the three reference modules it wraps (their names and call signatures:
    mllog.config(filename=...), Trainer.__init__(job_config), MLPerfLogger.__init__/log_run_start(gbs=..., eval_freq=...))."""
    monkeypatch.syspath_prepend(str(CONTAINERS / "hooks"))
    monkeypatch.syspath_prepend(str(ROOT / "src/mlperf_wf/benchmarks" / NAME / "container" / "patches"))
    monkeypatch.setenv("COMPLIANCE_FILE", str(tmp_path / "run" / "result.txt"))
    monkeypatch.setenv("MLPERF_SUBMISSION_ORG", "Example Org")
    monkeypatch.setenv("MLPERF_SUBMISSION_DIVISION", "open")
    for name in ("sitecustomize", "mlperf_wf_mllog", "mlperf_wf_submission", "mlperf_wf_flux1"):
        sys.modules.pop(name, None)
    events: list[tuple[str, object]] = []
    configured: dict = {}
    mllog = SimpleNamespace(config=lambda **kwargs: configured.update(kwargs))

    class Trainer:
        def __init__(self, job_config):
            self.job_config = job_config

    class MLPerfLogger:  # the reference's shape (T:mlperf_logging.py:31-103), logging into `events`
        def __init__(self, root_dir, filename=None):
            self.mllogger = SimpleNamespace(event=lambda key, value: events.append((key, value)))
            mllog.config(filename=filename, root_dir=root_dir)
            self.submission_info = {"submission_org": "reference", "submission_division": "closed"}

        def log_run_start(self, gbs, seed, lr, warmup_steps, gradient_clip_norm, optimizer_config, eval_freq):
            for key, value in self.submission_info.items():
                self.mllogger.event(key=key, value=value)
            self.mllogger.event(key="evaluation_frequency", value=eval_freq)

    modules = {
        "mlperf_logging.mllog": mllog,
        "torchtitan.train": SimpleNamespace(Trainer=Trainer),
        "torchtitan.experiments.flux.mlperf_logging": SimpleNamespace(MLPerfLogger=MLPerfLogger),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    patch = importlib.import_module("mlperf_wf_flux1")
    return SimpleNamespace(patch=patch, events=events, configured=configured, Trainer=Trainer, MLPerfLogger=MLPerfLogger)


def _job_config(batch: int, eval_freq: int = 262144):
    return SimpleNamespace(
        training=SimpleNamespace(mixed_precision_param="bfloat16", mixed_precision_reduce="float32", batch_size=batch),
        parallelism=SimpleNamespace(tensor_parallel_degree=1, pipeline_parallel_degree=1, context_parallel_degree=1),
        job=SimpleNamespace(config_file="torchtitan/experiments/flux/train_configs/flux_schnell_mlperf_preprocessed.toml"),
        eval=SimpleNamespace(eval_freq=eval_freq),
    )


@pytest.mark.parametrize(("gbs", "expected"), [(512, 262144), (768, 262656)])
def test_the_patch_logs_the_interval_the_loop_uses_the_submission_and_the_6_1_keys(patch_module, tmp_path, gbs, expected):
    patch_module.Trainer(_job_config(gbs // 32))
    logger = patch_module.MLPerfLogger(root_dir="/workspace/flux", filename="/logdir/mlperf_compliance.log")
    assert patch_module.configured["filename"] == str(tmp_path / "run" / "result.txt")
    logger.log_run_start(gbs=gbs, seed=1, lr=1e-4, warmup_steps=0, gradient_clip_norm=1.0, optimizer_config={}, eval_freq=262144)
    logged = dict(patch_module.events)
    assert logged["evaluation_frequency"] == expected  # 6.1.0: ceil(262144 / GBS) x GBS
    assert logged["submission_org"] == "Example Org" and logged["submission_division"] == "open"
    assert logged["micro_batch_size"] == gbs // 32 and logged["config_filename"] == "flux_schnell_mlperf_preprocessed.toml"
    assert [logged[f"lowest_numerical_precision_in_{p}"] for p in ("linear", "attn", "comm")] == ["bfloat16", "bfloat16", "fp32"]
    assert all(logged[f"{kind}_parallelism"] == 1 for kind in ("tensor", "pipeline", "context", "expert"))
    json.dumps(logged)
