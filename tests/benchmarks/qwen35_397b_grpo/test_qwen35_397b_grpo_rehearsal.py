"""qwen35_397b_grpo's full-scale job on two nodes of the cluster in a box: the issue-24 items, each a probe check.

The session's rehearsal campaign (tests/conftest.py ``rehearsal_campaign``) runs the plan's train job with a real Ray
2.55.1 cluster (``mlperf_wf_qwen35_run.sh`` per node: the head on n1, ``ray start --block`` on n2), the reference's
parse_args and NeMo-RL's config loader on the job's argv and environment in the driver, and one Ray actor per GPU
forming the world (tests/benchmarks/qwen35_397b_grpo/rehearsal.py). Each item below failed there before its fix:
(a) ``${oc.env:CONTAINER_HF_CKPT_PATH}`` unset, (b) the data variables one folder above ``dataset/``, (c) the worker
node's ``ray start --block`` exiting 1 when the head stopped (a finished run failed its job), (d) ``cache_clear`` never
logged, (e) ``/dev/fuse`` not mounted, (f) the Megatron conversion a per-run scratch (converted in every timed init);
the conversion is now made once by the workflow (its make_in_image job, rehearsed here too).
"""

from __future__ import annotations

import re

import pytest

from tests.rehearsal import campaign, cluster, spec
from tests.rehearsal.probe import FAILED_ON_PURPOSE

REHEARSAL = spec.module("qwen35_397b_grpo").REHEARSAL
NAME = REHEARSAL.benchmark


def _skip_reason() -> str | None:
    return cluster.missing_requirements() or (f"reference sources absent: {spec.missing_sources(REHEARSAL)}" if spec.missing_sources(REHEARSAL) else None)


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))


@pytest.fixture(scope="module")
def ran(rehearsal_campaign) -> campaign.Campaign:
    """Runs 0 (as planned) and 1 (its last rank fails on purpose) of the session's rehearsal campaign."""
    if NAME not in rehearsal_campaign.rehearsals:
        pytest.skip(f"{NAME} is not rehearsed in this session")
    return rehearsal_campaign


def _checks(ran: campaign.Campaign, kind: str, what: str) -> list[dict]:
    """Run 0's probe checks of ``kind`` whose subject contains ``what`` (the driver's checks travel in every rank record:
    rank 0's)."""
    checks = [check for record in ran.ranks(NAME, 0) if record["rank"] == 0 for check in record.get("checked", [])]
    return [check for check in checks if check["kind"] == kind and what in check["what"]]


def _explain(ran: campaign.Campaign, run: int) -> str:
    problems = [f"rank {r['rank']} on {r['host']}: {r['problem'][-1500:]}" for r in ran.ranks(NAME, run) if r["status"]]
    return "\n".join(problems) + f"\n--- train log:\n{ran.train_log(NAME, run)[-3000:]}"


def test_the_recipe_resolves_with_the_job_s_environment_and_reads_the_prepared_files(ran):
    hf_path = _checks(ran, "variable", "CONTAINER_HF_CKPT_PATH")  # (a) grpo_qwen35_397b_swe_openhands_async.yaml:87,89
    assert len(hf_path) == 2 and all(check["held"] for check in hf_path), hf_path
    data = _checks(ran, "path", "/inputs/nemo_gym/data/dataset/benchmark_r2e_gym_easy_")  # (b)
    assert len(data) == 2 and all(check["held"] for check in data), data


def test_a_finished_run_exits_0_on_both_nodes_with_the_ray_worker(ran):
    """(c) The worker node's ``ray start --block`` ran under the job's step on n2, and no task of the step failed."""
    result = ran.run_folder(NAME, 0) / "result.txt"
    ranks = ran.ranks(NAME, 0)
    assert result.exists() and ranks and all(r["status"] == 0 for r in ranks), _explain(ran, 0)
    hosts = {r["host"] for r in ranks}
    assert len(hosts) == 2  # Ray placed actors on the worker node too (the box has four nodes: any two)
    workers = [r for r in ran.records(NAME, 0) if "--block" in r.get("argv", []) and r["slurm"].get("SLURM_NODEID") == "1"]
    assert workers and workers[0]["host"] in hosts, "the worker node's ray start --block"
    assert "srun: error" not in ran.train_log(NAME, 0), _explain(ran, 0)
    # (d) the run logs cache_clear once, from the reference's own logger, with what the job's drop did
    assert result.read_text().count('"key": "cache_clear"') == 1


