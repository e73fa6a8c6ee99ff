"""Where a campaign stands (``mlperf-wf status``), read from what the workflow and the scheduler already record.

Nothing here writes a file, takes a lock or starts a job: it reads

- the plan (``mlperf_wf.plan.plan``): every benchmark's run files, shards and required run count;
- the runs' mllog result files as they grow: ``run_start``, the last ``eval_accuracy`` with its
  ``samples_count``/``epoch_num``, ``run_stop`` and its status;
- each finished run's ``compliance.json``; a finished run the compliance job has not checked yet (or whose
  check failed, so Snakemake removed its verdict) is scored in process by :func:`mlperf_wf.results.scoring.score_file`,
  the same code the report uses, so the status's minutes and verdicts are the report's;
- Snakemake's own records, read only (``.snakemake/locks/*.lock``: the outputs the running Snakemake will make;
  ``.snakemake/incomplete/``: the outputs of jobs it started, with the scheduler's job id);
- ``squeue``, only when a started job carries a scheduler job id (``--profile slurm``): pending or running.
  Without squeue the states come from Snakemake's records alone, and the status says so.

Whether the set can still be a valid result follows mlperf-logging's olympic rule, as :mod:`mlperf_wf.results.scoring`
applies it: of the N scored runs, at most ``max_dropped_runs`` (1; 4 for unet3d) may fail or not converge, and
with more runs made than required the N consecutive runs closest to the median window are scored.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf.config.checkout import project_root
from mlperf_wf.config.config_check import parsed_config
from mlperf_wf.errors import ConfigError
from mlperf_wf.kinds import Outcome, RunState, Verdict
from mlperf_wf.results import compliance, doom
from mlperf_wf.results.snakemake_state import SnakemakeRecords, mtime_or_none, read_snakemake_records, read_text_or_empty
from mlperf_wf.results.validity import SetValidity, set_validity

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mlperf_wf.config.mlperf_rules import QualityTarget
    from mlperf_wf.plan.plan import Plan
    from mlperf_wf.results.verdict import RunVerdict

SQUEUE_TIMEOUT_S = 10
"""How long ``squeue`` may take before the status gives up on it (a dead controller makes it hang)."""
SQUEUE_FORMAT = "%i|%T|%k|%Z|%r"
"""Job id, state, comment (the SLURM executor's ``rule_<rule>_wildcards_<values>``), working folder, reason."""
QUEUED_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "SUSPENDED", "RESV_DEL_HOLD"})
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "STAGE_OUT"})
STARTING_SECONDS = 10.0
"""How long a train job's log may stand without Snakemake's incomplete marker and still be a run starting (the local
executor starts the job's shell, which creates the log, before Snakemake writes the marker); after that, or once
Snakemake's log reports the job failed (not under ``--quiet``), it is a failed run."""

"""A run is finished (passed -- also passed_except_declared --, non_converged or failed), running, queued (waiting for
its inputs, a core or the scheduler), interrupted (a Snakemake that stopped left it half made; the next one redoes
it) or not started (no Snakemake is running that would make it)."""


# ---- what Snakemake records: mlperf_wf.results.snakemake_state ----


# ---- what the scheduler says ----


@dataclass(frozen=True)
class SchedulerJob:
    """One of the workflow's jobs as ``squeue`` lists it."""

    job_id: str
    state: str
    comment: str
    """``rule_<rule>_wildcards_<values>``: the rule and wildcards Snakemake gave the job."""
    reason: str


@dataclass(frozen=True)
class SchedulerView:
    """``squeue``'s answer, or why there is none."""

    source: str
    """squeue, or none (no job of this campaign was handed to a scheduler)."""
    jobs: dict[str, SchedulerJob] = field(default_factory=dict)
    """Job id -> job, for the jobs working in the campaign's folder."""
    note: str | None = None
    """Why squeue's states are missing (not installed, no answer), when it was needed."""


