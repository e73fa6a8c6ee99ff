"""``mlperf-wf status`` on constructed campaign folders: runs finished, running with a partial log, failed, non-converged,
interrupted, queued (also in a stand-in squeue), shards half made; and that a status call leaves the folder byte-identical."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlperf_wf.kinds import RunState
from mlperf_wf.plan import plan as planning
from mlperf_wf.results import compliance, scoring, snakemake_state, status
from mlperf_wf.run import identity
from tests.mllogs import T0, write_lora_log

ROOT = Path(__file__).resolve().parents[2]
LORA = "llama2_70b_lora"
RUNS = f"results/tiny/{LORA}/runs"


@functools.cache
def campaign_plan() -> planning.Plan:
    config = status.load_config(ROOT, ["runs=5", f"benchmarks=[{LORA}, rgat]"])
    return planning.load(config, project_root=ROOT)


@pytest.fixture(scope="module")
def plan() -> planning.Plan:
    return campaign_plan()


def mark_started(root: Path, output: str, job_id: str | None = None) -> None:
    """What Snakemake writes when it starts the job making ``output`` (its incomplete marker)."""
    marker = root / ".snakemake/incomplete" / base64.urlsafe_b64encode(output.encode()).decode()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"external_jobid": job_id}))


def hold_lock(root: Path, outputs: list[str]) -> None:
    """What a running Snakemake holds: its output lock listing what it will make."""
    (root / ".snakemake/locks").mkdir(parents=True, exist_ok=True)
    (root / ".snakemake/locks/0.output.lock").write_text("\n".join(outputs) + "\n")
    (root / ".snakemake/locks/0.input.lock").write_text("resources/tiny/prepared/llama2_70b_lora/dataset\n")


def finished_run(root: Path, index: int, minutes: float, evals: list[tuple[int, float]], run_status: str = "success") -> Path:
    result = write_lora_log(
        root / RUNS / str(index) / "result.txt", seed=1234 + index, minutes=minutes, evals=evals, status=run_status, start_ms=T0 + index * 3_600_000
    )
    made_with = identity.CampaignIdentity(config=identity.config_of(campaign_plan(), LORA))  # as its train job records it
    (result.parent / "provenance.json").write_text(json.dumps({"scale": "tiny", "launcher": "local", **identity.provenance_fields(made_with)}))
    return result


@contextlib.contextmanager
def live_snakemake(root: Path):
    """A process status takes for a Snakemake working in ``root`` (a script named snakemake, given ``-d root``),
    as long as the block runs: a lock with no Snakemake behind it is stale."""
    fake = root.parent / "fake_bin" / "snakemake"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text("import time\ntime.sleep(600)\n")
    process = subprocess.Popen([sys.executable, str(fake), "-d", str(root)])
    try:
        for _ in range(100):
            if snakemake_state.snakemake_running_in(root):
                break
            time.sleep(0.05)
        yield process
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def campaign(tmp_path: Path):
    """Five runs of llama2_70b_lora mid-campaign: 0 passed (checked), 1 did not converge (checked), 2's training
    failed, 3 is running (a partial log: two evaluations, no run_stop), 4 is queued; rgat's shards half made."""
    root = tmp_path / "campaign"
    shutil_copy_config(root)
    passed = finished_run(root, 0, 2.0, [(1024, 1.2), (2048, 0.91)])
    checked = compliance.ComplianceResult(str(passed), "6.1.0", "passed", 0, [], "test", sha256=compliance.file_sha256(passed))
    compliance.write(checked, passed.parent / "compliance.json")
    aborted = finished_run(root, 1, 3.0, [(1024, 1.3), (2048, 1.1)], run_status="aborted")
    checked = compliance.ComplianceResult(str(aborted), "6.1.0", "non_converged", 0, [], "test", sha256=compliance.file_sha256(aborted))
    compliance.write(checked, aborted.parent / "compliance.json")
    train_logs = root / "logs/tiny/train" / LORA
    train_logs.mkdir(parents=True)
    (train_logs / "2.log").write_text("loading\nRuntimeError: CUDA out of memory (stand-in)\n")
    full = write_lora_log(root / "scratch.txt", seed=1237, minutes=1.0, evals=[(1024, 1.25), (2048, 1.05), (3072, 0.9)], start_ms=T0 + 3 * 3_600_000)
    lines = full.read_text().splitlines()
    cut = max(i for i, line in enumerate(lines) if '"samples_count": 2048' in line and "eval_accuracy" in line)
    (root / RUNS / "3").mkdir(parents=True)
    (root / RUNS / "3/result.txt").write_text("\n".join(lines[: cut + 1]) + '\n:::MLLOG {"namespace": "", "time_ms": 18')  # half-written line
    full.unlink()
    outputs = [f"{RUNS}/{i}/{name}" for i in (2, 3, 4) for name in ("result.txt", "provenance.json", "compliance.json")]
    hold_lock(root, [*outputs, f"results/tiny/{LORA}/report.json"])
    mark_started(root, f"{RUNS}/3/result.txt")
    mark_started(root, f"{RUNS}/3/provenance.json")
    for shard in ("csc__paper__cites__paper", "feat__paper"):
        (root / "resources/tiny/prepared/rgat/shards" / shard).mkdir(parents=True)
    mark_started(root, "resources/tiny/prepared/rgat/shards/labels")
    (root / "resources/tiny/prepared/rgat/shards/labels").mkdir()
    os.utime(train_logs / "2.log", (os.path.getmtime(root / ".snakemake/locks/0.output.lock") + 5,) * 2)
    report_failed(root, f"{RUNS}/2/result.txt", f"{RUNS}/2/provenance.json")
    with live_snakemake(root):
        yield root


