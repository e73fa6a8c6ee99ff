"""The time-to-train report of one benchmark's runs.

Per run: minutes from ``run_start`` to ``run_stop`` (as mlperf-logging's result
summarizer computes them), samples to converge (``samples_count`` of the last
``eval_accuracy`` before a successful ``run_stop``, as its RCP checker reads
them), status and compliance verdict. The score is the olympic mean of the
result summarizer (drop the fastest and the slowest; one non-converged run may
be the dropped slowest; more than one means no score).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mlperf_logging.compliance_checker import mlp_parser
from mlperf_logging.result_summarizer.result_summarizer import _compute_olympic_average

from mlperf_wf.compliance import ComplianceResult

MAX_DROPPED = 1
"""Non-converged runs the rules allow (4 only for the retired unet3d)."""


@dataclass
class RunResult:
    """One run as the report shows it."""

    index: int
    seed: int | None
    minutes: float | None
    samples_to_converge: int | None
    status: str | None
    compliance: str
    final_eval_accuracy: float | None
    result_file: str
    dropped: str | None = None


@dataclass
class Score:
    """The olympic score of a set of runs."""

    minutes: float | None
    """Olympic mean time to train, or None when there is no valid score."""
    counted_runs: list[int]
    """Run indices averaged."""
    reason: str | None = None
    """Why there is no score, when there is none."""


@dataclass
class Report:
    """``results/<benchmark>/report.json``."""

    benchmark: str
    submission_benchmark: str
    ruleset: str
    division: str
    scale: str
    quality_target: dict
    required_runs: int
    runs: list[RunResult]
    score: Score
    valid_submission: bool
    valid_submission_reasons: list[str] = field(default_factory=list)


def read_run(index: int, result_file: Path, compliance: ComplianceResult, ruleset: str) -> RunResult:
    """Extract what the report needs from one mllog result file."""
    loglines, _ = mlp_parser.parse_file(str(result_file), ruleset=ruleset)
    seed = start = stop = status = None
    last_eval: tuple[float, int | None] | None = None
    for line in loglines:
        value, metadata = line.value.get("value"), line.value.get("metadata") or {}
        if line.key == "seed" and seed is None:
            seed = value
        elif line.key == "run_start":
            start = line.timestamp
        elif line.key == "eval_accuracy":
            last_eval = (value, metadata.get("samples_count"))
        elif line.key == "run_stop":
            stop, status = line.timestamp, metadata.get("status")
    minutes = (stop - start) / 60 / 1000 if start is not None and stop is not None else None
    converged = status == "success" and last_eval is not None
    return RunResult(
        index=index,
        seed=seed,
        minutes=minutes,
        samples_to_converge=last_eval[1] if converged else None,
        status=status,
        compliance=compliance.verdict,
        final_eval_accuracy=last_eval[0] if last_eval else None,
        result_file=str(result_file),
    )


def olympic_score(runs: list[RunResult]) -> Score:
    """Olympic mean per the MLPerf rules, marking the dropped runs on ``runs``."""
    counted = [r for r in runs if r.compliance == "passed" and r.minutes is not None]
    not_counted = [r for r in runs if r not in counted]
    for run in not_counted:
        run.dropped = "did not converge" if run.compliance == "non_converged" else "failed compliance"
    if len(not_counted) > MAX_DROPPED:
        return Score(minutes=None, counted_runs=[], reason=f"{len(not_counted)} runs did not converge or failed compliance; at most {MAX_DROPPED} may")
    if len(counted) < 3:
        return Score(minutes=None, counted_runs=[], reason=f"{len(counted)} converged runs; an olympic mean needs at least 3")
    ordered = sorted(counted, key=lambda r: r.minutes)
    ordered[0].dropped = "fastest"
    if not not_counted:
        ordered[-1].dropped = "slowest"
    minutes = _compute_olympic_average([r.minutes for r in ordered], len(not_counted), MAX_DROPPED)
    return Score(minutes=minutes, counted_runs=sorted(r.index for r in ordered if r.dropped is None))


def submission_validity(runs: list[RunResult], required: int, scale: str, score: Score) -> list[str]:
    """Reasons the runs are not a valid submission (empty when they are)."""
    reasons = []
    if scale != "full":
        reasons.append(f"scale is {scale!r}: tiny-scale runs use generated data and a tiny model, not the benchmark's")
    if len(runs) != required:
        reasons.append(f"{len(runs)} runs, the rules require {required}")
    seeds = [r.seed for r in runs]
    duplicates = sorted({s for s in seeds if seeds.count(s) > 1 and s is not None})
    if duplicates:
        reasons.append(f"seeds used by more than one run: {duplicates}")
    if any(s is None for s in seeds):
        reasons.append("a run did not log its seed")
    if score.minutes is None:
        reasons.append(f"no score: {score.reason}")
    return reasons


def write(report: Report, out: Path) -> None:
    """Write the report as JSON."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(asdict(report), indent=2) + "\n")
