"""A campaign that can no longer pass (``mlperf_wf.results.doom``): what ``mlperf-wf status`` says first, the train job's
gate with ``stop_when_doomed``, and the GPU-hours the runs not started would spend, on constructed campaign folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.errors import ConfigError
from mlperf_wf.kinds import RunState, Verdict
from mlperf_wf.plan import plan as planning
from mlperf_wf.results import campaign_gate, compliance, doom, status
from tests.results.test_status import LORA, RUNS, finished_run, shutil_copy_config

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def non_converged(root: Path, index: int) -> None:
    """Run ``index`` finished without reaching the target, checked by the compliance job."""
    result = finished_run(root, index, 3.0, [(1024, 1.3), (2048, 1.1)], run_status="aborted")
    compliance.write(
        compliance.ComplianceResult(str(result), "6.1.0", "non_converged", 0, [], "test", sha256=compliance.file_sha256(result)),
        result.parent / "compliance.json",
    )


def passed(root: Path, index: int) -> None:
    result = finished_run(root, index, 2.0, [(1024, 1.2), (2048, 0.91)])
    compliance.write(
        compliance.ComplianceResult(str(result), "6.1.0", "passed", 0, [], "test", sha256=compliance.file_sha256(result)), result.parent / "compliance.json"
    )


def crashed(root: Path, index: int) -> None:
    """Run ``index``'s training job failed before writing a result (its log only)."""
    log = root / "logs/tiny/train" / LORA / f"{index}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("loading\nRuntimeError: CUDA out of memory (stand-in)\n")


def lora_status(root: Path, *overrides: str) -> status.BenchmarkStatus:
    config = status.load_config(root, ["runs=4", f"benchmarks=[{LORA}]", *overrides])
    return status.campaign_status(root, config, runs_given=True).benchmarks[0]


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    root = tmp_path / "campaign"
    shutil_copy_config(root)
    return root


def test_the_olympic_allowance_used_up_dooms_the_set_and_status_says_so_first_with_why(campaign):
    passed(campaign, 0)
    non_converged(campaign, 1)
    assert lora_status(campaign).doomed is None, "one non-converged run of 4: the olympic rule drops it"
    non_converged(campaign, 2)
    bench = lora_status(campaign)
    assert bench.doomed is not None
    assert bench.doomed["runs_not_started"] == [3]
    assert "the olympic rule's allowance is used up: runs 1, 2 failed or did not converge, at most 1 of 4 scored runs may" in bench.doomed["text"]
    assert bench.doomed["stopping"] is False and "stop_when_doomed is off: the 1 run (3) left would spend 0 GPU-hours" in bench.doomed["text"]
    config = status.load_config(campaign, ["runs=4", f"benchmarks=[{LORA}]"])
    lines = status.render(status.campaign_status(campaign, config, runs_given=True)).splitlines()
    assert lines[1].startswith(f"DOOMED {LORA}: can no longer pass: the olympic rule's allowance is used up"), lines[:3]


def test_a_training_job_that_crashed_before_its_result_is_made_again_not_counted(campaign):
    non_converged(campaign, 0)
    crashed(campaign, 1)
    bench = lora_status(campaign)
    assert [r.state for r in bench.runs][:2] == [RunState.NON_CONVERGED, RunState.FAILED]
    assert bench.doomed is None, "a crashed job has no verdict: its run is made again"


def test_a_forecast_below_doomed_below_dooms_the_set_and_zero_never_does():
    runs = [status.RunStatus(index=i, state=RunState.PASSED, verdict=Verdict.PASSED, verdict_from="compliance.json") for i in range(2)]
    runs += [status.RunStatus(index=i, state=RunState.NOT_STARTED) for i in (2, 3)]
    forecast = {"valid": 0.9, "rcp_pass": 0.04, "finished": 2, "required": 10, "basis": "2 of 10 runs finished"}
    assert doom.reasons(runs, 4, 1, forecast, 0.0) == []
    assert doom.reasons(runs, 4, 1, forecast, 0.04) == []
    (why,) = doom.reasons(runs, 4, 1, forecast, 0.05)
    assert why == "the forecast gives a set valid and passing the RCP check 4%, below doomed_below 5% (2 of 10 runs finished)"
    (why,) = doom.reasons(runs, 4, 1, {**forecast, "rcp_pass": None, "valid": 0.3}, 0.5)
    assert why.startswith("the forecast gives a set valid 30%, below doomed_below 50%")