def report_failed(root: Path, *outputs: str) -> None:
    """What the running Snakemake writes to its log when a job fails."""
    log = root / ".snakemake/log/2026-12-02T000000.000000.snakemake.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    block = f"[Wed Dec  2 00:00:05 2026]\nError in rule train:\n    jobid: 3\n    output: {', '.join(outputs)}\n    log: logs/tiny/train/2.log\n"
    log.write_text((log.read_text() if log.exists() else "") + block)


def shutil_copy_config(root: Path) -> None:
    import shutil

    root.mkdir(parents=True)
    shutil.copytree(ROOT / "config", root / "config")


def tree_snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with its bytes (files), target (links) and mtime."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            info = path.lstat()
            content = path.read_bytes() if path.is_file() and not path.is_symlink() else os.readlink(path) if path.is_symlink() else None
            found[str(path.relative_to(root))] = (content, info.st_mtime_ns, info.st_mode)
    return found


def test_each_run_state_from_the_files_snakemake_and_the_runs_write(campaign, plan):
    now = (T0 + 3 * 3_600_000) / 1000 + 300
    result = status.campaign_status(campaign, {}, [LORA, "rgat"], runs_given=True, plan=plan, now=now)
    lora, rgat = result.benchmarks
    assert [r.state for r in lora.runs] == ["passed", "non_converged", "failed", "running", "queued"]
    assert lora.counts == {"passed": 1, "non_converged": 1, "failed": 1, "running": 1, "queued": 1, "interrupted": 0, "not_started": 0} | {
        "refused": 0,
        "missing": 0,
    }
    passed, aborted, failed, running, _ = lora.runs
    assert passed.verdict_from == "compliance.json" and passed.minutes == pytest.approx(2.0)
    assert aborted.verdict == "non_converged" and aborted.minutes is None and aborted.reached_target is False
    assert "CUDA out of memory" in failed.problems[0]
    # the running run: its last complete evaluation, where it was, against the target; minutes since its first line
    assert (running.last_eval, running.progress_key, running.progress, running.evals) == (1.05, "samples_count", 2048, 2)
    assert running.reached_target is False and not running.initialising
    assert running.elapsed_minutes == pytest.approx(5.0, abs=0.01)
    # two finished runs (wall 3.0 and 4.0 min, initialisation included) give the estimate
    assert lora.mean_run_minutes == pytest.approx((2.0 + 3.0) / 2 + 1 / 60, abs=0.01)
    assert lora.remaining_run_minutes == pytest.approx(lora.mean_run_minutes + 0.0, abs=0.01)  # queued one; the running one is past the mean
    assert not lora.validity.can_still_be_valid and "INVALID: 2 runs" in lora.validity.message
    assert rgat.preparation.done == ["csc__paper__cites__paper", "feat__paper"]
    assert rgat.preparation.running == ["labels"] and "split" in rgat.preparation.left
    text = status.render(result)
    assert "run 3: running 5.00 min, last eval 1.05 at samples_count 2048 (target <= 0.925)" in text
    assert "2/" in text and "shards done, making labels" in text


