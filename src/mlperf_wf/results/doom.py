"""A campaign that can no longer pass: when, why, and what stopping it saves.

A benchmark's campaign is *doomed* when no outcome of the runs left can make its required set a valid result:

- the olympic rule's allowance of runs that fail or do not converge is used up by the finished runs' verdicts
  (:func:`mlperf_wf.results.status.set_validity`, the runs not finished counting as converging). Only runs with a
  verdict count: a training job that crashed before writing its result is made again, not dropped;
- or, where the config's ``doomed_below`` is above 0, the forecast's probability of a valid set that passes the RCP
  check (valid alone in the open division; :func:`mlperf_wf.results.forecast.forecast_of_files`) is below it.

``mlperf-wf status`` says so first. With ``stop_when_doomed`` each train job asks :func:`gate` before it starts: a doomed
campaign's job prints :data:`NOT_STARTED` as its log's last line and ends with :data:`EXIT_NOT_STARTED`, without
training, so that the run is neither scored nor counted as failed; the benchmark's train jobs still pending in SLURM are
cancelled. Nothing of a finished run is touched.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf.kinds import RunState, Scale

if TYPE_CHECKING:
    from mlperf_wf.plan.plan import Plan
    from mlperf_wf.results.status import RunStatus

NOT_STARTED = "not started: campaign can no longer pass"
"""The first words of the last line of a train job's log that the gate stopped (read back by ``mlperf-wf status``)."""
EXIT_NOT_STARTED = 3
"""The exit status of a train job the gate stopped (the preflight's refusal is 2)."""
UNSTARTED_STATES = (RunState.NOT_STARTED, RunState.QUEUED, RunState.INTERRUPTED)
SCANCEL_TIMEOUT_S = 10


@dataclass(frozen=True)
class Doom:
    """Why a benchmark's required set can no longer be valid, and what the runs not started would cost."""

    reasons: tuple[str, ...]
    """One line per cause: the olympic rule's allowance used up, the forecast below the threshold."""
    stopping: bool
    """``stop_when_doomed`` is on: the runs not started are not started."""
    runs_not_started: tuple[int, ...]
    """Runs that have not started (or whose job was stopped by the gate, or crashed before a result)."""
    gpus_per_run: int
    """Nodes x GPUs per node of one run (0 at tiny scale: its runs use CPUs)."""
    hours_per_run: float | None
    """What one run takes: the finished runs' mean wall time, else the planned walltime (None where neither is known)."""
    hours_from: str
    """Where :attr:`hours_per_run` comes from."""
    gpu_hours: float
    """Runs not started x GPUs per run x hours per run: not spent when stopping, else what they would spend."""

    def text(self) -> str:
        """The status's first words about the benchmark: that it can no longer pass, why, and the GPU-hours."""
        return f"can no longer pass: {self.details()}"

    def details(self) -> str:
        """Why, and the runs not started with their GPU-hours."""
        why = "; ".join(self.reasons)
        count = len(self.runs_not_started)
        if not count:
            return why
        runs = f"{count} run{'s' if count != 1 else ''} ({', '.join(str(i) for i in self.runs_not_started)})"
        hours = "?" if self.hours_per_run is None else f"{self.hours_per_run:.3g} h"
        gpu_hours = f"{self.gpu_hours:.4g} GPU-hours"
        how = f"({count} x {self.gpus_per_run} GPUs x {hours}, {self.hours_from})"
        if self.stopping:
            return f"{why}. stop_when_doomed: {runs} not started, {gpu_hours} not spent {how}"
        return f"{why}. stop_when_doomed is off: the {runs} left would spend {gpu_hours} {how}"

    def summary(self) -> dict:
        """As ``mlperf-wf status --json`` gives it."""
        return {**asdict(self), "reasons": list(self.reasons), "runs_not_started": list(self.runs_not_started), "text": self.text()}


def verdict_states(runs: list[RunStatus]) -> list[str]:
    """The runs' states for the olympic rule, a training job that failed before writing a result counted as not
    finished (it is made again)."""
    return [RunState.NOT_STARTED if run.state == RunState.FAILED and run.verdict_from is None else run.state for run in runs]


def forecast_probability(forecast: dict | None) -> float | None:
    """The forecast's probability of a valid set passing the RCP check (valid alone where no RCP check applies)."""
    if not forecast:
        return None
    return forecast["rcp_pass"] if forecast.get("rcp_pass") is not None else forecast.get("valid")


def reasons(runs: list[RunStatus], required: int, may_drop: int, forecast: dict | None, threshold: float) -> list[str]:
    """Why the set can no longer be valid (empty while it can)."""
    from mlperf_wf.results.validity import set_validity

    found = []
    states = verdict_states(runs)
    validity = set_validity(states, required, may_drop)
    if not validity.can_still_be_valid:
        bad = [str(run.index) for run, state in zip(runs, states, strict=True) if RunState(state).bad]
        found.append(
            f"the olympic rule's allowance is used up: runs {', '.join(bad)} failed or did not converge, "
            f"at most {may_drop} of {validity.scored_runs} scored runs may"
        )
    probability = forecast_probability(forecast)
    if threshold > 0 and probability is not None and probability < threshold:
        what = "valid and passing the RCP check" if forecast and forecast.get("rcp_pass") is not None else "valid"
        found.append(f"the forecast gives a set {what} {probability:.0%}, below doomed_below {threshold:.0%} ({forecast['basis']})")
    return found


def doom_of(plan: Plan, name: str, runs: list[RunStatus], required: int, may_drop: int, forecast: dict | None, mean_minutes: float | None) -> Doom | None:
    """Whether benchmark ``name`` of ``plan`` is doomed from its runs' states (:class:`Doom`), else None."""
    settings = plan.settings
    found = reasons(runs, required, may_drop, forecast, settings.doomed_below)
    if not found:
        return None
    states = verdict_states(runs)
    left = tuple(run.index for run, state in zip(runs, states, strict=True) if state in UNSTARTED_STATES)
    gpus, walltime = 0, None
    if plan.scale == Scale.FULL:
        launch = plan.launch_settings(name)
        gpus, walltime = launch.nodes * launch.gpus_per_node, launch.walltime_minutes
    if mean_minutes is not None:
        hours, source = mean_minutes / 60, "the finished runs' mean"
    elif walltime is not None:
        hours, source = walltime / 60, "the planned walltime"
    else:
        hours, source = None, "no run finished yet"
    if plan.scale == Scale.TINY:
        source += "; tiny runs use no GPU"
    return Doom(tuple(found), settings.stop_when_doomed, left, gpus, hours, source, len(left) * gpus * (hours or 0.0))


def stopped_line(path: Path) -> str | None:
    """The gate's line when it is the last line of the train job's log ``path``, else None."""
    from mlperf_wf.results.snakemake_state import read_text_or_empty

    lines = [line.strip() for line in read_text_or_empty(path).splitlines() if line.strip()]
    return lines[-1] if lines and lines[-1].startswith(NOT_STARTED) else None


def record_config(config: dict, path: str | Path) -> Path:
    """Write the running Snakemake's config (every key filled in) to ``path``
    (:meth:`mlperf_wf.plan.plan.Plan.campaign_config_record`), where the gate inside each job reads it: a job sees no
    ``--config`` of its own."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(config, indent=1, sort_keys=True) + "\n")
    partial.replace(path)
    return path
