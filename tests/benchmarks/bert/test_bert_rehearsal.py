"""bert's full-scale job on the cluster in a box when its training fails (issue 24's bert items).

The reference trains and evaluates in two processes (README.md:184-232); the evaluation loops until a checkpoint at
``--num_train_steps`` appears (run_pretraining.py:617-642). One campaign, whose training process fails on purpose
after writing its first checkpoint, shows that: the job fails (the launch line does not mask the training's status
behind the evaluation's or ``wait``'s), without waiting for the evaluation loop (it is stopped), and the profile's
retry starts with an empty ``--output_dir`` (the Estimator would resume from the failed attempt's checkpoint).
The passing run is ``tests/workflow/test_rehearsal.py``'s (every benchmark's campaign).
"""

from __future__ import annotations

import pytest

from tests.benchmarks.bert import rehearsal as bert_rehearsal
from tests.rehearsal import campaign, cluster, spec
from tests.rehearsal.probe import FAILED_ON_PURPOSE

REHEARSAL = bert_rehearsal.REHEARSAL


def _skip_reason() -> str | None:
    return cluster.missing_requirements() or (f"reference source absent: {spec.missing_sources(REHEARSAL)}" if spec.missing_sources(REHEARSAL) else None)


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))]


@pytest.fixture(scope="module")
def failing_training(rehearsal_campaign) -> campaign.Campaign:
    """The session's rehearsal campaign (bert's 502 shards made in one process: campaign.prepare calls make_shards);
    its run ``campaign.FAILING_RUN`` has the training fail on purpose."""
    if "bert" not in rehearsal_campaign.rehearsals:
        pytest.skip("bert is not rehearsed in this session")
    return rehearsal_campaign


def _processes(ran: campaign.Campaign, role: str, run: int = campaign.FAILING_RUN) -> list[dict]:
    flag = "--do_train" if role == "training" else "--do_eval"
    return [record for record in ran.ranks("bert", run) if flag in record["argv"]]


def test_a_failing_training_fails_the_job_without_waiting_for_the_evaluation(failing_training):
    ran = failing_training
    training = _processes(ran, "training")
    assert training and all(record["status"] == FAILED_ON_PURPOSE for record in training), ran.output[-2000:]
    result = ran.run_folder("bert", campaign.FAILING_RUN) / "result.txt"
    assert not result.exists(), f"the job hid its failed training:\n{ran.train_log('bert', campaign.FAILING_RUN)[-2000:]}"
    # the evaluation process was stopped with its training, not left to wait for a checkpoint that never comes
    waited = [record for record in _processes(ran, "evaluation") if "would wait until walltime" in record["problem"]]
    assert not waited, waited[0]["problem"]


def test_every_attempt_starts_with_an_empty_output_dir(failing_training):
    """Each training process checks --output_dir for checkpoints at its start (a retry of a failed attempt starts in an
    emptied run folder: tests/workflow/test_rehearsal.py::test_a_retried_run_starts_in_a_clean_run_folder)."""
    ran = failing_training
    training = _processes(ran, "training", run=0) + _processes(ran, "training")
    assert len(training) == 2
    for record in training:
        leftovers = [check for check in record["checked"] if check["what"].startswith("checkpoints in --output_dir")]
        assert leftovers and all(check["held"] for check in leftovers), (record["slurm"], leftovers)