def test_a_run_whose_job_made_its_log_before_snakemake_marked_it_is_starting_not_failed(campaign, plan):
    """The local executor starts the job's shell (which creates the run's log) before Snakemake writes the job's
    incomplete marker: a log without a marker, while Snakemake runs and has reported no failure of the job, is a
    run starting for a few seconds (``status.STARTING_SECONDS``: Snakemake under --quiet reports none)."""
    log = campaign / "logs/tiny/train" / LORA / "4.log"
    log.write_text("")
    lora = status.campaign_status(campaign, {}, [LORA], runs_given=True, plan=plan).benchmarks[0]
    starting = lora.runs[4]
    assert starting.state == "running" and starting.initialising and not starting.problems
    assert "run 4: running" in status.render(status.campaign_status(campaign, {}, [LORA], runs_given=True, plan=plan))
    later = log.stat().st_mtime + status.STARTING_SECONDS + 1
    assert status.campaign_status(campaign, {}, [LORA], runs_given=True, plan=plan, now=later).benchmarks[0].runs[4].state == "failed"
    report_failed(campaign, f"{RUNS}/4/result.txt", f"{RUNS}/4/provenance.json")
    assert status.campaign_status(campaign, {}, [LORA], runs_given=True, plan=plan).benchmarks[0].runs[4].state == "failed"


def test_without_a_lock_a_started_run_is_interrupted_and_nothing_is_queued(campaign, plan):
    for lock in (campaign / ".snakemake/locks").iterdir():
        lock.unlink()
    lora = status.campaign_status(campaign, {}, [LORA], runs_given=True, plan=plan).benchmarks[0]
    assert [r.state for r in lora.runs] == ["passed", "non_converged", "failed", "interrupted", "not_started"]


def test_a_run_the_compliance_job_has_not_checked_is_scored_as_the_report_will(campaign, plan):
    (campaign / RUNS / "0/compliance.json").unlink()
    (campaign / "logs/tiny/check_compliance" / LORA).mkdir(parents=True)
    lora = status.campaign_status(campaign, {}, [LORA], runs_given=True, plan=plan).benchmarks[0]
    scored = scoring.score_file(str(campaign / RUNS / "0/result.txt"), "6.1.0")
    assert (lora.runs[0].verdict, lora.runs[0].verdict_from, lora.runs[0].minutes) == (scored.verdict, "scored here", scored.minutes)


def test_a_run_made_with_other_hyperparameters_is_refused_by_name_as_the_report_refuses_it(campaign, plan):
    """Run 0's folder copied in from a campaign made with another learning rate: status fails it with the report's line."""
    made_with = campaign / RUNS / "0/provenance.json"
    record = json.loads(made_with.read_text())
    record["config"]["hyperparameters"]["learning_rate"] = 0.0002
    made_with.write_text(json.dumps(record))
    lora = status.campaign_status(campaign, {}, [LORA], runs_given=True, plan=plan).benchmarks[0]
    line = f"{RUNS}/0/provenance.json: config.hyperparameters.learning_rate 0.0002, the campaign's is 0.0004 (results/tiny/{LORA}/identity.json)"
    assert (lora.runs[0].state, lora.runs[0].verdict, lora.runs[0].problems[0]) == ("refused", "failed", line)
    assert lora.counts["passed"] == 0
    # the report, made from the identity file the workflow writes, names the run with the same line
    expected = campaign / f"results/tiny/{LORA}/identity.json"
    identity.write_expected(identity.expected(plan, LORA), expected)
    records = {f"{RUNS}/{i}/provenance.json": identity.read_provenance(campaign / RUNS / str(i) / "provenance.json") for i in (0, 1)}
    found = identity.problems_by_run(records, identity.read_expected(expected), f"results/tiny/{LORA}/identity.json")
    assert found[f"{RUNS}/0/provenance.json"] == [line] and found[f"{RUNS}/1/provenance.json"] == []


