"""The sets a campaign stopped as doomed, read as ``mlperf-wf status`` reads them: what the workflow makes of them
when it builds its DAG, and what an invocation that failed says of them (the rules' one source, with
:mod:`mlperf_wf.results.doom`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf.results import status
from mlperf_wf.results.doom import Doom, next_command, recorded_in_report

if TYPE_CHECKING:
    from mlperf_wf.plan.plan import Plan


def stopped_sets(plan: Plan, root: Path) -> dict[str, Doom]:
    """With ``stop_when_doomed``: each configured benchmark of ``plan`` whose required set can no longer be valid in the
    campaign folder ``root`` (the verdict ``mlperf-wf status`` and the gate give), with its record; the workflow makes
    none of its runs not started and reports its finished runs. Empty when the option is off."""
    if not plan.settings.stop_when_doomed:
        return {}
    names = list(plan.settings.benchmarks)
    found = status.campaign_status(root, plan.settings.filled(), names, runs_given=True, plan=plan).benchmarks
    return {bench.benchmark: Doom.from_summary(bench.doomed, f"{bench.benchmark}'s status") for bench in found if bench.doomed}


def report_next_lines(plan: Plan, root: Path, argv: list[str], targets: list[str]) -> list[str]:
    """At the end of an invocation that failed (its ``onerror``): for each doomed set without its report of the runs
    not started now, that the next invocation writes it, and the command, exactly."""
    stopped = stopped_sets(plan, root)
    reports = {
        name: plan.of(name).report()
        for name, doom in stopped.items()
        if (recorded_in_report(Path(root) / plan.of(name).report()) or {}).get("runs_not_started") != list(doom.runs_not_started)
    }
    if not reports:
        return []
    command = next_command(argv, targets, list(reports.values()))
    return [
        f"mlperf-wf: {name} {stopped[name].text()}. Its report ({report}) is written from the finished runs by the next "
        f"invocation, which starts none of the runs not started: {command}"
        for name, report in reports.items()
    ]
