"""dlrmv4's full-scale plan: the dry run of the full-scale DAG lists the ten train jobs with the reference's command
(R:run_and_time.sh at a67b8459). One node and two nodes for every launcher are in ``tests/benchmarks/dlrmv4/golden/dlrmv4.json``
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


def _exported(command: str) -> dict[str, str]:
    import re

    return dict(re.findall(r"(?:-e |export )([A-Z_]+)=([^\s;]+)", command))


def test_every_value_that_follows_from_the_batch_follows_the_geometry():
    """On 2 nodes (16 GPUs) the plan keeps GBS 8192 (512 per rank: the checker prunes the 16384 RCP, so a set there is
    tested against the interpolation of its neighbours); GBS 16384 named on 2 nodes runs 1024 per rank with the
    dlrmv4_ref_16384 RCP's learning rates, and its first evaluation lands where 6.1.0's closed rule puts it
    (71,106,560 samples, the rule's first_eval_samples), not at GBS 8192's 57,344,000. On the reference's own node every
    value is what it exports."""
    import math
    from pathlib import Path

    from mlperf_wf.plan import plan as planning
    from mlperf_wf.plan import sizing
    from mlperf_wf.results import status

    root = Path(__file__).resolve().parents[3]
    epoch = 2290835423  # train_samples of the 6.1.0 rules (R:README.MD: total_train_samples)

    def first_eval(env: dict[str, str], gbs: int) -> int:
        # R:train/utils.py resolve_skip_eval_until_step and eval_interval_steps
        until = math.ceil(float(env["SKIP_EVAL_EPOCH_PCT"]) * epoch / gbs)
        interval = max(1, round(0.001 * (epoch // gbs)))
        return math.ceil(until / interval) * interval * gbs

    cases = [(1, None, 8192, "1024", "1e-06", 57_344_000), (2, None, 8192, "512", "1e-06", 57_344_000), (2, 16384, 16384, "1024", "2e-06", 71_106_560)]
    for nodes, named, gbs, per_rank, lr, rule_first in cases:
        overrides = ["scale=full", f"benchmarks=[{NAME}]", f"full_geometry={{{NAME}: {{nodes: {nodes}}}}}"]
        if named:
            overrides.append(f"full_hyperparameters={{{NAME}: {{global_batch_size: {named}}}}}")
        plan = planning.load(status.load_config(root, overrides), project_root=root)
        env = _exported(plan.of(NAME).train_job(0).command)
        assert env["BATCH_SIZE"] == per_rank and env["DENSE_LR"] == env["SPARSE_LR"] == lr and env["LR_WARMUP_STEPS"] == "24000", env
        assert first_eval(env, gbs) == rule_first == sizing.rule_state(NAME, "6.1.0", {"global_batch_size": gbs})["first_eval_samples"]
        batch = plan.of(NAME).launch_settings().batch
        assert batch.split.gbs == gbs and not batch.deviations
        if nodes == 1:
            assert env["SKIP_EVAL_EPOCH_PCT"] == "0.025"  # the reference's own value at GBS 8192
