"""gpt_oss_20b's full-scale plan: the reference's run_and_time.sh under config_B200_1x8x1.sh's environment on
one node (docker, apptainer, local) and on several (pyxis: torchrun gets the node count and rank, and the
allocation's first host replaces the config's one-node MASTER_ADDR=localhost), and the dry run of the full-scale
DAG listing the ten train jobs. Every launcher x 1 and 2 nodes is golden in tests/benchmarks/gpt_oss_20b/golden/gpt_oss_20b.json
(tests/plan/test_plan.py; regenerate with ``MLPERF_WF_UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py -k gpt_oss_20b``)."""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.plan.plan import merged_after_the_run
from tests.plan.test_plan import make_plan, workdir  # noqa: F401 - workdir is a fixture

NAME = "gpt_oss_20b"
MERGE = ")" + merged_after_the_run("", Path("results/gpt_oss_20b/runs/0/result.txt")).split("()", 1)[1]
SCRATCH_REMOVAL = ") && rm -rf results/gpt_oss_20b/runs/0/scratch || exit $?" + MERGE
"""The end of a run's line: its per-run scratch (Megatron's index cache) goes once the run succeeded, then its processes'
MLLOG files are merged into its result file."""
PINNED = {NAME: {"image": f"registry.example:5000/mlperf/{NAME}:ref-1", "digest": "sha256:" + "ab" * 32}}


def test_one_node_runs_run_and_time_with_the_configs_rendezvous(workdir):  # noqa: F811
    job = make_plan(workdir, scale="full", launcher="docker", full_container=PINNED).of(NAME).train_job(0)
    assert job.command.endswith(" env GPUS_PER_NODE=8 PRIMUS_EP=8 ./run_and_time.sh" + SCRATCH_REMOVAL)
    for setting in ("GPUS_PER_NODE=8", "NNODES=1", "NODE_RANK=0", "MASTER_ADDR=localhost", "MASTER_PORT=29501", "PRIMUS_EP=8"):
        assert f"-e {setting} " in job.command
    assert f"{workdir}/resources/full/prepared/{NAME}:/data:ro" in job.command and "-e MLPERF_WF_DATA_DIR=/data/dataset " in job.command


def test_several_nodes_get_the_allocations_master_and_their_own_rank(workdir):  # noqa: F811
    job = make_plan(workdir, scale="full", launcher="pyxis", full_geometry={NAME: {"nodes": 4}}, full_container=PINNED).of(NAME).train_job(0)
    assert job.resources.nodes == 4 and job.resources.gres == "gpu:8"
    assert job.command.count("export MASTER_ADDR=") == 1 and 'export MASTER_ADDR="$(scontrol show hostnames' in job.command
    assert "MASTER_ADDR=localhost" not in job.command
    assert "--nodes=4 --ntasks-per-node=1" in job.command
    assert job.command.endswith("""bash -c 'env NNODES=4 "NODE_RANK=${SLURM_NODEID}" GPUS_PER_NODE=8 PRIMUS_EP=8 ./run_and_time.sh'""" + SCRATCH_REMOVAL)


def test_torchrun_and_expert_parallelism_follow_the_gpus_per_node(workdir):  # noqa: F811
    """config_B200_1x8x1.sh's GPUS_PER_NODE=8 and PRIMUS_EP=8 are its 1x8 node: on 2-GPU nodes torchrun started 8 ranks
    (the rehearsal: LOCAL_WORLD_SIZE 8, expected 2) and EP 8 does not divide the world."""
    geometry = {NAME: {"nodes": 1, "gpus_per_node": 2}}
    job = make_plan(workdir, scale="full", launcher="pyxis", full_geometry=geometry, full_container=PINNED).of(NAME).train_job(0)
    assert job.command.endswith(" GPUS_PER_NODE=2 PRIMUS_EP=2 ./run_and_time.sh'" + SCRATCH_REMOVAL) and job.resources.gres == "gpu:2"


def test_full_scale_dry_run_lists_the_ten_train_jobs(full_dry_runs):
    """Beside every benchmark's checks (test_every_benchmark.py): this one's command."""
    ran = full_dry_runs(NAME)
    assert ran.counts["train"] == 10 and ran.counts["preprocess_shard"] == 1
    assert all("./run_and_time.sh" in line for line in ran.train_lines)