def test_the_task_sandboxes_get_dev_fuse(ran):
    fuse = _checks(ran, "mount", "/dev/fuse")  # (e) config_mounts.sh: /dev/fuse:/dev/fuse
    assert fuse and all(check["held"] for check in fuse), fuse


def test_the_runs_read_the_conversion_made_once_read_only(ran):
    """(f) ``$NRL_MEGATRON_CHECKPOINT_DIR/model__inputs_hf_checkpoint/iter_0000000`` is there (NeMo-RL skips its
    conversion) and the folder is a read-only input, not a per-run scratch."""
    converted = _checks(ran, "path", "/inputs/nemo_gym/mcore_ckpt/model__inputs_hf_checkpoint/iter_0000000/")
    assert len(converted) == 4 and all(check["held"] for check in converted), converted
    read_only = _checks(ran, "mount", "/inputs/nemo_gym/mcore_ckpt")
    assert read_only and all(check["held"] for check in read_only), read_only
    assert not (ran.run_folder(NAME, 0) / "scratch" / "mcore_checkpoint").exists()


CONVERTED = "qwen35_397b_megatron_checkpoint"


def _first_job(records: list[dict]) -> list[dict]:
    """The records of the first SLURM job among ``records``: under the one-off job's seed, the conversion's (a later
    ``mlperf-wf rehearse`` job of the same folder is planned with the same seed and writes its probe's records there)."""
    jobs = {int(r["slurm"].get("SLURM_JOB_ID") or 0) for r in records}
    return [r for r in records if int(r["slurm"].get("SLURM_JOB_ID") or 0) == min(jobs)] if jobs else []


def test_the_conversion_is_made_once_by_the_workflow_s_one_step_job_of_the_image(ran):
    """(f, the conversion as a preparation output) Nobody publishes the conversion: the campaign's workflow made it on
    the box with its make_in_image job, the plan's launch of the run's image for one step (convert_ckpt.sh's
    MAX_STEPS=1) with NRL_MEGATRON_CHECKPOINT_DIR empty and read-write, where NeMo-RL converts (the probe stands in for
    the GPU work); `seal` then listed what it left, and the verify job checked it before the runs."""
    records = _first_job(ran.ranks(NAME, -1))  # the one-off job's seed is SEED_BASE - 1, which no run has (Plan.image_job_seed)
    log = ran.workdir / "logs" / "full" / "make_in_image" / f"{CONVERTED}.log"
    assert records and all(r["status"] == 0 for r in records), log.read_text()[-3000:] if log.exists() else ran.output[-3000:]
    checks = [check for r in records if r["rank"] == 0 for check in r["checked"]]
    writable = [c for c in checks if c["kind"] == "mount" and c["what"] == "/inputs/nemo_gym/mcore_ckpt"]
    assert writable and all(c["held"] for c in writable) and "converts into" in writable[0]["why"], writable
    one_step = [c for c in checks if c["what"] in ("grpo.max_num_steps", "entries of NRL_MEGATRON_CHECKPOINT_DIR")]
    assert len(one_step) == 2 and all(c["held"] for c in one_step), one_step
    from mlperf_wf.run import node_check

    checked = node_check.attempts(ran.workdir / "resources" / "full" / "made_in_image" / f"{CONVERTED}-node-check")
    assert [(len(a["records"]), a["passed"]) for a in checked] == [(2, True)], checked  # both nodes, before the launch
    folder = ran.workdir / "resources" / "full" / "datasets" / CONVERTED
    listed = (folder / "manifest.md5").read_text()
    assert "model__inputs_hf_checkpoint/iter_0000000/common.pt" in listed and "__0_0.distcp" in listed, listed
    assert (ran.workdir / "resources" / "full" / "verified" / f"{CONVERTED}.json").exists()
    # its mllog is its own, beside the job, never a run's (nothing it logs is scored)
    made = ran.workdir / "resources" / "full" / "made_in_image" / CONVERTED / "result.txt"
    assert '"key": "init_start"' in made.read_text()
    assert "Error in rule make_in_image" not in ran.output


def test_a_failing_driver_fails_the_job(ran):
    """A rank failing on purpose ends the driver with its status, hence the head's task and the job."""
    run = campaign.FAILING_RUN
    assert any(r["status"] == FAILED_ON_PURPOSE for r in ran.ranks(NAME, run)), _explain(ran, run)
    assert not (ran.run_folder(NAME, run) / "result.txt").exists()
    log = ran.train_log(NAME, run)
    assert re.search(r"srun: error: n\d: task 0: Exited with exit code", log), log[-3000:]
    assert f"results/{NAME}/runs/{run}/result.txt" in ran.output and "Error in rule train" in ran.output
