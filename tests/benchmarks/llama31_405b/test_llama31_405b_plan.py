"""llama31_405b's full-scale plan: the reference's 288 x 8 geometry for every launcher (golden), and the dry run
of the full-scale DAG listing the three train jobs. One node and two nodes (geometry overrides) are in
``tests/golden/plan/llama31_405b.json`` through tests/plan/test_plan.py; regenerate both with
``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py tests/benchmarks/llama31_405b/test_llama31_405b_plan.py -k llama31_405b``."""

from __future__ import annotations

from tests.plan.test_plan import reference_geometry_plan, workdir  # noqa: F401 - workdir is a fixture
from tests.workflow.test_workflow import job_counts, new_workdir, planned_train_lines, snakemake

NAME = "llama31_405b"


def test_the_references_288_node_plan_matches_its_golden_file(workdir):  # noqa: F811
    got = reference_geometry_plan(NAME, workdir)
    pyxis = got["run_3/pyxis/288_node"]
    assert pyxis["resources"]["nodes"] == 288 and pyxis["resources"]["gres"] == "gpu:8"
    assert "MLPERF_WF_NNODES=288" in pyxis["command"] and "python3 pretrain_llama31.py" in pyxis["command"]
    assert all("refused" in got[f"run_3/{launcher}/288_node"] for launcher in ("local", "docker", "apptainer"))


def test_full_scale_dry_run_lists_the_three_train_jobs(tmp_path):
    folder = new_workdir(tmp_path / "full")
    proc = snakemake(folder, "-n", f"results/{NAME}/report.json", "--config", "scale=full")
    counts = job_counts(proc.stdout)
    assert counts["train"] == 3 and counts["check_compliance"] == 3 and counts["preprocess_shard"] == 3
    out = proc.stdout
    assert "--uri https://training.mlcommons-storage.org/metadata/mixtral-8x22b-preprocessed-c4-dataset.uri" in out
    assert "--uri https://training.mlcommons-storage.org/metadata/mixtral-8x22b-tokenizer.uri" in out
    train_lines = planned_train_lines(out, NAME)
    assert len(train_lines) == 3
    for line in train_lines:
        assert "python3 pretrain_llama31.py" in line and "--nodes 288 --gpus_per_node 8" in line
        assert "--gbs 1152" in line and "--eval_every 18432" in line and "--use_ckpt --resume_from_hf" in line
    for seed in range(1234, 1237):
        assert f"--seeds {seed} " in out
