"""The workflow's time-to-train report of one benchmark, built on :mod:`mlperf_wf.results.scoring`.

The numbers are the scorer's, so they equal mlperf-logging's result summarizer:
per run, minutes from ``run_start`` to ``run_stop``, samples to converge, status
and compliance; the olympic mean (fastest and slowest dropped, one
non-converged run may be the dropped slowest, more than one means no score),
times the RCP scaling factor. When more runs were made than the rules require
(M > N), the N consecutive runs (in launch order) whose olympic score is
closest to the median of all windows are scored, as the rules require.

A set that can no longer be valid, stopped with ``stop_when_doomed`` (:mod:`mlperf_wf.results.doom`), is reported from
its finished runs: ``doomed`` says why, the runs not started and the GPU-hours not spent (and how they were counted),
and no score is given.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from mlperf_wf.acquire.manifest import first_change
from mlperf_wf.errors import ConfigError, UserError
from mlperf_wf.kinds import Scale, Verdict
from mlperf_wf.results import scoring
from mlperf_wf.results import verdict as run_verdicts
from mlperf_wf.results.compliance import RunIdentity, file_sha256
from mlperf_wf.results.doom import Doom, report_reason
from mlperf_wf.run import identity

RCP_MIN_RUNS = 3
"""Fewest scored runs the RCP check is run on: mlperf-logging's checker takes the olympic mean of the submission's
samples to converge (its fastest and slowest dropped), which fewer leave empty."""


@dataclass
class RunEntry:
    """One run as the report shows it."""

    index: int
    seed: int | None
    minutes: float | None
    samples_to_converge: float | None
    status: str | None
    compliance: str
    """The compliance stage's verdict: passed, passed_except_declared (failed only on the tiny tier's declared
    open rules, target met), non_converged or failed."""
    compliance_problems: list[str]
    """Why the checker did not pass the log, a few words each (empty when it passed)."""
    final_eval_accuracy: float | None
    result_file: str
    in_scored_window: bool
    dropped: str | None
    made_with: dict | None = None
    """From provenance.json: launcher, image, host, GPUs, workflow commit."""
    energy_joules: float | None = None
    """Energy to train from the run's power logs (``power/result/node_*.txt`` beside its result file), as the summarizer computes it."""
    power_problems: list[str] = field(default_factory=list)
    """Why a run with power logs has no energy (or what the summarizer would only warn about)."""
    result_sha256: str = ""
    """sha256 of the log scored: the one its train job wrote and its compliance check read (the report refuses others)."""
    verdict: str = ""
    """What every reader says of the run (:func:`mlperf_wf.results.verdict.run_verdict`): passed, non_converged,
    failed, refused or missing."""
    verdict_reason: str = ""
    """Why it does not count, in one line naming the file (empty when it counts)."""
    identity_problems: list[str] = field(default_factory=list)
    """Why the run was made with another campaign identity than its set's (:mod:`mlperf_wf.run.identity`): it is
    scored as a failed run; empty when it was made with the set's."""
    power_logs: dict[str, str] = field(default_factory=dict)
    """sha256 of each power log the report read for the run (its power folder's ``node_*.txt``), by path: a log
    changed, added or removed since makes the workflow report again (:func:`changed_since_made`)."""


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
    runs: list[RunEntry]
    selection: dict | None
    """M > N window selection: runs made, required, chosen window, every window's score."""
    score: dict
    """time_to_train_minutes (olympic x scaling factor), olympic_minutes, scaling_factor and its source, counted runs;
    energy_joules (the olympic energy to train x scaling factor, when the runs have power logs) and why it is missing."""
    rcp: dict | None
    """mlperf-logging's RCP check of the scored runs; None where it does not apply (``rcp_not_checked`` says why)."""
    valid_submission: bool
    valid_submission_reasons: list[str] = field(default_factory=list)
    convergence_unit: str | None = None
    """What runs' samples_to_converge count: samples_count (LLMs) or epoch_num (rgat), as their evaluations log it."""
    rcp_not_checked: str | None = None
    """Why ``rcp`` is None: the open division has no RCP check; it needs at least 3 scored runs."""
    identity_notes: list[str] = field(default_factory=list)
    """What the report says about the runs' shared identity without refusing one (made from uncommitted changes)."""
    forecast: dict | None = None
    """How likely the required set is to be valid and pass the RCP check from the scored runs
    (:func:`mlperf_wf.results.forecast.forecast_of_files`): with every run there, the summarizer's and the checker's verdicts."""
    doomed: dict | None = None
    """Where the set can no longer be valid and ``stop_when_doomed`` stopped it (:class:`mlperf_wf.results.doom.Doom`):
    ``reasons``, ``runs_not_started``, ``gpu_hours`` not spent = runs not started x ``gpus_per_run`` x ``hours_per_run``
    (``hours_from`` says where that comes from), ``text``; ``runs`` are then the finished runs only, and there is no
    score. None for a set that can still be valid."""


