"""stable_diffusion's full-scale plan: the reference's 32 x 8 geometry for every launcher (golden), and the dry run
of the full-scale DAG listing the ten train jobs. One node and two nodes (geometry overrides) are in
``tests/golden/plan/stable_diffusion.json`` through tests/plan/test_plan.py; regenerate both with
``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py tests/benchmarks/stable_diffusion/test_stable_diffusion_plan.py -k stable_diffusion``."""

from __future__ import annotations

from tests.plan.test_plan import reference_geometry_plan, workdir  # noqa: F401 - workdir is a fixture
from tests.workflow.test_workflow import job_counts, new_workdir, planned_train_lines, snakemake

NAME = "stable_diffusion"


def test_the_references_32_node_plan_matches_its_golden_file(workdir):  # noqa: F811
    got = reference_geometry_plan(NAME, workdir)
    pyxis = got["run_3/pyxis/32_node"]
    assert pyxis["resources"]["nodes"] == 32 and pyxis["resources"]["gres"] == "gpu:8"
    assert "python main.py lightning.trainer.num_nodes=32 lightning.trainer.devices=8 " in pyxis["command"]
    # the config's data paths under the mounted prepared tree (/datasets/dataset), as main.py's dotlist overrides
    assert "'data.params.train.params.urls=/datasets/dataset/laion-400m/webdataset-moments-filtered/{00000..00831}.tar'" in pyxis["command"]
    assert "model.params.validation_config.fid.gt_path=/datasets/dataset/coco2014/val2014_30k_stats.npz -m train" in pyxis["command"]
    assert all("refused" in got[f"run_3/{launcher}/32_node"] for launcher in ("local", "docker", "apptainer"))


def test_full_scale_dry_run_lists_the_ten_train_jobs(tmp_path):
    folder = new_workdir(tmp_path / "full")
    proc = snakemake(folder, "-n", f"results/{NAME}/report.json", "--config", "scale=full")
    counts = job_counts(proc.stdout)
    assert counts["train"] == 10 and counts["check_compliance"] == 10
    out = proc.stdout
    for name in ("laion-400m-filtered-moments-dataset", "coco2014-validation-prompts-dataset", "coco2014-validation-stats-dataset",
                 "sd-checkpoint", "inception-checkpoint", "clip-checkpoint"):  # fmt: skip
        assert f"--uri https://training.mlcommons-storage.org/metadata/stable-diffusion-{name}.uri" in out
    train_lines = planned_train_lines(out, NAME)
    assert len(train_lines) == 10
    for line in train_lines:
        assert "-b configs/train_32x08x08.yaml" in line and "--clip_threshold" not in line  # main.py's parser: type=int
