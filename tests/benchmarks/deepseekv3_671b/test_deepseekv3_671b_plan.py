"""deepseekv3_671b's full-scale plan: the reference's 64 x 4 geometry for every launcher (golden), and the dry run
of the full-scale DAG listing the three train jobs. One node and two nodes (geometry overrides) are in
``tests/golden/plan/deepseekv3_671b.json`` through tests/plan/test_plan.py; regenerate both with
``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py tests/benchmarks/deepseekv3_671b/test_deepseekv3_671b_plan.py -k deepseekv3_671b``."""

from __future__ import annotations

from tests.plan.test_plan import reference_geometry_plan, workdir  # noqa: F401 - workdir is a fixture
from tests.workflow.test_workflow import job_counts, new_workdir, planned_train_lines, snakemake

NAME = "deepseekv3_671b"


def test_the_references_64_node_plan_matches_its_golden_file(workdir):  # noqa: F811
    got = reference_geometry_plan(NAME, workdir)
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
    assert "--uri https://training.mlcommons-storage.org/metadata/deepseekv3_checkpoint_bf16_megatron_bridge.uri" in out
    train_lines = planned_train_lines(out, NAME)
    assert len(train_lines) == 3
    for line in train_lines:
        assert "pretrain_deepseek_v3_671b.py --nodes 64 --gpus_per_node 4" in line and "--gbs 16384" in line
    for seed in range(1234, 1237):
        assert f"--seed {seed} " in out