def _finite(values: list[float]) -> list[float | None]:
    return [None if math.isinf(v) else v for v in values]


def build(
    benchmark: str,
    submission_benchmark: str,
    ruleset: str,
    division: str,
    scale: str,
    platform: str,
    quality_target: dict,
    required: int,
    results: list[Path],
    verdicts: list[str] | None = None,
    provenance: list[dict] | None = None,
    declared: dict[str, str] | None = None,
    extra_problems: list[list[str]] | None = None,
    provenance_files: list[Path] | None = None,
    expected_identity: identity.CampaignIdentity | None = None,
    identity_source: str = identity.IDENTITY_FILE,
    doomed: Doom | None = None,
) -> Report:
    """Score the runs (``results[i]`` is run ``i``) and assemble the report.

    Each run is judged by :func:`mlperf_wf.results.verdict.run_verdict`, as every other reader judges it.
    ``declared``: the tiny tier's open rules not met (key -> why); runs the official checker failed only on
    those are timed as runs that reached the target, and the report says so in its reasons.
    ``extra_problems``: per run, other reasons to refuse it (one line each);
    ``provenance_files``: where ``provenance`` was read (the runs' folders, named in identity problems);
    ``expected_identity``: the set's identity as the workflow makes it (``identity_source``, its file): a run made
    with another is scored as failed and the set is not valid (:mod:`mlperf_wf.run.identity`).
    ``doomed``: the set can no longer be valid and its runs not started were not made: ``results`` are its finished
    runs (the runs not in ``doomed.runs_not_started``, in order); no score is given, the report says why."""
    numbers = doomed_run_numbers(results, doomed)
    for path, record in zip(results, provenance or [], strict=False):
        if record.get("scale", scale) != scale:
            raise ConfigError(f"{path}: made at {record['scale']} scale, but this is a {scale}-scale report; scales never share a report")
    run_identity = RunIdentity(submission_benchmark, division)
    extra = [list(problems) for problems in (extra_problems or [[] for _ in results])]
    records = provenance or [None for _ in results]
    refused: dict[str, list[str]] = {}
    if provenance:  # a run made with another campaign identity than its set's is refused as every reader refuses it
        files = [str(f) for f in provenance_files] if provenance_files else [str(Path(path).parent / "provenance.json") for path in results]
        by_file = identity.problems_by_run(dict(zip(files, provenance, strict=True)), expected_identity, identity_source)
        for i, file in enumerate(files):
            extra[i] += by_file[file]
    judged = [run_verdicts.run_verdict(path, ruleset, declared, run_identity, extra[i], provenance=records[i]) for i, path in enumerate(results)]
    runs = [judged_run.score for judged_run in judged]
    judged_of = {judged_run.result_file: judged_run for judged_run in judged}
    made_with = {run.file: _summary(record) for run, record in zip(runs, provenance, strict=True)} if provenance else {}
    if provenance:
        for run, file in zip(runs, files, strict=True):
            refused[run.file] = by_file[file]
            identity.refuse(run, by_file[file])
    index_of = {run.file: numbers[i] for i, run in enumerate(runs)}
    checked = verdicts if verdicts is not None else [judged_run.compliance or "" for judged_run in judged]
    verdict_of = {run.file: str(verdict) for run, verdict in zip(runs, checked, strict=True)}
    selection = None
    window = runs
    if len(runs) > required:
        chosen = scoring.select_window(runs, required, submission_benchmark)
        window = chosen.ordered[chosen.start : chosen.start + required]
        for run in chosen.ordered:
            if run not in window:
                run.dropped = "outside the selected window"
        selection = {
            "runs_made": chosen.runs_made,
            "required": required,
            "order": "launch time (first log event)",
            "window_runs": [index_of[r.file] for r in window],
            "window_minutes": _finite(chosen.window_minutes),
            "median_minutes": None if math.isinf(chosen.median) else chosen.median,
            "note": f"{chosen.runs_made} runs made, {required} required: scored the {required} consecutive runs closest to the median window",
        }
    rcp = scoring.check_rcp_of_files([r.file for r in window], ruleset) if division == "closed" and len(window) >= RCP_MIN_RUNS and not doomed else None
    if doomed:
        rcp_not_checked = "the required set can no longer be valid: no score, so no RCP check"
    elif division != "closed":
        rcp_not_checked = f"the {division} division has no RCP check (mlperf-logging checks closed results only)"
    elif rcp is None:
        rcp_not_checked = f"the RCP check needs at least {RCP_MIN_RUNS} scored runs; {len(window)} here"
    else:
        rcp_not_checked = None
    folder = scoring.BenchmarkFolder(
        folder=str(Path(results[0]).parent.parent) if results else ".",
        system=platform,
        benchmark=submission_benchmark,
        result_files=tuple(r.file for r in window),
        system_desc={"system_name": platform, "division": division},
    )
    scored = scoring.benchmark_score(folder, division, window, rcp, ruleset)
    reasons = list(scored.reasons)
    if scale != Scale.FULL:
        reasons.insert(0, f"scale is {scale!r}: tiny-scale runs use generated data and a tiny model, not the benchmark's")
    if doomed:
        reasons.insert(0, report_reason(doomed.text()))
    refused_power = [judged_of[run.file] for run in window if run.dropped is None and judged_of[run.file].power_refused]
    if refused_power:
        named = " | ".join(f"{v.result_file}: {'; '.join(v.power_problems)}" for v in refused_power)
        reasons.append(f"power logs refused (no energy computed from them; the package leaves them out): {named}")
    reason = identity.set_reason([run.file for run in runs if refused.get(run.file)])
    if reason:
        reasons.append(reason)
    except_declared = [run for run in window if run.verdict == Verdict.PASSED_EXCEPT_DECLARED]
    if except_declared:
        keys = ", ".join(declared or {})
        reasons.append(
            f"the official compliance checker FAILED {len(except_declared)} scored runs on exactly the declared open rules ({keys}), "
            "which the tiny tier cannot meet (benchmark README); they are scored as runs that reached the target"
        )
    entries = [
        RunEntry(
            index=numbers[i],
            seed=run.seed,
            minutes=run.minutes,
            samples_to_converge=run.samples_to_converge,
            status=run.status,
            compliance=Verdict.FAILED if refused.get(run.file) else verdict_of[run.file],
            compliance_problems=list(run.problems),
            final_eval_accuracy=run.final_eval_accuracy,
            result_file=run.file,
            in_scored_window=run in window,
            dropped=run.dropped,
            made_with=made_with.get(run.file),
            energy_joules=run.energy_joules,
            power_problems=run.power_problems,
            result_sha256=file_sha256(Path(run.file)) if Path(run.file).is_file() else "",
            verdict=str(judged_of[run.file].outcome),
            verdict_reason=judged_of[run.file].reason,
            identity_problems=refused.get(run.file, []),
            power_logs=power_logs_of(run.file),
        )
        for i, run in enumerate(runs)
    ]
    if doomed:  # no score for a set that can no longer be valid, whatever its finished runs would give
        scored = replace(scored, time_to_train=None, olympic_minutes=None, energy_joules=None, energy_reasons=[])
    score = {
        "time_to_train_minutes": scored.time_to_train,
        "olympic_minutes": scored.olympic_minutes,
        "scaling_factor": scored.scaling_factor,
        "scaling_source": scored.scaling_source,
        "counted_runs": [] if doomed else sorted(index_of[r.file] for r in window if r.dropped is None),
        "energy_joules": scored.energy_joules,
        "energy_reasons": scored.energy_reasons,
    }
    return Report(
        benchmark=benchmark,
        submission_benchmark=submission_benchmark,
        ruleset=ruleset,
        division=division,
        scale=scale,
        quality_target=quality_target,
        required_runs=required,
        runs=entries,
        selection=selection,
        score=score,
        rcp=asdict(rcp) if rcp else None,
        rcp_not_checked=rcp_not_checked,
        valid_submission=not reasons,
        valid_submission_reasons=reasons,
        identity_notes=identity.notes(dict(zip(map(str, range(len(runs))), provenance, strict=True))) if provenance else [],
        convergence_unit=next((run.progress_key for run in runs if run.progress_key), None),
        forecast=_forecast(window, submission_benchmark, ruleset, division, required),
        doomed=doomed.summary() if doomed else None,
    )