def test_squeue_names_queued_and_running_slurm_jobs_and_its_absence_is_said(campaign, plan, tmp_path):
    mark_started(campaign, f"{RUNS}/3/result.txt", job_id="41")
    mark_started(campaign, f"{RUNS}/4/result.txt", job_id="42")
    # Stand-in for SLURM's squeue (tests only): prints what `squeue -h -o '%i|%T|%k|%Z|%r'` prints for these jobs.
    stand_in = tmp_path / "squeue-stand-in"
    rows = [
        f"41|RUNNING|{status.slurm_comment('train', LORA, 3)}|{campaign}|None",
        f"42|PENDING|{status.slurm_comment('train', LORA, 4)}|{campaign}|Resources",
        f"43|RUNNING|{status.slurm_comment('train', LORA, 0)}|/elsewhere|None",
    ]
    stand_in.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(rows) + "\nEOF\n")
    stand_in.chmod(0o755)
    result = status.campaign_status(campaign, {}, [LORA], runs_given=True, squeue=str(stand_in), plan=plan)
    runs = result.benchmarks[0].runs
    assert (runs[3].state, runs[3].scheduler_state, runs[4].state, runs[4].scheduler_state) == ("running", "RUNNING", "queued", "PENDING")
    assert result.scheduler == {"source": "squeue", "jobs": 2, "note": None}
    assert "[SLURM 42: PENDING]" in status.render(result)
    absent = status.campaign_status(campaign, {}, [LORA], runs_given=True, squeue=str(tmp_path / "no-squeue"), plan=plan)
    assert absent.scheduler["source"] == "none" and "not on PATH" in absent.scheduler["note"]
    assert [r.state for r in absent.benchmarks[0].runs][3:] == ["running", "running"]


@pytest.mark.parametrize(
    ("states", "required", "valid", "more", "words"),
    [
        (["passed", "non_converged", "running", "queued"], 10, True, 0, "one more non-converged or failed run would make it invalid"),
        (["passed", "passed", "running", "queued"], 10, True, 1, "can still be valid: 1 more"),
        (["non_converged", "failed", "running"], 10, False, 0, "INVALID: 2 runs"),
        # M > N: 5 runs for 3 required, the window closest to the median is scored: valid while most windows are
        (["non_converged", "passed", "failed", "passed", "running"], 3, True, 0, "one more"),
        (["non_converged", "passed", "passed", "failed", "running"], 3, True, 1, "whatever the 1 unfinished runs do"),
        (["non_converged", "failed", "passed", "failed", "passed"], 3, False, None, "INVALID"),
        (["passed", "passed", "passed", "passed", "passed"], 3, True, None, "valid run count"),
    ],
)
def test_set_validity_follows_the_olympic_rule(states, required, valid, more, words):
    verdict = status.set_validity(states, required, may_drop=1)
    assert (verdict.can_still_be_valid, verdict.more_allowed) == (valid, more)
    assert words in verdict.message


def test_the_command_changes_nothing_and_prints_json(campaign):
    before = tree_snapshot(campaign)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    argv = [sys.executable, "-m", "mlperf_wf", "--root", str(campaign), "status", "--json", "--config", "runs=5", "--benchmark", LORA]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert tree_snapshot(campaign) == before, "status wrote, moved or touched something"
    shown = json.loads(proc.stdout)
    assert [r["state"] for r in shown["benchmarks"][0]["runs"]] == ["passed", "non_converged", "failed", "running", "queued"]
    assert shown["snakemake"]["running"] is True


# ---- a real campaign, watched while Snakemake runs it ----


def watch_campaign(proc: subprocess.Popen, workdir: Path, overrides: list[str], timeout: float = 900) -> dict:
    """Poll the status of the campaign ``proc`` runs in ``workdir`` until it ends; run the command itself once while
    Snakemake holds its lock and a run shows an evaluation. Returns what was seen."""
    import time

    config = status.load_config(workdir, overrides)
    plan = planning.load(config, project_root=ROOT, workdir=workdir)
    seen: dict = {"running_with_eval": None, "states": set(), "command": None, "scheduler": set(), "forecasts": []}
    deadline = time.time() + timeout
    while proc.poll() is None and time.time() < deadline:
        now = status.campaign_status(workdir, config, runs_given=True, plan=plan)
        runs = now.benchmarks[0].runs
        forecast = now.benchmarks[0].forecast
        if forecast and (not seen["forecasts"] or seen["forecasts"][-1] != forecast):
            seen["forecasts"].append(forecast)
        seen["states"] |= {r.state for r in runs}
        seen["scheduler"] |= {r.scheduler_state for r in runs if r.scheduler_state}
        live = [r for r in runs if r.state == "running" and r.last_eval is not None]
        if live and seen["running_with_eval"] is None:
            seen["running_with_eval"] = live[0]
            locked_before = any((workdir / ".snakemake/locks").glob("*.lock"))
            argv = [sys.executable, "-m", "mlperf_wf", "--root", str(workdir), "status", "--json", "--config", *overrides]
            shown = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=False)
            locked_after = any((workdir / ".snakemake/locks").glob("*.lock"))
            seen["command"] = (shown.returncode, shown.stdout, shown.stderr, locked_before and locked_after)
        time.sleep(0.5)
    return seen