def query_squeue(root: Path, squeue: str = "squeue") -> SchedulerView:
    """The jobs ``squeue`` lists as working in ``root`` (the SLURM executor submits them with ``--chdir``)."""
    binary = shutil.which(squeue)
    if binary is None:
        return SchedulerView("none", note=f"{squeue} is not on PATH: pending/running inside the scheduler unknown (shown as started)")
    try:
        answer = subprocess.run([binary, "-h", "-o", SQUEUE_FORMAT], capture_output=True, text=True, timeout=SQUEUE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return SchedulerView("none", note=f"{squeue} did not answer in {SQUEUE_TIMEOUT_S} s (is slurmctld up?)")
    if answer.returncode != 0:
        message = (answer.stderr.strip().splitlines() or [f"exit code {answer.returncode}"])[-1]
        return SchedulerView("none", note=f"{squeue} failed: {message}")
    here = os.path.realpath(root)
    jobs = {}
    for line in answer.stdout.splitlines():
        parts = line.split("|")
        if len(parts) != 5:
            continue
        job_id, state, comment, workdir, reason = (p.strip() for p in parts)
        if comment.startswith("rule_") and os.path.realpath(workdir) == here:
            jobs[job_id] = SchedulerJob(job_id=job_id, state=state, comment=comment, reason=reason)
    return SchedulerView("squeue", jobs=jobs)


def slurm_comment(rule: str, *wildcards: object) -> str:
    """The comment the SLURM executor gives a job of ``rule`` (its wildcard values joined by ``_``)."""
    values = "_".join(str(w) for w in wildcards).replace("/", "_")
    return f"rule_{rule}_wildcards_{values}" if values else f"rule_{rule}"


# ---- one run's log, read as it grows ----


@dataclass
class LogProgress:
    """What a (possibly still growing) mllog result file says so far."""

    first_ms: float | None = None
    run_start_ms: float | None = None
    run_stop_ms: float | None = None
    run_stop_status: str | None = None
    last_eval: float | None = None
    last_eval_ms: float | None = None
    last_by_metric: dict[str, float] = field(default_factory=dict)
    """The last value of each metric where evaluations name one (stable_diffusion's FID and CLIP)."""
    progress_key: str | None = None
    """samples_count or epoch_num, as the run's evaluations log it."""
    progress: float | None = None
    evals: int = 0
    last_ms: float | None = None


def _log_lines(result_file: Path) -> Iterator[str]:
    """The run's log lines as far as they are written (none where there is no log yet)."""
    from mlperf_wf.run import mllog_parts

    if mllog_parts.parts_folder(result_file).is_dir():
        yield from mllog_parts.ordered_lines(result_file)
        return
    try:
        handle = open(result_file, encoding="latin-1")
    except OSError:
        return
    with handle:
        yield from handle


def read_progress(result_file: Path) -> LogProgress:
    """Read ``result_file`` line by line, tolerating a half-written last line; while a full-scale run is running, with
    what each of its processes has written into its own file so far, in time order (``mlperf_wf.run.mllog_parts``)."""
    from mlperf_wf.results.scoring import eval_progress

    progress = LogProgress()
    for line in _log_lines(result_file):
        record = compliance.mllog_record(line)
        if record is None:
            continue
        stamp = record.get("time_ms")
        stamp = float(stamp) if isinstance(stamp, int | float) else None
        progress.first_ms = progress.first_ms if progress.first_ms is not None else stamp
        progress.last_ms = stamp if stamp is not None else progress.last_ms
        key = record.get("key")
        metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
        if key == "run_start" and progress.run_start_ms is None:
            progress.run_start_ms = stamp
        elif key == "run_stop" and progress.run_stop_ms is None:
            progress.run_stop_ms = stamp
            progress.run_stop_status = metadata.get("status")
        elif key == "eval_accuracy" and progress.run_stop_ms is None and isinstance(record.get("value"), int | float):
            progress.last_eval, progress.last_eval_ms = float(record["value"]), stamp
            if metadata.get("metric"):
                progress.last_by_metric[str(metadata["metric"])] = float(record["value"])
            progress.progress_key, progress.progress = eval_progress(metadata)
            progress.evals += 1
    return progress


def measured_throughput(result_file: Path, bench, gpus: int) -> float:
    """Training samples per second per GPU of a run's log: the last evaluation's ``samples_count`` (or ``epoch_num``
    x the definition's ``samples_per_epoch``) over the time from ``run_start`` to it, over ``gpus``."""
    progress = read_progress(Path(result_file))
    if progress.run_start_ms is None or progress.last_eval_ms is None or not progress.progress:
        raise ConfigError(f"size: --throughput-from {result_file}: no run_start and evaluation with a samples_count in it; give a finished run's result file")
    done = progress.progress
    if progress.progress_key == "epoch_num":
        per_epoch = bench.full.sizing.samples_per_epoch if bench.full.sizing else None
        if not per_epoch:
            raise ConfigError(f"size: --throughput-from {result_file}: the log counts epochs and {bench.name} gives no samples_per_epoch")
        done *= per_epoch
    seconds = (progress.last_eval_ms - progress.run_start_ms) / 1000
    if seconds <= 0:
        raise ConfigError(f"size: --throughput-from {result_file}: its last evaluation is not after run_start")
    return done / seconds / gpus


# ---- the status ----


@dataclass
class RunStatus:
    """One run of a benchmark."""

    index: int
    state: RunState
    verdict: Verdict | None = None
    """Finished runs: passed, passed_except_declared, non_converged or failed."""
    verdict_from: str | None = None
    """compliance.json (the compliance job's) or scored here (the compliance job has not run, or failed)."""
    minutes: float | None = None
    """Finished and counting: run_start to run_stop, as the report times it."""
    wall_minutes: float | None = None
    """First to last log line (initialisation included): what the remaining-time estimate uses."""
    elapsed_minutes: float | None = None
    """Running: minutes since its log's first line (None before it wrote one)."""
    initialising: bool = False
    """Running but not at run_start yet."""
    last_eval: float | None = None
    last_evals: dict[str, float] = field(default_factory=dict)
    """The last value of each named metric, where evaluations name one (stable_diffusion's FID and CLIP)."""
    progress_key: str | None = None
    progress: float | None = None
    """samples_count or epoch_num of the last evaluation, as logged."""
    evals: int = 0
    reached_target: bool | None = None
    run_stop_status: str | None = None
    scheduler_job: str | None = None
    scheduler_state: str | None = None
    problems: list[str] = field(default_factory=list)
    """Failed: what is wrong (the checker's findings, or the last line of the job's log)."""
    result_file: str = ""
    power_problems: list[str] = field(default_factory=list)
    """Why the run's power logs give no energy (not this run's measurement, or incomplete)."""
    reason: str = ""
    """Finished and not counting: why, in one line naming the file, as every reader says it
    (:func:`mlperf_wf.results.verdict.run_verdict`)."""
    seed: int | None = None
    """The seed the run's log logs (finished runs)."""


@dataclass
class ShardStatus:
    """The preparation of one benchmark at this scale."""

    done: list[str]
    running: list[str]
    left: list[str]
    dataset_assembled: bool


@dataclass
class BenchmarkStatus:
    """One benchmark of the campaign."""

    benchmark: str
    submission_benchmark: str
    ruleset: str
    division: str
    quality_target: dict
    runs_planned: int
    runs_required: int
    counts: dict[str, int]
    runs: list[RunStatus]
    preparation: ShardStatus
    minutes_so_far: float
    """Training so far: finished runs' wall minutes plus the running runs' elapsed minutes."""
    mean_run_minutes: float | None
    """Mean wall minutes of the finished runs (what the estimate assumes each remaining run takes)."""
    remaining_run_minutes: float | None
    """Run-minutes left: the mean for each queued or unstarted run, what the mean leaves of each running one."""
    remaining_wall_minutes: float | None
    """The run-minutes left spread over as many runs at once as run now (at least one)."""
    validity: SetValidity
    report: dict | None
    """From report.json when it exists: its time to train, runs and validity."""
    forecast: dict | None = None
    """Once a run finished: how likely the required set is to be valid and to pass the RCP check
    (:func:`mlperf_wf.results.forecast.forecast_of_files`)."""
    doomed: dict | None = None
    """When the set can no longer be valid: why, the runs not started and their GPU-hours (:mod:`mlperf_wf.results.doom`)."""


@dataclass
class CampaignStatus:
    """The whole campaign: every benchmark shown, and where the states came from."""

    root: str
    scale: str
    generated_at: float
    snakemake: dict
    scheduler: dict
    benchmarks: list[BenchmarkStatus]
    excluded_nodes: dict[str, str] = field(default_factory=dict)
    """Node -> why: the nodes a failed node check named, which every later train job excludes (``node_check``)."""


def _wall_minutes(progress: LogProgress) -> float | None:
    if progress.first_ms is None or progress.last_ms is None:
        return None
    return (progress.last_ms - progress.first_ms) / 60000


def _last_line(path: Path) -> str | None:
    lines = [line.strip() for line in read_text_or_empty(path).splitlines() if line.strip()]
    return lines[-1][:300] if lines else None


_VERDICTS: dict[tuple, RunVerdict] = {}
"""Verdicts of finished runs by their files' (path, mtime, size) and the rules: ``--watch`` and pollers re-judge only
changed runs."""


def _stamp(path: Path) -> tuple:
    try:
        info = path.stat()
    except OSError:
        return (str(path), None)
    return (str(path), info.st_mtime_ns, info.st_size)


def _judge(result: Path, ruleset: str, declared: dict[str, str] | None, identity: compliance.RunIdentity) -> RunVerdict:
    from mlperf_wf.results import verdict

    power = sorted((result.parent / "power").rglob("*.txt")) if (result.parent / "power").is_dir() else []
    files = [result, result.parent / verdict.VERDICT_FILE, result.parent / verdict.PROVENANCE_FILE, *power]
    key = (*(_stamp(path) for path in files), ruleset, tuple(sorted((declared or {}).items())), identity)
    if key not in _VERDICTS:
        _VERDICTS[key] = verdict.run_verdict(result, ruleset, declared, identity)
    return _VERDICTS[key]


_STATE_OF = {
    Outcome.PASSED: RunState.PASSED,
    Outcome.NON_CONVERGED: RunState.NON_CONVERGED,
    Outcome.FAILED: RunState.FAILED,
    Outcome.REFUSED: RunState.REFUSED,
    Outcome.MISSING: RunState.MISSING,
}


def _finished_run(
    index: int, result: Path, ruleset: str, declared: dict[str, str] | None, identity: compliance.RunIdentity, progress: LogProgress
) -> RunStatus:
    """A run whose training job ended: its verdict (:func:`mlperf_wf.results.verdict.run_verdict`, the report's) and minutes."""
    judged = _judge(result, ruleset, declared, identity)
    scored = judged.score
    return RunStatus(
        index=index,
        state=_STATE_OF[judged.outcome],
        verdict=judged.compliance,
        verdict_from=judged.verdict_from,
        reason=judged.reason,
        seed=scored.seed,
        minutes=scored.minutes,
        wall_minutes=_wall_minutes(progress),
        last_eval=progress.last_eval,
        last_evals=dict(progress.last_by_metric),
        progress_key=progress.progress_key,
        progress=progress.progress,
        evals=progress.evals,
        run_stop_status=progress.run_stop_status,
        problems=list(judged.problems),
        power_problems=list(judged.power_problems) if judged.power_refused else [],
        result_file=str(result),
    )


def reached(targets: list[QualityTarget], last_eval: float | None, last_by_metric: dict[str, float]) -> bool | None:
    """Whether the last evaluation meets every target (one per metric where the benchmark has several); None before one."""
    if last_eval is None:
        return None
    if all(target.metric is None for target in targets):
        return all(target.reached(last_eval) for target in targets)
    return all(target.metric in last_by_metric and target.reached(last_by_metric[target.metric]) for target in targets)


def run_status(
    index: int,
    files: dict[str, str],
    root: Path,
    records: SnakemakeRecords,
    scheduler: SchedulerView,
    targets: list[QualityTarget],
    ruleset: str,
    declared: dict[str, str] | None,
    train_log: Path,
    check_log: Path,
    now: float,
    identity: compliance.RunIdentity | None = None,
) -> RunStatus:
    """The state of one run from its files (``files``: result, verdict, provenance paths relative to ``root``)."""
    result = root / files["result"]
    started = files["result"] in records.started
    job_id = records.started.get(files["result"])
    progress = read_progress(result)
    if started and records.locked:
        status = RunStatus(index=index, state=RunState.RUNNING, result_file=str(result))
        if job_id is not None:
            status.scheduler_job = job_id
            job = scheduler.jobs.get(job_id.split("_")[0]) or scheduler.jobs.get(job_id)
            if job is not None:
                status.scheduler_state = job.state
                if job.state in QUEUED_STATES:
                    status.state = RunState.QUEUED
            elif scheduler.source == "squeue" and progress.first_ms is None:
                status.scheduler_state = "not in squeue"
        if status.state == RunState.RUNNING:
            status.elapsed_minutes = (now * 1000 - progress.first_ms) / 60000 if progress.first_ms is not None else None
            status.initialising = progress.run_start_ms is None
            status.last_eval, status.progress_key, status.progress, status.evals = (
                progress.last_eval,
                progress.progress_key,
                progress.progress,
                progress.evals,
            )
            status.last_evals = dict(progress.last_by_metric)
            status.reached_target = reached(targets, progress.last_eval, progress.last_by_metric)
        return status
    if started:
        stopped = "Snakemake stopped while this run was being made; its next start redoes it"
        return RunStatus(index=index, state=RunState.INTERRUPTED, result_file=str(result), problems=[stopped])
    identity = identity or compliance.RunIdentity(None)
    # a run whose log is gone: its provenance or verdict is left, and no train job ran since (its log is older)
    left = [stamp for stamp in (mtime_or_none(root / files["provenance"]), mtime_or_none(root / files["verdict"])) if stamp is not None]
    trained = mtime_or_none(train_log)
    gone = not result.exists() and bool(left) and (trained is None or trained <= max(left))
    if (result.is_file() and (root / files["provenance"]).is_file()) or gone:
        finished = _finished_run(index, result, ruleset, declared, identity, progress)
        if finished.state == RunState.FAILED and not (root / files["verdict"]).is_file() and check_log.is_file():
            last = _last_line(check_log)
            finished.problems = finished.problems or ([last] if last else [])
        finished.reached_target = reached(targets, finished.last_eval, finished.last_evals)
        return finished
    log_time = mtime_or_none(train_log)
    failed_now = log_time is not None and (not records.locked or (records.lock_time is not None and log_time >= records.lock_time))
    if failed_now and records.locked and files["result"] not in records.failed and now - log_time < STARTING_SECONDS:
        # the job's shell has made its log and Snakemake has not written the job's marker yet: a run starting
        return RunStatus(index=index, state=RunState.RUNNING, result_file=str(result), initialising=True)
    stopped = doom.stopped_line(train_log) if failed_now else None
    if stopped:
        return RunStatus(index=index, state=RunState.NOT_STARTED, result_file=str(result), problems=[stopped.removeprefix("not started: ")])
    if failed_now:
        last = _last_line(train_log)
        why = f"training job failed: {last}" if last else "training job failed"
        return RunStatus(index=index, state=RunState.FAILED, verdict=Verdict.FAILED, result_file=str(result), problems=[why])
    if records.locked and files["result"] in records.wanted:
        return RunStatus(index=index, state=RunState.QUEUED, result_file=str(result))
    return RunStatus(index=index, state=RunState.NOT_STARTED, result_file=str(result))


def _estimate(runs: list[RunStatus]) -> tuple[float, float | None, float | None, float | None]:
    """Minutes so far, mean finished wall minutes, run-minutes left and wall minutes left."""
    finished = [r.wall_minutes for r in runs if RunState(r.state).finished and r.wall_minutes is not None]
    running = [r for r in runs if r.state == RunState.RUNNING]
    so_far = sum(finished) + sum(r.elapsed_minutes or 0.0 for r in running)
    if not finished:
        return so_far, None, None, None
    mean = statistics.fmean(finished)
    waiting = sum(1 for r in runs if r.state in (RunState.QUEUED, RunState.INTERRUPTED, RunState.NOT_STARTED))
    left = waiting * mean + sum(max(mean - (r.elapsed_minutes or 0.0), 0.0) for r in running)
    return so_far, mean, left, left / max(len(running), 1)


def _report_summary(path: Path) -> dict | None:
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    doomed = report.get("doomed") or {}
    return {
        "time_to_train_minutes": report.get("score", {}).get("time_to_train_minutes"),
        "runs": len(report.get("runs", [])) + len(doomed.get("runs_not_started", [])),
        "indices": [run.get("index", i) for i, run in enumerate(report.get("runs", []))],
        "runs_not_started": list(doomed.get("runs_not_started", [])),
        "compliance": [run.get("compliance") for run in report.get("runs", [])],
        "verdicts": [run.get("verdict") for run in report.get("runs", [])],
        "minutes": [run.get("minutes") for run in report.get("runs", [])],
        "valid_submission": report.get("valid_submission"),
        "valid_submission_reasons": report.get("valid_submission_reasons", []),
    }


def _with_staleness(report: dict | None, runs: list[RunStatus]) -> dict | None:
    """The report's summary with ``stale``: the finished runs whose verdict now is not the one report.json recorded."""
    if report is None:
        return None
    recorded_of = dict(zip(report["indices"], report["verdicts"], strict=True))
    stale = [
        f"run {run.index} is {run.state} now, report.json says {recorded_of[run.index]}"
        for run in runs
        if recorded_of.get(run.index) and RunState(run.state).finished and run.state != recorded_of[run.index]
    ]
    return {**report, "stale": stale}


def _planned_runs(plan: Plan, name: str, records: SnakemakeRecords, root: Path, runs_given: bool) -> int:
    """Runs of the campaign: the config's (``--config runs=N`` as Snakemake was given it), else what the running
    Snakemake will make, else what the report or the results folder hold, else the rules' count."""
    configured = plan.of(name).run_count()
    if runs_given:
        return configured
    prefix = f"{plan.results_root}/{name}/runs/"
    seen = {
        int(path[len(prefix) :].split("/")[0])
        for path in [*records.wanted, *records.started]
        if path.startswith(prefix) and path[len(prefix) :].split("/")[0].isdigit()
    }
    if records.locked and seen:
        folder = root / prefix
        on_disk = {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()
        return max(seen | on_disk) + 1
    report = _report_summary(root / plan.of(name).report())
    if report:
        return report["runs"]
    folder = root / prefix
    on_disk = {int(p.name) for p in folder.iterdir() if p.name.isdigit() and (p / "result.txt").exists()} if folder.is_dir() else set()
    return max(configured, max(on_disk) + 1 if on_disk else 0)


def benchmark_status(plan: Plan, name: str, root: Path, records: SnakemakeRecords, scheduler: SchedulerView, runs_given: bool, now: float) -> BenchmarkStatus:
    """The status of one benchmark of ``plan`` in the campaign folder ``root``."""
    from mlperf_wf.config import mlperf_rules, registry
    from mlperf_wf.results import scoring
    from mlperf_wf.run import identity

    bench = plan.bench(name)
    ruleset, division = plan.of(name).ruleset(), plan.of(name).division()
    targets = mlperf_rules.run_targets(bench, ruleset, division, plan.scale)
    declared = registry.declared_open_rules(name, plan.scale)
    planned = _planned_runs(plan, name, records, root, runs_given)
    runs = [
        run_status(
            index,
            {
                kind: plan.of(name).run_file(index, file)
                for kind, file in (("result", "result.txt"), ("verdict", "compliance.json"), ("provenance", "provenance.json"))
            },
            root,
            records,
            scheduler,
            targets,
            ruleset,
            declared,
            root / plan.logs_root / "train" / name / f"{index}.log",
            root / plan.logs_root / "check_compliance" / name / f"{index}.log",
            now,
            compliance.RunIdentity(bench.submission_benchmark, division),
        )
        for index in range(planned)
    ]
    made = [r.index for r in runs if r.state.finished and (root / plan.of(name).run_file(r.index, "provenance.json")).is_file()]
    refused = identity.of_workflow_runs(plan, name, root, made)
    for run in runs:
        if refused.get(run.index):  # made with another campaign identity: refused, as the one verdict refuses it
            run.state, run.verdict, run.problems = RunState.REFUSED, Verdict.FAILED, [*refused[run.index], *run.problems]
    counts = {state: sum(1 for r in runs if r.state == state) for state in RunState}
    required = mlperf_rules.required_runs(bench.submission_benchmark)
    may_drop = scoring.max_dropped_runs("maskrcnn" if bench.submission_benchmark == "mask" else bench.submission_benchmark)
    validity = set_validity([r.state for r in runs], required, may_drop)
    so_far, mean, left, wall_left = _estimate(runs)
    forecast = _forecast(runs, root, bench.submission_benchmark, ruleset, division, required)
    seeds = [r.seed for r in runs if RunState(r.state).finished and r.seed is not None]
    duplicates = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if duplicates:  # as the report says it: the set is not valid whatever the runs' verdicts
        said = f"seeds used by more than one run: {duplicates}"
        validity = dataclasses.replace(validity, can_still_be_valid=False, more_allowed=0, message=f"INVALID: {said}")
        if forecast is not None:
            forecast = {**forecast, "valid": 0.0, "rcp_pass": 0.0 if forecast.get("rcp_pass") is not None else None, "text": f"valid 0% ({said})"}
    doomed = doom.doom_of(plan, name, runs, required, may_drop, forecast, mean)
    return BenchmarkStatus(
        benchmark=name,
        submission_benchmark=bench.submission_benchmark,
        ruleset=ruleset,
        division=division,
        quality_target=mlperf_rules.report_target(targets),
        runs_planned=planned,
        runs_required=required,
        counts=counts,
        runs=runs,
        preparation=shard_status(plan, name, root, records),
        minutes_so_far=so_far,
        mean_run_minutes=mean,
        remaining_run_minutes=left,
        remaining_wall_minutes=wall_left,
        validity=validity,
        report=_with_staleness(_report_summary(root / plan.of(name).report()), runs),
        forecast=forecast,
        doomed=doomed.summary() if doomed else None,
    )


def _forecast(runs: list[RunStatus], root: Path, benchmark: str, ruleset: str, division: str, required: int) -> dict | None:
    """The pass forecast from the finished runs (None before the first): converged runs' logs as the RCP checker reads
    them; failed and non-converged runs count as not converged."""
    from mlperf_wf.results.forecast import forecast_of_files

    counted = [str(root / run.result_file) for run in runs if run.state == RunState.PASSED]
    not_counting = sum(1 for run in runs if RunState(run.state).bad)
    if not counted and not not_counting:
        return None
    made = forecast_of_files(counted, not_counting, benchmark, ruleset, division, required)
    return {**made.summary(), "text": made.text()}


def shard_status(plan: Plan, name: str, root: Path, records: SnakemakeRecords) -> ShardStatus:
    """Shards done (folder there, no job making it), being made, and left."""
    done, running, left = [], [], []
    for shard, folder in zip(plan.of(name).shard_names(), plan.of(name).shard_dirs(), strict=True):
        if folder in records.started:
            (running if records.locked else left).append(shard)
        elif (root / folder).is_dir():
            done.append(shard)
        else:
            left.append(shard)
    dataset = plan.of(name).prepared_dataset()
    return ShardStatus(done=done, running=running, left=left, dataset_assembled=(root / dataset).is_dir() and dataset not in records.started)


def load_config(root: Path, overrides: list[str]) -> dict:
    """``root/config/config.yaml`` (then ``config/site.yaml`` where it exists) with ``KEY=VALUE`` overrides (values read
    as Snakemake's ``--config`` reads them)."""
    from mlperf_wf.config import yaml_files
    from mlperf_wf.config.workflow_config import CONFIG_FILE, SITE_CONFIG, command_line_value, merge_config

    path = root / CONFIG_FILE
    try:
        config = yaml_files.load(path.read_text()) or {}
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the workflow config ({err.strerror}); run status in the campaign's folder or give --root") from None
    if (root / SITE_CONFIG).exists():
        merge_config(config, yaml_files.load((root / SITE_CONFIG).read_text()) or {})
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--config {item!r}: expected KEY=VALUE, as given to snakemake --config")
        merge_config(config, {key: command_line_value(value)})  # key by key, as Snakemake merges --config
    return parsed_config(config).filled()


def campaign_status(
    root: Path,
    config: dict,
    benchmarks: list[str] | None = None,
    runs_given: bool = False,
    squeue: str = "squeue",
    plan: Plan | None = None,
    now: float | None = None,
) -> CampaignStatus:
    """The status of the campaign in ``root`` (see the module docstring); reads only. ``runs_given``: the run count
    was given on the command line (``--config runs=N``), so it is the campaign's whatever the files say."""
    from mlperf_wf.plan import plan as planning
    from mlperf_wf.run import node_check

    root = Path(root)
    plan = plan or planning.load(config, project_root=project_root(root), workdir=root)
    names = list(benchmarks or plan.settings.benchmarks)
    unknown = [n for n in names if n not in plan.benchmarks]
    if unknown:
        raise ConfigError(f"--benchmark {unknown[0]!r}: no such benchmark; known: {', '.join(sorted(plan.benchmarks))}")
    records = read_snakemake_records(root)
    handed_to_scheduler = any(job_id is not None for job_id in records.started.values())
    scheduler = query_squeue(root, squeue) if handed_to_scheduler else SchedulerView("none")
    now = time.time() if now is None else now
    statuses = [benchmark_status(plan, name, root, records, scheduler, runs_given, now) for name in names]
    return CampaignStatus(
        root=str(root.resolve()),
        scale=plan.scale,
        generated_at=now,
        snakemake={
            "running": records.locked,
            "stale_lock": records.stale_lock,
            "jobs_started": len(records.started),
            "outputs_to_make": len(records.wanted),
            "other_jobs_started": _other_jobs(records, scheduler, statuses),
        },
        scheduler={"source": scheduler.source, "jobs": len(scheduler.jobs), "note": scheduler.note},
        benchmarks=statuses,
        excluded_nodes=node_check.excluded_with_why(root / plan.excluded_nodes_file()),
    )


def _other_jobs(records: SnakemakeRecords, scheduler: SchedulerView, statuses: list[BenchmarkStatus]) -> list[dict]:
    """Started jobs that are neither runs nor shards (downloads, mirrors, reports), by one output each, with their
    scheduler state."""
    shown = {run.result_file for bench in statuses for run in bench.runs}
    jobs: dict[str | None, dict] = {}
    for output, job_id in sorted(records.started.items()):
        if any(output.endswith(path) or path.endswith(output) for path in shown) or "/runs/" in output or "/shards/" in output:
            continue
        job = scheduler.jobs.get((job_id or "").split("_")[0])
        key = job_id if job_id is not None else output
        jobs.setdefault(key, {"output": output, "scheduler_job": job_id, "scheduler_state": job.state if job else None})
    return list(jobs.values())


# ---- output ----


def to_json(status: CampaignStatus) -> dict:
    return asdict(status)


def _minutes(value: float | None) -> str:
    if value is None:
        return "?"
    if value >= 120:
        return f"{value / 60:.1f} h"
    return f"{value:.2f} min" if value < 10 else f"{value:.1f} min"


def _number(value: float | None) -> str:
    return "?" if value is None else f"{value:.6g}"


def render(status: CampaignStatus) -> str:
    """The plain-text status."""
    lines = [f"campaign {status.root} ({status.scale} scale), {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(status.generated_at))}"]
    # first: a benchmark that can no longer pass, why, and what its runs not started cost
    lines += [f"DOOMED {bench.benchmark}: {bench.doomed['text']}" for bench in status.benchmarks if bench.doomed]
    lines.append(
        "snakemake: "
        + (f"running ({status.snakemake['jobs_started']} outputs being made)" if status.snakemake["running"] else "not running")
        + (" (a killed Snakemake left its lock: run `snakemake --unlock` before the next run)" if status.snakemake.get("stale_lock") else "")
        + (f"; scheduler: squeue, {status.scheduler['jobs']} jobs" if status.scheduler["source"] == "squeue" else "")
        + (f"; {status.scheduler['note']}" if status.scheduler["note"] else "")
    )
    if status.excluded_nodes:
        named = "; ".join(f"{node} ({why})" for node, why in status.excluded_nodes.items())
        lines.append(f"excluded nodes (a node check named them; remove a line of excluded-nodes.txt once the node is mended): {named}")
    for job in status.snakemake["other_jobs_started"]:
        where = f" [SLURM {job['scheduler_job']}: {job['scheduler_state'] or 'state unknown'}]" if job["scheduler_job"] else ""
        lines.append(f"  making {job['output']}{where}")
    for bench in status.benchmarks:
        target = _targets_text(bench.quality_target)
        lines.append("")
        lines.append(f"{bench.benchmark} ({bench.submission_benchmark}, {bench.ruleset} {bench.division}; target {target})")
        prep = bench.preparation
        total = len(prep.done) + len(prep.running) + len(prep.left)
        lines.append(
            f"  preparation: {len(prep.done)}/{total} shards done"
            + (f", making {', '.join(prep.running)}" if prep.running else "")
            + (f", left {', '.join(prep.left)}" if prep.left else "")
            + ("; dataset assembled" if prep.dataset_assembled else "")
        )
        shown = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in bench.counts.items() if n)
        lines.append(f"  runs: {bench.runs_planned} planned ({bench.runs_required} required): {shown}")
        for run in bench.runs:
            lines.append(f"    run {run.index}: {_run_line(run, bench.quality_target)}")
            if run.power_problems:
                lines.append(f"      power logs refused (no energy from them): {'; '.join(run.power_problems)}")
        left, each = _minutes(bench.remaining_run_minutes), _minutes(bench.mean_run_minutes)
        estimate = f"; about {_minutes(bench.remaining_wall_minutes)} left ({left} of runs at {each} each)" if bench.remaining_run_minutes else ""
        lines.append(f"  time: {_minutes(bench.minutes_so_far)} of runs so far{estimate}")
        lines.append(f"  result: {bench.validity.message}")
        if bench.forecast:
            lines.append(f"  forecast: {bench.forecast['text']}")
        if bench.report:
            lines.append(
                f"  report.json: time to train {_minutes(bench.report['time_to_train_minutes'])}, {bench.report['runs']} runs, "
                + (f"{len(bench.report['runs_not_started'])} of them not started, " if bench.report.get("runs_not_started") else "")
                + ("valid submission" if bench.report["valid_submission"] else "not a valid submission: " + "; ".join(bench.report["valid_submission_reasons"]))
            )
            if bench.report.get("stale"):
                lines.append(f"  report.json is out of date (the next snakemake remakes it): {'; '.join(bench.report['stale'])}")
    return "\n".join(lines)


def _targets_text(target: dict) -> str:
    """``eval_accuracy <= 0.925``, or each metric's target (``FID <= 90, CLIP >= 0.15``)."""
    if "all" in target:
        return ", ".join(f"{t['metric']} {t['comparison']} {t['value']:g}" for t in target["all"])
    return f"eval_accuracy {target['comparison']} {target['value']:g}"


def _run_line(run: RunStatus, target: dict) -> str:
    where = f" at {run.progress_key} {_number(run.progress)}" if run.progress_key else ""
    value = ", ".join(f"{metric} {_number(v)}" for metric, v in run.last_evals.items()) if run.last_evals else _number(run.last_eval)
    last = f"last eval {value}{where} (target {_targets_text(target).removeprefix('eval_accuracy ')})" if run.last_eval is not None else "no eval yet"
    job = f" [SLURM {run.scheduler_job}: {run.scheduler_state or 'state unknown'}]" if run.scheduler_job else ""
    if run.state == RunState.RUNNING:
        phase = "initialising" if run.initialising else last
        return f"running {_minutes(run.elapsed_minutes)}, {phase}{job}"
    if run.state == RunState.MISSING:
        return f"missing: {run.reason}"
    if run.state == RunState.REFUSED:
        return f"refused: {run.reason}"
    if run.state in (RunState.PASSED, RunState.NON_CONVERGED) or (run.state == RunState.FAILED and run.verdict_from):
        verdict = run.verdict if run.verdict_from == "compliance.json" else f"{run.verdict} (scored here; compliance job not done)"
        timed = f"{_minutes(run.minutes)}" if run.minutes is not None else f"not timed ({_minutes(run.wall_minutes)} wall)"
        why = f": {'; '.join(run.problems[:2])}" if run.state == RunState.FAILED and run.problems else ""
        return f"{verdict}, {timed}, {last}{why}"
    if run.state == RunState.QUEUED:
        return f"queued{job}"
    if run.problems:
        return f"{run.state.replace('_', ' ')}: {run.problems[0]}"
    return run.state.replace("_", " ")
