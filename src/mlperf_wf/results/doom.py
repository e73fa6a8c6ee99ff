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

The stopped jobs fail, so the invocation that stopped them ends without the benchmark's report. The next invocation
asks :func:`mlperf_wf.results.doomed_sets.stopped_sets` while it builds its DAG: a doomed set's runs not started are not made (no train job is
scheduled for them), and its report is written from the finished runs with the :class:`Doom` record
(``report.json``'s ``doomed``, :func:`report_reason`): no score, why, the runs not started and the GPU-hours not spent.
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
        """As ``mlperf-wf status --json`` and ``report.json``'s ``doomed`` give it."""
        return {**asdict(self), "reasons": list(self.reasons), "runs_not_started": list(self.runs_not_started), "text": self.text()}

    @classmethod
    def from_summary(cls, data: object, source: str) -> Doom:
        """The record :meth:`summary` wrote (read back from ``source``, named in the one-line error when it is not one)."""
        from mlperf_wf.errors import ConfigError

        names = ("reasons", "stopping", "runs_not_started", "gpus_per_run", "hours_per_run", "hours_from", "gpu_hours")
        try:
            if not isinstance(data, dict):
                raise TypeError(f"a {type(data).__name__}")
            missing = [name for name in names if name not in data]
            if missing:
                raise KeyError(", ".join(missing))
            hours = data["hours_per_run"]
            return cls(
                reasons=tuple(str(reason) for reason in data["reasons"]),
                stopping=bool(data["stopping"]),
                runs_not_started=tuple(int(run) for run in data["runs_not_started"]),
                gpus_per_run=int(data["gpus_per_run"]),
                hours_per_run=None if hours is None else float(hours),
                hours_from=str(data["hours_from"]),
                gpu_hours=float(data["gpu_hours"]),
            )
        except (TypeError, ValueError, KeyError) as err:
            raise ConfigError(f"{source}: not a doomed-set record ({err}); it needs {', '.join(names)}, as mlperf-wf status --json gives them") from None


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
        launch = plan.of(name).launch_settings()
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


def runs_to_make(plan: Plan, name: str, stopped: dict[str, Doom]) -> list[int]:
    """The runs of benchmark ``name`` the workflow makes: every run, less a doomed set's runs not started."""
    left = set(stopped[name].runs_not_started) if name in stopped else set()
    return [run for run in range(plan.of(name).run_count()) if run not in left]


def report_args(name: str, stopped: dict[str, Doom]) -> str:
    """``--doomed RECORD`` (quoted for the shell) for the report of benchmark ``name`` where its set is in ``stopped``,
    else ''."""
    import shlex

    return f"--doomed {shlex.quote(json.dumps(stopped[name].summary(), sort_keys=True))}" if name in stopped else ""


def report_reason(text: str) -> str:
    """The first reason a doomed set's report (and ``mlperf-wf score`` of its folder) gives for being no valid
    submission and having no score, from its record's ``text`` (:meth:`Doom.text`)."""
    return f"the required set {text}"


def stopped_note(plan: Plan, name: str, doom: Doom) -> str:
    """What an invocation that builds its DAG says of a doomed set whose runs not started it does not make."""
    own = plan.of(name)
    made = ", ".join(str(run) for run in range(own.run_count()) if run not in doom.runs_not_started) or "(none)"
    runs = ", ".join(str(run) for run in doom.runs_not_started) or "none"
    return f"{name} {doom.text()}: making none of runs {runs}; {own.report()} is written from the finished runs {made}"


def next_command(argv: list[str], targets: list[str], reports: list[str]) -> str:
    """The command that writes ``reports``: the invocation ``argv`` again (its own targets, when it named any, replaced
    by the reports), as ``snakemake ...``."""
    import shlex

    args = list(argv[1:])
    if targets:
        named = set(targets)
        args = [arg for arg in args if arg not in named] + reports
    return shlex.join(["snakemake", *args])


def recorded_in_report(report_file: Path, result_files: list[str] | None = None) -> dict | None:
    """The ``doomed`` record of the workflow's ``report_file`` (None without one, or where the report cannot be read);
    with ``result_files`` (the logs a reader scores), only where they are the report's runs, so that a set made since
    is not judged by the record of its runs not started (a run by its ``runs/<i>/result.txt``: the report names them
    from the campaign folder)."""
    try:
        report = json.loads(Path(report_file).read_text())
        doomed = report.get("doomed")
        recorded = {Path(run["result_file"]).parts[-3:] for run in report.get("runs", [])}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None
    if not isinstance(doomed, dict) or not doomed.get("text"):
        return None
    if result_files is not None and {Path(file).parts[-3:] for file in result_files} != recorded:
        return None
    return doomed