def assert_status_matches_the_report(workdir: Path, overrides: list[str], benchmark: str = LORA) -> status.BenchmarkStatus:
    """After the campaign: the status's runs, verdicts and minutes are the report's."""
    config = status.load_config(workdir, overrides)
    after = status.campaign_status(workdir, config, runs_given=True).benchmarks[0]
    report = json.loads((workdir / f"results/tiny/{benchmark}/report.json").read_text())
    assert after.runs_planned == len(report["runs"])
    assert [r.verdict for r in after.runs] == [r["compliance"] for r in report["runs"]]
    assert [r.minutes for r in after.runs] == [r["minutes"] for r in report["runs"]]
    assert [r.verdict_from for r in after.runs] == ["compliance.json"] * len(report["runs"])
    assert after.report["time_to_train_minutes"] == report["score"]["time_to_train_minutes"]
    assert after.preparation.left == [] and after.preparation.dataset_assembled
    assert after.remaining_run_minutes == 0 and after.minutes_so_far >= sum(r["minutes"] for r in report["runs"])
    return after


def run_watched(argv: list[str], workdir: Path, overrides: list[str], env: dict[str, str], log: Path, timeout: float = 900, **popen) -> dict:
    """Run the campaign ``argv`` (Snakemake) while :func:`watch_campaign` polls its status; fail with its output
    unless it succeeds. Returns what the status showed."""
    with log.open("w") as sink, subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, **popen) as proc:
        try:
            seen = watch_campaign(proc, workdir, overrides, timeout)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:  # past the timeout, or the watcher failed: stop the campaign as a timeout would
                proc.kill()
    seen["output"] = log.read_text()
    assert proc.returncode == 0, seen["output"][-5000:]
    return seen


def check_watched(seen: dict, workdir: Path, overrides: list[str], forecast_steps: int = 1) -> None:
    """What the status showed mid-campaign (a running run with an evaluation, the command itself while Snakemake
    held its lock) and after it (the report's runs, verdicts and minutes)."""
    live = seen["running_with_eval"]
    assert live is not None, f"no status showed a running run with an evaluation; states seen: {seen['states']}"
    assert live.progress_key == "samples_count" and live.progress > 0 and live.elapsed_minutes > 0
    returncode, stdout, stderr, locked = seen["command"]
    assert returncode == 0, stderr[-2000:]
    shown = json.loads(stdout)
    assert shown["snakemake"]["running"] is True or not locked
    assert {r["state"] for r in shown["benchmarks"][0]["runs"]} <= set(RunState)
    after = assert_status_matches_the_report(workdir, overrides)
    # the run seen running ended with at least the evaluations it showed
    assert after.runs[live.index].evals >= live.evals
    # the pass forecast followed the finished runs, and ends as the report's
    finished = [forecast["finished"] for forecast in seen["forecasts"]]
    assert finished == sorted(finished) and len(set(finished)) >= forecast_steps, seen["forecasts"]
    report = json.loads((workdir / f"results/tiny/{LORA}/report.json").read_text())
    assert {k: after.forecast[k] for k in ("valid", "rcp_pass", "finished")} == {k: report["forecast"][k] for k in ("valid", "rcp_pass", "finished")}


