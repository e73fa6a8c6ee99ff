"""bert's launch line (``full.command``: training and evaluation side by side, watched by the shell) run by bash with
stand-ins for the two ``run_pretraining.py`` processes: how the job ends when training ends.

The evaluation process loops until it scores a checkpoint at ``--num_train_steps`` (run_pretraining.py:617-642). In a
rehearsal (``MLPERF_WF_REHEARSAL_STEPS``) the hook ends training with status 0 after a few steps, long before that
checkpoint: the job must then stop the evaluation and end with 0 at once, not wait for it until walltime.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.plan.test_plan import make_plan, workdir  # noqa: F401 - the fixture

PINNED = {"image": "registry.example:5000/mlperf/bert:ref-1", "digest": "sha256:" + "ab" * 32}

# run_pretraining.py's stand-in: training leaves a checkpoint and ends with $TRAINING_STATUS after a moment; the
# evaluation never sees its last checkpoint (it would wait until walltime) and notes that it was stopped.
STAND_IN = """#!/bin/bash
output_dir=$(printf '%s\\n' "$@" | sed -n 's/^--output_dir=//p')
if printf '%s\\n' "$@" | grep -qx -- --do_train; then
  mkdir -p "$output_dir" && touch "$output_dir/model.ckpt-0.index"
  sleep 0.5
  exit "$TRAINING_STATUS"
fi
trap 'echo stopped > "$output_dir/../evaluation-stopped"; exit 143' TERM
while true; do sleep 0.1; done
"""


def _launch(work: Path, tmp_path: Path, env: dict[str, str]) -> subprocess.Popen:
    """The rehearsal job's own command (the plan's, on the host: ``{results}`` is ``tmp_path/results``)."""
    plan = make_plan(work, scale="full", launcher="docker", full_container={"bert": PINNED})
    spec = plan.of("bert").rehearsal_spec(3)
    assert spec.process.env["MLPERF_WF_REHEARSAL_STEPS"] == "3"
    command = spec.process.command[-1].replace("/results", str(tmp_path / "results"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(STAND_IN)
    (bin_dir / "python3").chmod(0o755)
    (tmp_path / "results").mkdir()
    full_env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": "0,1", **env}
    return subprocess.Popen(
        ["bash", "-c", command], env=full_env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def _end(job: subprocess.Popen) -> None:
    """The job's shell and every process it started (a stand-in left waiting would run on)."""
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    job.wait(timeout=30)


def _finished(folder: Path, tmp_path: Path, env: dict[str, str]) -> tuple[int, str]:
    """The launch line's exit status and output, within 30 s."""
    job = _launch(folder, tmp_path, env)
    try:
        output, _ = job.communicate(timeout=30)
    finally:
        _end(job)
    return job.returncode, output


def test_in_a_rehearsal_the_job_ends_with_its_stopped_training_and_stops_the_evaluation(workdir, tmp_path):  # noqa: F811
    started = time.monotonic()
    status, output = _finished(workdir, tmp_path, {"MLPERF_WF_REHEARSAL_STEPS": "3", "TRAINING_STATUS": "0"})
    assert status == 0, output
    assert time.monotonic() - started < 15  # the shell looks every 5 s
    assert (tmp_path / "results" / "evaluation-stopped").exists(), "the evaluation process was not stopped"
    assert not list((tmp_path / "results").glob("run_0/model.ckpt-*")), "the rehearsal's checkpoints are left behind"


def test_a_rehearsal_whose_training_fails_fails(workdir, tmp_path):  # noqa: F811
    status, output = _finished(workdir, tmp_path, {"MLPERF_WF_REHEARSAL_STEPS": "3", "TRAINING_STATUS": "3"})
    assert status == 3, output


def test_in_a_campaign_run_the_job_waits_for_the_evaluation_after_training(workdir, tmp_path):  # noqa: F811
    job = _launch(workdir, tmp_path, {"TRAINING_STATUS": "0"})
    try:
        time.sleep(8)
        assert job.poll() is None, "the job ended before its evaluation reached the last checkpoint"
    finally:
        _end(job)
