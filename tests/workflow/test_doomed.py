"""A tiny campaign that can no longer pass, through Snakemake's local executor with ``stop_when_doomed``: its runs cannot
converge (two steps at a learning rate that wrecks the model), so once two of three have not converged the third job
ends at its gate, not started; the workflow ends, the finished runs stay as they were, and ``mlperf-wf status`` says
why first; it names the command that writes the report, and that next invocation starts no train job and writes the
report from the finished runs: the runs not started, the GPU-hours not spent, no score, as status and score say it.
The same campaign through SLURM, with a pending job cancelled: ``tests/workflow/test_slurm.py``."""

from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from mlperf_wf.results import doom
from tests.workflow.test_workflow import SNAKEFILE, new_workdir, snakemake

ROOT = Path(__file__).resolve().parents[2]
LORA = "llama2_70b_lora"
RUNS = f"results/tiny/{LORA}/runs"
DOOMED = ["stop_when_doomed=true", f"tiny_hyperparameters={{{LORA}: {{max_steps: 2, learning_rate: 0.2}}}}"]
"""Runs that stop after two optimizer steps (one evaluation) at a learning rate that wrecks the adapted model: none
converges, whatever the tiny base. (Two steps at the reference's rate were not enough: on some CPUs' kernels the tiny
base is good enough that two steps of LoRA reach the target.)"""


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


def score(workdir: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "mlperf_wf", "score", str(workdir / f"results/tiny/{LORA}")]
    return subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=False)


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
    # the invocation names the command that writes the report: the same one again
    args = ["-s", str(SNAKEFILE), "-d", str(workdir), "--cores", "1", "--config", *config]
    report_file = workdir / f"results/tiny/{LORA}/report.json"
    assert not report_file.exists()
    said = f"Its report (results/tiny/{LORA}/report.json) is written from the finished runs by the next invocation, which starts none of the runs not started: "
    assert f"{said}{shlex.join(['snakemake', *args])}" in output, output[-4000:]
    # the next invocation leaves the finished runs as they are, starts no train job and writes the report
    before = finished_files(workdir, finished)
    stopped_log = workdir / f"logs/tiny/train/{LORA}/{left}.log"
    log_before = (stopped_log.read_bytes(), stopped_log.stat().st_mtime_ns)
    dry = snakemake(workdir, "--cores", "1", "-n", "--config", *config)
    planned = dry.stdout + dry.stderr
    assert "report" in planned and not any(line.split()[:1] == ["train"] for line in planned.splitlines()), planned[-4000:]
    proc = snakemake(workdir, "--cores", "1", "--config", *config, check_rc=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert f"mlperf-wf: {LORA} can no longer pass: " in output and f"making none of runs {left}; results/tiny/{LORA}/report.json is written" in output
    assert stopped_and_finished(workdir, 3) == (stopped, finished)
    after = finished_files(workdir, finished)
    assert {path: after.get(path) for path in before} == before, "a finished run's files are left as they are"
    # what the first invocation, stopped, had not made yet: a finished run's compliance check, which the report reads
    assert {Path(path).name for path in set(after) - set(before)} <= {"compliance.json"}, sorted(set(after) - set(before))
    assert (stopped_log.read_bytes(), stopped_log.stat().st_mtime_ns) == log_before, "no train job ran for the run not started"
    assert not (workdir / RUNS / str(left)).exists()
    made = json.loads(report_file.read_text())
    assert [run["index"] for run in made["runs"]] == finished
    assert made["doomed"]["runs_not_started"] == [left] and made["doomed"]["gpu_hours"] == 0.0
    assert made["doomed"]["hours_from"] == "the finished runs' mean; tiny runs use no GPU"
    assert made["score"]["time_to_train_minutes"] is None and made["valid_submission"] is False
    reason = made["valid_submission_reasons"][0]
    assert reason.startswith("the required set can no longer pass: the olympic rule's allowance is used up: runs ")
    assert f"stop_when_doomed: 1 run ({left}) not started, 0 GPU-hours not spent" in reason
    # status and score give the report's verdict, and the summary and the package carry it
    (row,) = [row for row in csv.DictReader((workdir / "results/tiny/summary.csv").open()) if row["benchmark"] == LORA]
    assert row["valid_submission"] == "False" and row["time_to_train_minutes"] == "" and reason in row["reasons"], row
    (check,) = sorted((workdir / "results/tiny/submission").glob("*/package_check.json"))
    assert f"{LORA}: {reason}" in json.loads(check.read_text())["not_valid_because"]
    text = status_text(workdir, "runs=3", *DOOMED)
    assert text.splitlines()[1].startswith(f"DOOMED {LORA}: can no longer pass: "), text
    assert "report.json: time to train " in text and f", 3 runs, 1 of them not started, not a valid submission: {reason}" in text, text
    scored = score(workdir)
    assert scored.returncode == 1 and f"no score, 2 runs INVALID: {reason}" in scored.stdout, scored.stdout + scored.stderr[-2000:]
    # and it stays so: nothing left to do
    proc = snakemake(workdir, "--cores", "1", "-n", "--config", *config)
    assert "Nothing to be done" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
