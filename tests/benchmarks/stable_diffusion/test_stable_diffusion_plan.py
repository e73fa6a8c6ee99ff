"""stable_diffusion's full-scale plan: the reference's 32 x 8 geometry for every launcher (golden), and the dry run
of the full-scale DAG listing the ten train jobs. One node and two nodes (geometry overrides) are in
``tests/benchmarks/stable_diffusion/golden/stable_diffusion.json`` through tests/plan/test_plan.py; regenerate both with
``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py tests/benchmarks/stable_diffusion/test_stable_diffusion_plan.py -k stable_diffusion``."""

from __future__ import annotations

from tests.benchmarks.scaffold import reference_pyxis_job
from tests.plan.test_plan import workdir  # noqa: F401 - workdir is a fixture

NAME = "stable_diffusion"


def test_the_references_32_node_plan_matches_its_golden_file(workdir):  # noqa: F811
    pyxis = reference_pyxis_job(NAME, workdir)
    assert "python main.py lightning.trainer.num_nodes=32 lightning.trainer.devices=8 " in pyxis["command"]
    # the config's data paths under the mounted prepared tree (/datasets/dataset), as main.py's dotlist overrides
    assert "'data.params.train.params.urls=/datasets/dataset/laion-400m/webdataset-moments-filtered/{00000..00831}.tar'" in pyxis["command"]
    assert "model.params.validation_config.fid.gt_path=/datasets/dataset/coco2014/val2014_30k_stats.npz" in pyxis["command"]
    # no checkpoint in the timed region (main.py's default save_last: True, the config's save_top_k: -1)
    assert " lightning.modelcheckpoint.params.save_top_k=0 lightning.modelcheckpoint.params.save_last=False -m train" in pyxis["command"]


def test_full_scale_dry_run_lists_the_ten_train_jobs(full_dry_runs):
    """Beside every benchmark's checks (test_every_benchmark.py): this one's command."""
    ran = full_dry_runs(NAME)
    assert ran.counts["train"] == 10
    for line in ran.train_lines:
        assert "-b configs/train_32x08x08.yaml" in line and "--clip_threshold" not in line  # main.py's parser: type=int
