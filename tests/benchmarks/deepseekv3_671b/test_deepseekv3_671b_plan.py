"""deepseekv3_671b's full-scale plan: the reference's 64 x 4 geometry for every launcher (golden), and the dry run
of the full-scale DAG listing the three train jobs. One node and two nodes (geometry overrides) are in
``tests/benchmarks/deepseekv3_671b/golden/deepseekv3_671b.json`` through tests/plan/test_plan.py; regenerate both with
``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py tests/benchmarks/deepseekv3_671b/test_deepseekv3_671b_plan.py -k deepseekv3_671b``."""

from __future__ import annotations

from tests.benchmarks.scaffold import reference_pyxis_job
from tests.plan.test_plan import workdir  # noqa: F401 - workdir is a fixture

NAME = "deepseekv3_671b"


def test_the_references_64_node_plan_matches_its_golden_file(workdir):  # noqa: F811
    pyxis = reference_pyxis_job(NAME, workdir)
    assert pyxis["resources"]["tasks"] == 256
    command = pyxis["command"]
    assert "--mpi=pmix" in command and "RANK=$SLURM_PROCID" in command
    assert "python pretrain_deepseek_v3_671b.py --nodes 64 --gpus_per_node 4" in command
    assert "--expert_model_parallel_size 64" in command and "--gbs 16384" in command and "--lr 0.000024" in command
    for mount in ("/preproc_data", "/tokenizer", "/checkpoint", "/output", "/npy_index", "/mlperf-outputs"):
        assert f":{mount}" in command, mount


def test_full_scale_dry_run_lists_the_three_train_jobs(full_dry_runs):
    """Beside every benchmark's checks (test_every_benchmark.py): this one's command."""
    ran = full_dry_runs(NAME)
    counts, out = ran.counts, ran.output
    assert counts["train"] == 3
    for line in ran.train_lines:
        assert "pretrain_deepseek_v3_671b.py --nodes 64 --gpus_per_node 4" in line and "--gbs 16384" in line
    for seed in range(1234, 1237):
        assert f"--seed {seed} " in out
