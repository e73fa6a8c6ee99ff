"""The HTML report's front page: each benchmark's result before anything else, in words.

Snakemake's report opens on the workflow's description (``workflow/report/workflow.rst``) beside the job graph; the
description leads with this text (reStructuredText): per benchmark of the scale's results, its score in the unit that
fits, whether the runs form a valid submission and why not, the RCP check (which does not apply at tiny scale), every
run with its verdict and why, and what made the runs (their ``provenance.json``). The numbers are those of each
``report.json``, as the benchmark's own page (:mod:`mlperf_wf.results.overview`) shows them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from mlperf_wf.results import overview, units

SPECIAL = re.compile(r"([\\`*_|])")
"""Characters reStructuredText reads as markup (emphasis, literals, references, substitutions, escapes)."""


def _plain(text: object) -> str:
    """``text`` as reStructuredText shows it literally (``opt_base_`` is not a reference, ``*`` not emphasis)."""
    return SPECIAL.sub(r"\\\1", str(text))


def _score(report: dict) -> str:
    score = report["score"]
    minutes = score["time_to_train_minutes"]
    if report.get("doomed"):
        return "Score: **none**: the required set can no longer be valid, and its runs not started were not made"
    if minutes is None:
        return "Score: **none**"
    return f"Score: **{units.duration(minutes)}** (olympic mean of {units.runs_in_words(score['counted_runs'])}, scaling factor {score['scaling_factor']:.4g})"


def _validity(report: dict) -> str:
    if report["valid_submission"]:
        return "Valid submission: **yes**"
    reasons = overview.validity_reasons(report) or ["no reason recorded"]
    return f"Valid submission: **no**: {_plain('; '.join(reasons))}"


def _rcp(report: dict) -> str:
    verdict, said = overview.rcp_summary(report)
    return f"RCP check: {_plain(said)}" if verdict is None else f"RCP check: **{_plain(verdict)}** ({_plain(said)})"


def _runs(report: dict) -> list[str]:
    """A line for the runs' count, then one per run: its verdict and why."""
    runs = report["runs"]
    progress = units.progress_unit(report.get("convergence_unit"))
    lines = [f"- Runs: {len(runs)} made, {report['required_runs']} required", ""]
    for run in runs:
        verdict = overview.shown_verdict(run)
        time = f", {units.duration(run['minutes'])}" if run.get("minutes") is not None else ""
        scored = f"; not scored: {run['dropped']}" if run.get("dropped") else ""
        lines.append(f"  - run {run['index']} (seed {run['seed']}): **{verdict}**{time}: {_plain(overview.why(run, verdict, progress) + scored)}")
    return [*lines, ""]


def _provenance(report: dict) -> str:
    """What made the runs, each fact once with the runs it holds for when they differ."""
    records = [(run["index"], run.get("made_with")) for run in report["runs"]]
    made = [(index, record) for index, record in records if record]
    if not made:
        return "Provenance: no run has a provenance.json (the logs were not made by this workflow)"

    def commit(record: dict) -> str:
        git = record.get("workflow_git") or {}
        return str(git.get("commit") or "unknown")[:12] + (" with uncommitted changes" if git.get("dirty") else "")

    facts = {
        "launcher": lambda record: record.get("launcher") or "unknown",
        "host": lambda record: record.get("host") or "unknown",
        "GPUs": lambda record: overview.gpus_in_words(record.get("gpus") or []),
        "image": lambda record: record.get("image") or "none",
        "workflow commit": commit,
        "Python": lambda record: record.get("python") or "unknown",
        "packages": lambda record: ", ".join(f"{name} {version}" for name, version in sorted((record.get("packages") or {}).items())) or "none",
    }
    said = []
    for fact, of in facts.items():
        values: dict[str, list[int]] = {}
        for index, record in made:
            values.setdefault(of(record), []).append(index)
        if len(values) == 1:
            said.append(f"{fact} {next(iter(values))}")
        else:
            said.append(f"{fact} " + "; ".join(f"{value} ({units.runs_in_words(runs)})" for value, runs in values.items()))
    missing = [index for index, record in records if not record]
    gap = f"; {units.runs_in_words(missing)} {'has' if len(missing) == 1 else 'have'} no provenance.json" if missing else ""
    return f"Provenance ({len(made)} runs' provenance.json): {_plain('; '.join(said) + gap)}"


def benchmark(report: dict) -> list[str]:
    """The lines of one benchmark: its name, scale and round, then its result as a list."""
    name = report["benchmark"]
    head = f"**{_plain(name)}**: {report['scale']} scale, ruleset {report['ruleset']}, {report['division']} division"
    return [head, "", f"- {_score(report)}", f"- {_validity(report)}", f"- {_rcp(report)}", *_runs(report), f"- {_provenance(report)}", ""]


def rst(workdir: Path, reports: Iterable[str]) -> str:
    """The front page's results: a paragraph per report of ``reports`` (paths under ``workdir``), by benchmark name;
    one not made yet, or unreadable, says so."""
    lines: list[str] = []
    for path in sorted(set(reports), key=lambda p: Path(p).parent.name):
        file = workdir / path
        try:
            report = json.loads(file.read_text())
        except FileNotFoundError:
            lines += [f"**{_plain(Path(path).parent.name)}**: no report yet ({_plain(path)})", ""]
            continue
        except (OSError, ValueError) as err:
            lines += [f"**{_plain(Path(path).parent.name)}**: {_plain(path)} not read as a report: {_plain(err)}", ""]
            continue
        try:
            lines += benchmark(report)
        except (KeyError, TypeError, AttributeError) as err:  # a report of another version, or written by hand
            lines += [f"**{_plain(Path(path).parent.name)}**: {_plain(path)} is not a whole report (no {_plain(err)}): make it again", ""]
    return "\n".join(lines) if lines else "No benchmark has a report yet."