def test_a_benchmark_with_several_metrics_reaches_its_target_only_when_every_metric_does(tmp_path: Path):
    """stable_diffusion logs FID and CLIP as two eval_accuracy events; status reads each metric's last value."""
    from mlperf_wf.config.mlperf_rules import QualityTarget

    log = tmp_path / "result.txt"
    lines = [
        {"key": "run_start", "value": None, "time_ms": T0, "metadata": {}},
        {"key": "eval_accuracy", "value": 240.0, "time_ms": T0 + 1000, "metadata": {"metric": "FID", "samples_count": 2048}},
        {"key": "eval_accuracy", "value": 0.7, "time_ms": T0 + 1000, "metadata": {"metric": "CLIP", "samples_count": 2048}},
        {"key": "eval_accuracy", "value": 210.0, "time_ms": T0 + 2000, "metadata": {"metric": "FID", "samples_count": 4096}},
        {"key": "eval_accuracy", "value": 0.6, "time_ms": T0 + 2000, "metadata": {"metric": "CLIP", "samples_count": 4096}},
    ]
    log.write_text("".join(f":::MLLOG {json.dumps({**line, 'event_type': 'POINT_IN_TIME'})}\n" for line in lines))
    progress = status.read_progress(log)
    assert progress.last_by_metric == {"FID": 210.0, "CLIP": 0.6}
    targets = [QualityTarget("<=", 225.0, "FID"), QualityTarget(">=", 0.65, "CLIP")]
    assert status.reached(targets, progress.last_eval, progress.last_by_metric) is False  # FID met, CLIP not
    assert status.reached(targets, 0.7, {"FID": 210.0, "CLIP": 0.7}) is True
    assert status.reached(targets, None, {}) is None
    assert status.reached([QualityTarget("<=", 0.925)], 0.9, {}) is True


def test_the_nodes_a_node_check_excluded_are_shown_with_why(campaign, plan):
    from mlperf_wf.run import node_check

    excluded = campaign / plan.excluded_nodes_file()
    excluded.parent.mkdir(parents=True, exist_ok=True)
    node_check.verdict(campaign / "node-check-attempt", ["n1", "n2"], excluded)  # neither wrote a record
    try:
        result = status.campaign_status(campaign, {}, [LORA], runs_given=True, plan=plan)
        assert result.excluded_nodes == {"n1": "no record: its check did not start or did not end", "n2": "no record: its check did not start or did not end"}
        assert "excluded nodes (a node check named them; " in status.render(result)
    finally:
        excluded.unlink()
    assert "excluded nodes" not in status.render(status.campaign_status(campaign, {}, [LORA], runs_given=True, plan=plan))


def test_a_rehearsal_is_no_run_of_the_campaign_and_is_scored_nowhere(campaign, plan):
    """``mlperf-wf rehearse`` writes only under ``rehearsal/<benchmark>/``: a finished rehearsal (a converged log, its
    rank records) and one Snakemake is running are no run of the campaign, at either scale, for the status (runs,
    verdicts, forecast, score) or the report's inputs."""
    from mlperf_wf.plan.plan import REHEARSAL_ROOT

    scales = {scale: status.load_config(campaign, ["runs=5", f"scale={scale}"]) for scale in ("tiny", "full")}
    now = time.time()
    # the benchmark's runs, verdicts, forecast and score (the Snakemake process's own counts include the rehearsal's job)
    before = {
        scale: status.to_json(status.campaign_status(campaign, config, [LORA], runs_given=True, now=now))["benchmarks"] for scale, config in scales.items()
    }
    folder = campaign / REHEARSAL_ROOT / LORA
    write_lora_log(folder / "run" / "result.txt", seed=1233, minutes=1.0, evals=[(1024, 1.2), (2048, 0.91)], start_ms=T0)
    (folder / "run" / "rehearsal-ranks").mkdir()
    (folder / "run" / "rehearsal-ranks" / "rank-n1-1.json").write_text(json.dumps({"rank": 0, "status": 0, "steps": 3}))
    (folder / "job.log").write_text("mlperf-wf: page cache dropped on every node of the run (1)\n")
    target = f"{REHEARSAL_ROOT}/{LORA}/3-steps.done"
    mark_started(campaign, target)
    lock = campaign / ".snakemake/locks/0.output.lock"
    lock.write_text(lock.read_text() + target + "\n")
    after = {
        scale: status.to_json(status.campaign_status(campaign, config, [LORA], runs_given=True, now=now))["benchmarks"] for scale, config in scales.items()
    }
    assert after == before
    assert not [path for path in (*plan.of(LORA).run_files("result.txt"), plan.of(LORA).report()) if REHEARSAL_ROOT in Path(path).parts]
