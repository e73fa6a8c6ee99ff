"""``mlperf-wf score``: the official time-to-train scores of any folder of logs (a round's organisations, one
benchmark's result files, a workflow's results), each run judged as the report and ``status`` judge it, and the lines
that say them."""

from __future__ import annotations

import json
from pathlib import Path

from mlperf_wf.errors import ConfigError, UserError
from mlperf_wf.kinds import Outcome, Verdict
from mlperf_wf.results import doom, scoring, verdict


def recorded_ruleset(path: Path) -> tuple[str, Path]:
    """The ruleset the workflow's ``report.json`` in ``path`` (or in its benchmark folders) records, and the first
    report that records it; one line when none does or they differ."""
    rulesets: dict[str, list[Path]] = {}
    for report in [path / "report.json", *sorted(path.glob("*/report.json"))]:
        try:
            recorded = json.loads(report.read_text()).get("ruleset")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(recorded, str) and recorded:
            rulesets.setdefault(recorded, []).append(report)
    if not rulesets:
        raise UserError(f"score: no report.json under {path} records the ruleset; give --ruleset (e.g. 6.1.0)")
    if len(rulesets) > 1:
        raise UserError(f"score: the reports under {path} record rulesets {', '.join(sorted(rulesets))}; give --ruleset, or score each benchmark's folder")
    ((ruleset, reports),) = rulesets.items()
    return ruleset, reports[0]


def score_folder(
    path: Path, ruleset: str, json_out: Path | None = None, csv_out: Path | None = None, jobs: int | None = None, rcp_bypass: bool = False
) -> list[scoring.BenchmarkScore]:
    """Score every (system, benchmark) under ``path`` under ``ruleset``, each run judged from its files; a benchmark of
    another round is one line, not a failed check per run. Writes the scores as JSON and CSV where asked."""
    import pandas as pd

    from mlperf_wf.config import mlperf_rules as rules

    allowed = rules.allowed_benchmarks(ruleset)
    for folder in scoring.discover(path):
        if folder.benchmark not in allowed:
            try:
                rounds = ", ".join(rules.rulesets_of(folder.benchmark))
            except ConfigError:
                continue  # a name mlperf-logging does not know: the checker says so for each run
            raise UserError(f"--ruleset {ruleset}: {folder.benchmark} ({folder.folder}) is not part of that round; its rounds: {rounds}")
    scores = scoring.score_paths(path, ruleset, verdict.judged_score, jobs=jobs, rcp_bypass=rcp_bypass)
    for score in scores:  # a workflow's set that can no longer be valid: as its report says it, no score
        doomed = doom.recorded_in_report(Path(score.folder) / "report.json", [run.file for run in score.runs])
        if doomed:
            score.time_to_train, score.olympic_minutes, score.energy_joules, score.rcp, score.valid = None, None, None, None, False
            score.reasons.insert(0, doom.report_reason(doomed["text"]))
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(scoring.to_json(scores), indent=2) + "\n")
    if csv_out:
        csv_out.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(scoring.to_rows(scores)).to_csv(csv_out, index=False)
    return scores


def score_lines(scores: list[scoring.BenchmarkScore]) -> list[str]:
    """One line per benchmark (its time to train, scaling, RCP, energy, runs, why it is invalid), then the energy of
    each run where power was logged, and below it every run that did not pass: its verdict and what is missing or wrong."""
    lines = []
    for score in scores:
        ttt = f"{score.time_to_train:.4f} min" if score.time_to_train is not None else "no score"
        rcp = f", RCP {score.rcp.verdict}" if score.rcp else ""
        factor = f", x{score.scaling_factor:.6g} ({score.scaling_source})" if score.scaling_factor != 1.0 else ""
        energy = f", energy {score.energy_joules:.6g} J" if score.energy_joules is not None else ""
        energy += f" (no energy score: {'; '.join(score.energy_reasons)})" if score.energy_reasons else ""
        lines.append(
            f"{score.system}/{score.benchmark}: {ttt}{factor}{rcp}{energy}, {len(score.runs)} runs"
            + ("" if score.valid else f" INVALID: {'; '.join(score.reasons)}")
        )
        if any(run.power_folder for run in score.runs):
            label = {run.file: f"run {Path(run.file).parent.name}" if Path(run.file).name == "result.txt" else Path(run.file).name for run in score.runs}
            joules = [f"{label[run.file]} {run.energy_joules:.6g} J" if run.energy_joules is not None else f"{label[run.file]} none" for run in score.runs]
            lines.append(f"  energy to train per run: {', '.join(joules)}")
        for run in score.runs:
            if run.outcome != Outcome.PASSED or run.verdict != Verdict.PASSED or run.minutes is None:
                why = run.problems or [m.splitlines()[0] for m in run.messages[:3] if m.strip()]
                said = run.verdict if run.outcome == Outcome.PASSED else run.outcome or run.verdict or "failed"
                lines.append(f"  {_run_name(run.file, score.folder)}: {said}" + (f": {'; '.join(why)}" if why else ""))
            if run.power_problems and run.energy_joules is None and run.outcome == Outcome.PASSED:
                lines.append(f"  {_run_name(run.file, score.folder)}: power logs refused (no energy from them): {'; '.join(run.power_problems)}")
    return lines


def _run_name(file: str, folder: str) -> str:
    """A run as its folder names it: ``run 3 (runs/3/result.txt)`` for a workflow's run, else the file's path under
    the scored folder (``result_2.txt``)."""
    relative = Path(file).relative_to(folder) if Path(file).is_relative_to(folder) else Path(file)
    parts = relative.parts
    return f"run {parts[1]} ({relative})" if len(parts) == 3 and parts[0] == "runs" and parts[2] == "result.txt" else str(relative)