def doomed_run_numbers(results: list[Path], doomed: Doom | None) -> list[int]:
    """The run numbers of a report's finished runs ``results``: 0, 1, ... for a set that can still be valid; for a
    doomed set, the runs not among its runs not started (a workflow run's folder, ``runs/<i>/``, must be its number)."""
    if doomed is None:
        return list(range(len(results)))
    left = set(doomed.runs_not_started)
    numbers = [run for run in range(len(results) + len(left)) if run not in left]
    folders = [Path(path).parent.name for path in results]
    wrong = next(
        (f"{path} is run {number}" for path, number, folder in zip(results, numbers, folders, strict=False) if folder.isdigit() and int(folder) != number), None
    )
    if len(numbers) != len(results) or wrong:
        raise ConfigError(
            f"--doomed: runs not started {sorted(left)} do not fit the {len(results)} finished runs given with --result"
            f"{f' ({wrong} then)' if wrong else ''}; give every run of the set, finished or not started, once"
        )
    return numbers


def power_logs_of(result_file: str) -> dict[str, str]:
    """sha256 of each power log of the run whose log is ``result_file`` (as the scorer finds them), by path."""
    folder = scoring.power_folder_of(result_file)
    return {str(path): file_sha256(path) for path in sorted(Path(folder).glob("node_*.txt"))} if folder else {}


