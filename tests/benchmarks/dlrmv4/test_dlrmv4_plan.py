"""dlrmv4's full-scale plan: the dry run of the full-scale DAG lists the ten train jobs with the reference's command
(R:run_and_time.sh at a67b8459). One node and two nodes for every launcher are in ``tests/golden/plan/dlrmv4.json``
through tests/plan/test_plan.py; regenerate with ``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py -k dlrmv4``."""

from __future__ import annotations

NAME = "dlrmv4"


def test_full_scale_dry_run_lists_the_ten_train_jobs(full_dry_runs):
    """Beside every benchmark's checks (test_every_benchmark.py): this one's command."""
    ran = full_dry_runs(NAME)
    assert ran.counts["train"] == 10 and ran.counts["preprocess_shard"] == 3
    out = ran.output
    for line in ran.train_lines:
        assert "python -m generative_recommenders.dlrm_v4.train.train_ranker --dataset yambda-5b --mode streaming-train-eval" in line
    for seed in range(1234, 1244):
        assert f"-e SEED={seed} " in out  # the reference reads $SEED (R:run_and_time.sh:29)
