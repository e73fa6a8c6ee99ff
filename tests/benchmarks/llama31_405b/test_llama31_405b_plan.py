"""llama31_405b's full-scale plan: the reference's 288 x 8 geometry for every launcher (golden), and the dry run
of the full-scale DAG listing the three train jobs. One node and two nodes (geometry overrides) are in
``tests/benchmarks/llama31_405b/golden/llama31_405b.json`` through tests/plan/test_plan.py; regenerate both with
``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py tests/benchmarks/llama31_405b/test_llama31_405b_plan.py -k llama31_405b``."""

from __future__ import annotations

from tests.benchmarks.scaffold import reference_pyxis_job
from tests.plan.test_plan import workdir  # noqa: F401 - workdir is a fixture

NAME = "llama31_405b"


def test_the_references_288_node_plan_matches_its_golden_file(workdir):  # noqa: F811
    pyxis = reference_pyxis_job(NAME, workdir)
    assert "MLPERF_WF_NNODES=288" in pyxis["command"] and "python3 pretrain_llama31.py" in pyxis["command"]


def test_full_scale_dry_run_lists_the_three_train_jobs(full_dry_runs):
    """Beside every benchmark's checks (test_every_benchmark.py): this one's command."""
    ran = full_dry_runs(NAME)
    counts, out = ran.counts, ran.output
    assert counts["train"] == 3 and counts["preprocess_shard"] == 3
    for line in ran.train_lines:
        assert "python3 pretrain_llama31.py" in line and "--nodes 288 --gpus_per_node 8" in line
        assert "--gbs 1152" in line and "--eval_every 18432" in line and "--use_ckpt --resume_from_hf" in line
    for seed in range(1234, 1237):
        assert f"--seeds {seed} " in out