POWER_RECORD = "power_logs.json"
"""Beside a report: the digests of its runs' power logs, written by the workflow when they changed since the report
read them (:func:`record_changed_power_logs`); an input of the report rule, so that Snakemake makes the report again."""


def record_changed_power_logs(report_file: Path) -> str | None:
    """Where the power logs of ``report_file``'s runs changed since it was made (:func:`changed_since_made`): write
    their digests now to :data:`POWER_RECORD` beside it, newer than the report, and say the first change in one
    line; None (nothing written) when they are the ones it read."""
    changed, now = _power_log_change(report_file)
    if changed is not None and now is not None:
        report_file.with_name(POWER_RECORD).write_text(json.dumps(now, indent=2, sort_keys=True) + "\n")
    return changed


def changed_since_made(report_file: Path) -> str | None:
    """Why the report in ``report_file`` no longer judges the files it names: the first power log changed, added or
    removed since it was made, in one line; None when they are the ones it read (or there is no report yet). The run
    logs themselves are the report rule's inputs: Snakemake remakes it when one of those changes."""
    return _power_log_change(report_file)[0]


def _power_log_change(report_file: Path) -> tuple[str | None, dict[str, dict[str, str]] | None]:
    """(the first power log changed since the report was made, or None; each run's power log digests now, or None
    where the report cannot be read), every log hashed once."""
    if not report_file.is_file():
        return None, None
    try:
        recorded = {run["result_file"]: run.get("power_logs", {}) for run in json.loads(report_file.read_text())["runs"]}
    except (OSError, ValueError, KeyError, TypeError):
        return f"{report_file}: not readable as a report's JSON", None
    now = {result_file: power_logs_of(result_file) for result_file in recorded}
    since = f"the report ({report_file.name}) was made"
    changes = (first_change(logs, now[result_file], since) for result_file, logs in recorded.items())
    return next((change for change in changes if change), None), now