def test_the_gpu_hours_of_the_runs_not_started_at_full_scale_from_the_walltime_then_the_finished_runs():
    config = status.load_config(ROOT, ["scale=full", "runs=10", f"benchmarks=[{LORA}]", "stop_when_doomed=true", f"full_geometry={{{LORA}: {{nodes: 2}}}}"])
    plan = planning.load(config, project_root=ROOT)
    runs = [status.RunStatus(index=i, state=RunState.NON_CONVERGED, verdict=Verdict.NON_CONVERGED, verdict_from="compliance.json") for i in range(2)]
    runs += [status.RunStatus(index=2, state=RunState.RUNNING)]
    runs += [status.RunStatus(index=i, state=RunState.NOT_STARTED) for i in range(3, 10)]
    made = doom.doom_of(plan, LORA, runs, 10, 1, None, None)
    assert made is not None and made.stopping
    # 7 runs x 2 nodes x 8 GPUs x the definition's 240-minute walltime; the running run is not counted
    assert (made.runs_not_started, made.gpus_per_run, made.hours_per_run, made.gpu_hours) == (tuple(range(3, 10)), 16, 4.0, 7 * 16 * 4.0)
    assert "stop_when_doomed: 7 runs (3, 4, 5, 6, 7, 8, 9) not started, 448 GPU-hours not spent (7 x 16 GPUs x 4 h, the planned walltime)" in made.text()
    made = doom.doom_of(plan, LORA, runs, 10, 1, None, 90.0)
    assert made.gpu_hours == 7 * 16 * 1.5 and "the finished runs' mean" in made.text()


def test_doomed_below_out_of_range_is_one_line_naming_the_key():
    with pytest.raises(ConfigError, match="doomed_below"):
        status.load_config(ROOT, ["doomed_below=1.5"])


def gate(root: Path, run: int, stop: bool) -> subprocess.CompletedProcess:
    config = status.load_config(root, ["runs=4", f"benchmarks=[{LORA}]", f"stop_when_doomed={str(stop).lower()}"])
    record = root / "logs/tiny/campaign_config.json"
    doom.record_config(config, record)
    argv = [sys.executable, "-m", "mlperf_wf", "--root", str(root), "campaign-gate", "--benchmark", LORA, "--run", str(run), "--config-file", str(record)]
    return subprocess.run(argv, capture_output=True, text=True, env=ENV, check=False)


def test_the_gate_lets_a_run_start_while_the_set_can_pass_and_stops_it_once_it_cannot(campaign):
    non_converged(campaign, 0)
    proc = gate(campaign, 2, stop=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "can still be valid" in proc.stdout
    non_converged(campaign, 1)
    proc = gate(campaign, 2, stop=False)
    assert (proc.returncode, proc.stdout.strip()) == (0, f"{LORA} run 2: stop_when_doomed is off")
    proc = gate(campaign, 2, stop=True)
    assert proc.returncode == doom.EXIT_NOT_STARTED, proc.stderr[-2000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith(f"{doom.NOT_STARTED}: {LORA}: the olympic rule's allowance is used up")
    assert "not started, 0 GPU-hours not spent" in line


def test_a_run_the_gate_stopped_is_not_started_never_failed_and_the_finished_runs_stay(campaign):
    non_converged(campaign, 0)
    non_converged(campaign, 1)
    finished = {path: path.read_bytes() for path in (campaign / RUNS).rglob("*") if path.is_file()}
    proc = gate(campaign, 2, stop=True)
    log = campaign / "logs/tiny/train" / LORA / "2.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(proc.stdout)  # what the train rule writes to the job's log
    bench = lora_status(campaign, "stop_when_doomed=true")
    assert [r.state for r in bench.runs] == [RunState.NON_CONVERGED, RunState.NON_CONVERGED, RunState.NOT_STARTED, RunState.NOT_STARTED]
    assert bench.runs[2].problems == [proc.stdout.strip().removeprefix("not started: ")]
    assert bench.validity.not_counting == 2 and bench.doomed["runs_not_started"] == [2, 3]
    assert {path: path.read_bytes() for path in (campaign / RUNS).rglob("*") if path.is_file()} == finished
    assert not (campaign / RUNS / "2").exists()


def test_the_plan_puts_the_gate_first_only_with_stop_when_doomed():
    config = status.load_config(ROOT, ["runs=2", f"benchmarks=[{LORA}]"])
    assert planning.load(config, project_root=ROOT).of(LORA).campaign_gate(1) == ""
    config = status.load_config(ROOT, ["runs=2", f"benchmarks=[{LORA}]", "stop_when_doomed=true"])
    line = planning.load(config, project_root=ROOT).of(LORA).campaign_gate(1)
    assert line == f"mlperf-wf campaign-gate --benchmark {LORA} --run 1 --config-file logs/tiny/campaign_config.json || exit $?; "


def test_cancel_pending_cancels_only_this_benchmarks_pending_train_runs_of_this_campaign(tmp_path, monkeypatch):
    """A stand-in squeue lists the campaign's jobs (and another folder's); a stand-in scancel records what it is given."""
    root = tmp_path / "campaign"
    root.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    comment = status.slurm_comment
    listing = [
        f"11|PENDING|{comment('train', LORA, 3)}|{root}|Resources",
        f"12|RUNNING|{comment('train', LORA, 2)}|{root}|None",
        f"13|PENDING|{comment('train', 'rgat', 3)}|{root}|Resources",
        f"14|PENDING|{comment('train', LORA, 3)}|{tmp_path}|Resources",
        f"15|PENDING|{comment('check_compliance', LORA, 1)}|{root}|Dependency",
        f"16|PENDING|{comment('train', LORA, 4)}|{root}|Priority",
    ]
    (bin_dir / "squeue").write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(listing) + "\nEOF\n")
    (bin_dir / "scancel").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "cancelled"}\n')
    for name in ("squeue", "scancel"):
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert campaign_gate.cancel_pending(root, LORA, (2, 3, 4), own_job="12") == {3: "11", 4: "16"}
    assert (tmp_path / "cancelled").read_text().split() == ["11", "16"]


