"""The doomed-campaign gate each train job runs first (``mlperf-wf campaign-gate``) and the SLURM cancellation of the
runs not started: what :mod:`mlperf_wf.results.doom` decides, acted on from the campaign's status."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf.kinds import RunState
from mlperf_wf.results.doom import EXIT_NOT_STARTED, NOT_STARTED, SCANCEL_TIMEOUT_S, UNSTARTED_STATES, doom_of

if TYPE_CHECKING:
    from mlperf_wf.results.status import SchedulerJob


def train_jobs(root: Path, benchmark: str, runs: range | tuple[int, ...], squeue: str = "squeue") -> dict[int, SchedulerJob]:
    """Run -> the SLURM job of ``benchmark``'s train run in the campaign in ``root``, as squeue lists them (none
    without squeue)."""
    from mlperf_wf.results.status import query_squeue, slurm_comment

    if shutil.which(squeue) is None:
        return {}
    wanted = {slurm_comment("train", benchmark, run): run for run in runs}
    return {wanted[job.comment]: job for job in query_squeue(root, squeue).jobs.values() if job.comment in wanted}


def cancel_pending(root: Path, benchmark: str, runs: tuple[int, ...], own_job: str | None, squeue: str = "squeue") -> dict[int, str]:
    """Cancel the SLURM jobs of ``benchmark``'s train runs ``runs`` of the campaign in ``root`` that are still pending;
    returns run -> the job id cancelled (none without squeue or scancel, or without such jobs)."""
    from mlperf_wf.results.status import QUEUED_STATES

    if shutil.which("scancel") is None:
        return {}
    jobs = train_jobs(root, benchmark, runs, squeue)
    pending = {run: job.job_id for run, job in sorted(jobs.items()) if job.state in QUEUED_STATES and job.job_id != own_job}
    if pending:
        subprocess.run(["scancel", *sorted(pending.values())], capture_output=True, text=True, timeout=SCANCEL_TIMEOUT_S, check=False)
    return pending


def mark_cancelled(train_log: Path, line: str) -> None:
    """Record in a cancelled run's train log (which its job never wrote) that it was not started, and why: Snakemake
    leaves a log that exists as it is (it creates an empty one for a job that wrote none)."""
    if train_log.exists() and train_log.stat().st_size:
        return  # the job started after all, and its own gate wrote its log
    train_log.parent.mkdir(parents=True, exist_ok=True)
    train_log.write_text(line + "\n")


def gate(root: Path, benchmark: str, run: int, config_file: Path) -> tuple[int, str]:
    """What a train job does before it starts, with ``stop_when_doomed``: (0, why it goes on) or
    (:data:`EXIT_NOT_STARTED`, the line that says why it does not)."""
    from dataclasses import replace

    from mlperf_wf.config.checkout import project_root
    from mlperf_wf.config.config_check import parsed_config
    from mlperf_wf.errors import ConfigError
    from mlperf_wf.plan import plan as planning
    from mlperf_wf.results import status
    from mlperf_wf.results.status import RUNNING_STATES

    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{config_file}: cannot read the campaign's config ({err}); the Snakemake that started this job writes it") from None
    config = parsed_config(config).filled()
    if not config.get("stop_when_doomed"):
        return 0, f"{benchmark} run {run}: stop_when_doomed is off"
    plan = planning.load(config, project_root=project_root(root), workdir=root)
    bench = status.campaign_status(root, config, [benchmark], runs_given=True, plan=plan).benchmarks[0]
    if not bench.doomed:
        return 0, f"{benchmark} run {run}: the set can still be valid ({bench.validity.message})"
    own = os.environ.get("SLURM_JOB_ID")
    # from a compute node Snakemake's lock looks stale, so the runs it is making look interrupted: squeue says which
    # of them run; this job's own run is one of the runs not started
    jobs = train_jobs(root, benchmark, range(len(bench.runs))) if own else {}
    running = {i for i, job in jobs.items() if job.state in RUNNING_STATES and job.job_id != own}
    runs = [
        replace(r, state=RunState.NOT_STARTED)
        if r.index == run
        else replace(r, state=RunState.RUNNING)
        if r.index in running and r.state in UNSTARTED_STATES
        else r
        for r in bench.runs
    ]
    made = doom_of(plan, benchmark, runs, bench.runs_required, bench.validity.may_drop, bench.forecast, bench.mean_run_minutes)
    if made is None:  # cannot be: the same runs, finished alike
        return 0, f"{benchmark} run {run}: the set can still be valid"
    others = tuple(i for i in made.runs_not_started if i != run)
    cancelled = cancel_pending(root, benchmark, others, own) if own else {}
    for other, job_id in cancelled.items():
        why = f"{NOT_STARTED}: {benchmark}: SLURM job {job_id} cancelled while pending by run {run}'s train job: {made.details()}"
        mark_cancelled(root / plan.logs_root / "train" / benchmark / f"{other}.log", why)
    also = f"; cancelled pending SLURM jobs {', '.join(f'{job_id} (run {other})' for other, job_id in cancelled.items())}" if cancelled else ""
    return EXIT_NOT_STARTED, f"{NOT_STARTED}: {benchmark}: {made.details()}{also}"
