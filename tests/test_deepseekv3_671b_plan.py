"""deepseekv3_671b's full-scale plan: the reference's 64 x 4 geometry for every launcher (golden), and the dry run
of the full-scale DAG listing the three train jobs. One node and two nodes (geometry overrides) are in
``tests/golden/plan/deepseekv3_671b.json`` through tests/test_plan.py; regenerate both with
``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/test_plan.py tests/test_deepseekv3_671b_plan.py -k deepseekv3_671b``."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict

from mlperf_wf.errors import ConfigError
from tests.test_plan import GOLDEN, LAUNCHERS, make_plan, workdir  # noqa: F401 - workdir is a fixture
from tests.test_workflow import job_counts, new_workdir, snakemake

NAME = "deepseekv3_671b"


def rendered_64(workdir) -> dict:  # noqa: F811
    pinned = {NAME: {"image": f"registry.example:5000/mlperf/{NAME}:ref-1", "digest": "sha256:" + "ab" * 32}}
    out = {}
    for launcher in LAUNCHERS:
        plan = make_plan(workdir, scale="full", launcher=launcher, full_container=pinned)
        try:
            out[f"run_3/{launcher}/64_node"] = asdict(plan.train_job(NAME, 3))
        except ConfigError as err:  # local, docker and apptainer run on one node
            out[f"run_3/{launcher}/64_node"] = {"refused": str(err)}
    text = json.dumps(out, indent=2, sort_keys=True) + "\n"
    for path, name in sorted({str(workdir): "{workdir}", sys.prefix: "{venv}", sys.base_prefix: "{python}"}.items(), key=lambda item: -len(item[0])):
        text = text.replace(path, name)
    return json.loads(text)


def test_the_references_64_node_plan_matches_its_golden_file(workdir):  # noqa: F811
    got = rendered_64(workdir)
    golden = GOLDEN / f"{NAME}_64_nodes.json"
    if os.environ.get("MLPERF_WF_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert got == json.loads(golden.read_text())
    pyxis = got["run_3/pyxis/64_node"]
    assert pyxis["resources"]["nodes"] == 64 and pyxis["resources"]["gres"] == "gpu:4" and pyxis["resources"]["tasks"] == 256
    command = pyxis["command"]
    assert "--mpi=pmix" in command and "RANK=$SLURM_PROCID" in command
    assert "python pretrain_deepseek_v3_671b.py --nodes 64 --gpus_per_node 4" in command
    assert "--expert_model_parallel_size 64" in command and "--gbs 16384" in command and "--lr 0.000024" in command
    for mount in ("/preproc_data", "/tokenizer", "/checkpoint", "/output", "/npy_index", "/mlperf-outputs"):
        assert f":{mount}" in command, mount
    assert all("refused" in got[f"run_3/{launcher}/64_node"] for launcher in ("local", "docker", "apptainer"))


def test_full_scale_dry_run_lists_the_three_train_jobs(tmp_path):
    folder = new_workdir(tmp_path / "full")
    proc = snakemake(folder, "-n", f"results/{NAME}/report.json", "--config", "scale=full")
    counts = job_counts(proc.stdout)
    assert counts["train"] == 3 and counts["check_compliance"] == 3
    out = proc.stdout
    assert "--uri https://training.mlcommons-storage.org/metadata/llama-3-1-8b-preprocessed-c4-dataset.uri" in out
    assert "--uri https://training.mlcommons-storage.org/metadata/deepseekv3_checkpoint_bf16.uri" in out
    train_lines = [line for line in out.splitlines() if line.startswith(f"Shell command: mlperf-wf preflight --benchmark {NAME}")]
    assert len(train_lines) == 3
    for line in train_lines:
        assert "pretrain_deepseek_v3_671b.py --nodes 64 --gpus_per_node 4" in line and "--gbs 16384" in line
    for seed in range(1234, 1237):
        assert f"--seed {seed} " in out
