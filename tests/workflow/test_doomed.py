"""A tiny campaign that can no longer pass, through Snakemake's local executor with ``stop_when_doomed``: its runs cannot
converge (a two-step budget), so once two of three have not converged the third job ends at its gate, not started; the
workflow ends, the finished runs stay as they were, and ``mlperf-wf status`` says why first. The same campaign through
SLURM, with a pending job cancelled: ``tests/workflow/test_slurm.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mlperf_wf.results import doom
from tests.workflow.test_workflow import new_workdir, snakemake

ROOT = Path(__file__).resolve().parents[2]
LORA = "llama2_70b_lora"
RUNS = f"results/tiny/{LORA}/runs"
DOOMED = ["stop_when_doomed=true", f"tiny_hyperparameters={{{LORA}: {{max_steps: 2}}}}"]
"""Runs that stop after two optimizer steps, far from the target: none converges."""


def stopped_and_finished(workdir: Path, runs: int) -> tuple[list[int], list[int]]:
    """The runs whose train job its gate stopped, and the runs that finished with a result."""
    stopped = [i for i in range(runs) if doom.stopped_line(workdir / f"logs/tiny/train/{LORA}/{i}.log")]
    finished = [i for i in range(runs) if (workdir / RUNS / str(i) / "result.txt").is_file()]
    return stopped, finished


def status_text(workdir: Path, *config: str) -> str:
    argv = [sys.executable, "-m", "mlperf_wf", "--root", str(workdir), "status", "--config", *config]
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def finished_files(workdir: Path, runs: list[int]) -> dict[str, tuple[bytes, int]]:
    return {
        str(path.relative_to(workdir)): (path.read_bytes(), path.stat().st_mtime_ns)
        for run in runs
        for path in sorted((workdir / RUNS / str(run)).rglob("*"))
        if path.is_file()
    }


def test_a_campaign_that_can_no_longer_pass_stops_before_its_last_run_and_says_why(tmp_path, tiny_mirrors):
    workdir = tiny_mirrors.seed(new_workdir(tmp_path / "doomed"), LORA)
    config = ["runs=3", *DOOMED]
    # one core: one run at a time, so that two have finished when the third asks
    proc = snakemake(workdir, "--cores", "1", "--config", *config, check_rc=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, "a campaign stopped before its last run is not a finished workflow"
    stopped, finished = stopped_and_finished(workdir, 3)
    assert len(stopped) == 1 and len(finished) == 2, f"stopped {stopped}, finished {finished}\n{output[-4000:]}"
    (left,) = stopped
    log = (workdir / f"logs/tiny/train/{LORA}/{left}.log").read_text()
    assert log.strip().splitlines() == [doom.stopped_line(workdir / f"logs/tiny/train/{LORA}/{left}.log")], "the stopped run never trained"
    assert not (workdir / RUNS / str(left) / "result.txt").exists()
    text = status_text(workdir, "runs=3", *DOOMED)
    first = text.splitlines()[1]
    assert first.startswith(f"DOOMED {LORA}: can no longer pass: the olympic rule's allowance is used up: runs "), text
    assert f"stop_when_doomed: 1 run ({left}) not started, 0 GPU-hours not spent" in first, text
    assert f"run {left}: {doom.NOT_STARTED}: {LORA}: the olympic rule's allowance is used up" in text, text
    # the next invocation leaves the finished runs as they are and does not start the last one either
    before = finished_files(workdir, finished)
    proc = snakemake(workdir, "--cores", "1", "--config", *config, check_rc=False)
    assert proc.returncode != 0
    assert stopped_and_finished(workdir, 3) == (stopped, finished)
    assert finished_files(workdir, finished) == before
