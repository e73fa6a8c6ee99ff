"""bert's full-scale job on the cluster in a box when its training fails (issue 24's bert items).

The reference trains and evaluates in two processes (README.md:184-232); the evaluation loops until a checkpoint at
``--num_train_steps`` appears (run_pretraining.py:617-642). One campaign, whose training process fails on purpose
after writing its first checkpoint, shows that: the job fails (the launch line does not mask the training's status
behind the evaluation's or ``wait``'s), without waiting for the evaluation loop (it is stopped), and the profile's
retry starts with an empty ``--output_dir`` (the Estimator would resume from the failed attempt's checkpoint).
The passing run is ``tests/test_rehearsal.py``'s (every benchmark's campaign).
"""

from __future__ import annotations

import pytest

from tests.rehearsal import campaign, cluster, spec
from tests.rehearsal.benchmarks import bert as bert_rehearsal
from tests.rehearsal.probe import FAILED_ON_PURPOSE

REHEARSAL = bert_rehearsal.REHEARSAL


def _skip_reason() -> str | None:
    return cluster.missing_requirements() or (f"reference source absent: {spec.missing_sources(REHEARSAL)}" if spec.missing_sources(REHEARSAL) else None)


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))]


@pytest.fixture(scope="module")
def failing_training(rehearsal_box, tmp_path_factory) -> campaign.Campaign:
    work = tmp_path_factory.mktemp("bert-rehearsal")
    bert_rehearsal.prepare_in_process(work / "project")  # the 502 shards as Snakemake jobs take ~40 min here
    configfile = campaign.prepare(work / "project", [REHEARSAL], "pyxis", runs=1, fail={"bert": f"{campaign.SEED_BASE}:0"})
    return campaign.run_on_box(rehearsal_box, work / "project", configfile, [REHEARSAL], "pyxis", runs=1)


def _processes(ran: campaign.Campaign, role: str) -> list[dict]:
    flag = "--do_train" if role == "training" else "--do_eval"
    return [record for record in ran.ranks("bert", 0) if flag in record["argv"]]


def test_a_failing_training_fails_the_job_without_waiting_for_the_evaluation(failing_training):
    ran = failing_training
    training = _processes(ran, "training")
    assert training and all(record["status"] == FAILED_ON_PURPOSE for record in training), ran.output[-2000:]
    assert ran.returncode != 0, f"the job hid its failed training:\n{ran.train_log('bert', 0)[-2000:]}"
    assert not (ran.run_folder("bert", 0) / "result.txt").exists() or "run_stop" not in (ran.run_folder("bert", 0) / "result.txt").read_text()
    # the evaluation process was stopped with its training, not left to wait for a checkpoint that never comes
    waited = [record for record in _processes(ran, "evaluation") if "would wait until walltime" in record["problem"]]
    assert not waited, waited[0]["problem"]


def test_every_attempt_starts_with_an_empty_output_dir(failing_training):
    ran = failing_training
    training = _processes(ran, "training")
    assert len({record["slurm"].get("SLURM_JOB_ID") for record in training}) == 2, "the profile retries the failed job once"
    for record in training:
        leftovers = [check for check in record["checked"] if check["what"].startswith("checkpoints in --output_dir")]
        assert leftovers and all(check["held"] for check in leftovers), (record["slurm"], leftovers)