def test_the_recorded_config_is_written_whole_and_read_back(tmp_path):
    config = status.load_config(ROOT, ["stop_when_doomed=true", "doomed_below=0.1"])
    path = doom.record_config(config, tmp_path / "logs/tiny/campaign_config.json")
    assert json.loads(path.read_text()) == config
    assert [p.name for p in path.parent.iterdir()] == ["campaign_config.json"]


def test_a_cancelled_run_s_log_says_it_was_not_started_unless_its_job_wrote_one(tmp_path):
    log = tmp_path / "logs/tiny/train" / LORA / "3.log"
    campaign_gate.mark_cancelled(log, f"{doom.NOT_STARTED}: {LORA}: cancelled")
    assert doom.stopped_line(log) == f"{doom.NOT_STARTED}: {LORA}: cancelled"
    log.write_text("loading\n")  # the job started after all
    campaign_gate.mark_cancelled(log, f"{doom.NOT_STARTED}: {LORA}: cancelled")
    assert log.read_text() == "loading\n"
    log.write_text("")  # what Snakemake leaves for a job that wrote no log
    campaign_gate.mark_cancelled(log, f"{doom.NOT_STARTED}: {LORA}: cancelled")
    assert doom.stopped_line(log) is not None


def test_from_a_compute_node_the_gate_counts_squeue_s_running_runs_as_running_and_cancels_the_pending_one(campaign, tmp_path):
    """Five runs: 0 and 1 did not converge, 2 runs (started in Snakemake's records, RUNNING in squeue; no Snakemake on
    this host, as on a compute node), 3 is this job's own, 4 is pending: the gate stops 3, cancels 4 and names both."""
    from tests.results.test_status import mark_started

    non_converged(campaign, 0)
    non_converged(campaign, 1)
    mark_started(campaign, f"{RUNS}/2/result.txt", "12")
    comment = status.slurm_comment
    listing = [f"12|RUNNING|{comment('train', LORA, 2)}|{campaign}|None", f"13|RUNNING|{comment('train', LORA, 3)}|{campaign}|None"]
    listing.append(f"14|PENDING|{comment('train', LORA, 4)}|{campaign}|Resources")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(listing) + "\nEOF\n")
    (bin_dir / "scancel").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "cancelled"}\n')
    for name in ("squeue", "scancel"):
        (bin_dir / name).chmod(0o755)
    config = status.load_config(campaign, ["runs=5", f"benchmarks=[{LORA}]", "stop_when_doomed=true"])
    record = doom.record_config(config, campaign / "logs/tiny/campaign_config.json")
    argv = [sys.executable, "-m", "mlperf_wf", "--root", str(campaign), "campaign-gate", "--benchmark", LORA, "--run", "3", "--config-file", str(record)]
    env = {**ENV, "PATH": f"{bin_dir}{os.pathsep}{ENV['PATH']}", "SLURM_JOB_ID": "13"}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == doom.EXIT_NOT_STARTED, proc.stderr[-2000:]
    line = proc.stdout.strip()
    assert "stop_when_doomed: 2 runs (3, 4) not started" in line and line.endswith("; cancelled pending SLURM jobs 14 (run 4)"), line
    assert (tmp_path / "cancelled").read_text().split() == ["14"]
    cancelled = doom.stopped_line(campaign / "logs/tiny/train" / LORA / "4.log")
    assert cancelled.startswith(f"{doom.NOT_STARTED}: {LORA}: SLURM job 14 cancelled while pending by run 3's train job: ")