def _forecast(window: list, submission_benchmark: str, ruleset: str, division: str, required: int) -> dict:
    from mlperf_wf.results.forecast import forecast_of_files

    counted = [run.file for run in window if run.outcome == "passed"]
    made = forecast_of_files(counted, len(window) - len(counted), submission_benchmark, ruleset, division, required)
    return made.summary()


def _summary(record: dict) -> dict:
    keys = ("scale", "launcher", "image", "command", "host", "gpus", "python")
    return {**{k: record.get(k) for k in keys}, "workflow_git": record.get("workflow_git"), "packages": record.get("packages")}


def read_doomed(text: str) -> Doom:
    """The ``--doomed`` record (JSON, as :meth:`mlperf_wf.results.doom.Doom.summary` gives it)."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ConfigError(f"--doomed: {text[:60]!r} is not JSON ({err}); give the set's doomed record as mlperf-wf status --json gives it") from None
    return Doom.from_summary(data, "--doomed")


def write(report: Report, out: Path) -> None:
    """Write the report as JSON."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(asdict(report), indent=2) + "\n")


def check_logs_unchanged(results: list[Path], verdict_files: list[Path]) -> list:
    """The compliance verdicts of ``results`` (run i's log, run i's ``compliance.json``), each refused in one line when
    its log is not the bytes its compliance check read."""
    from mlperf_wf.results import compliance

    if len(results) != len(verdict_files):
        raise ConfigError(f"--result given {len(results)} times but --compliance {len(verdict_files)} times")
    checked = [compliance.read(v) for v in verdict_files]
    for result, verdict_file, verdict in zip(results, verdict_files, checked, strict=True):
        now = file_sha256(result)
        if now != verdict.sha256:
            then = f"sha256 {verdict.sha256[:12]} was checked" if verdict.sha256 else "its verdict records no digest"
            raise UserError(
                f"{result}: not the log its compliance check read (sha256 {now[:12]} now, {then}); nothing is scored: "
                f"delete {verdict_file} and rerun to check it again, or delete the run's folder to redo the run"
            )
    return checked


def write_benchmark_report(
    benchmark: str,
    ruleset: str,
    division: str,
    scale: str,
    platform: str,
    results: list[Path],
    verdict_files: list[Path],
    provenance: list[Path],
    out: Path,
    expected_identity: Path | None = None,
    doomed: str | None = None,
) -> Report:
    """Write the time-to-train report of ``benchmark`` from its runs (``results`` i is run i, ``verdict_files`` i its
    compliance verdict); with ``expected_identity`` (``identity.json``), a run made with another campaign identity is
    refused by name; ``doomed``: the set's :class:`mlperf_wf.results.doom.Doom` record as JSON, where it can no longer be
    valid and ``results`` are its finished runs."""
    from mlperf_wf.config import mlperf_rules as rules
    from mlperf_wf.config.registry import declared_open_rules, load_benchmark

    checked = check_logs_unchanged(results, verdict_files)
    bench = load_benchmark(benchmark)
    report = build(
        benchmark=benchmark,
        submission_benchmark=bench.submission_benchmark,
        ruleset=ruleset,
        division=division,
        scale=scale,
        platform=platform,
        quality_target=rules.report_target(rules.run_targets(bench, ruleset, division, scale)),
        required=rules.required_runs(bench.submission_benchmark),
        results=results,
        verdicts=[v.verdict for v in checked],
        declared=declared_open_rules(benchmark, scale),
        provenance=[identity.read_provenance(p) or {} for p in provenance] if provenance else None,
        provenance_files=provenance or None,
        expected_identity=identity.read_expected(expected_identity) if expected_identity is not None else None,
        identity_source=str(expected_identity or identity.IDENTITY_FILE),
        doomed=read_doomed(doomed) if doomed else None,
    )
    write(report, out)
    return report
