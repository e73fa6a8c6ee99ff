"""A benchmark's page in the HTML report: what ``report.json`` says, for a reader, result first.

The score in the unit that fits it (or why there is none), the ruleset and division the runs were checked under (the
report's, not the config's ``latest``), whether the set is a valid submission and why not, the RCP check or why it was
not made (at tiny scale: that it does not apply), a table of every run by its folder with its verdict and why in words,
what made each run (its ``provenance.json``), and both figures inline (SVG). One self-contained file: Snakemake's
report shows it in its frame, and it opens on its own.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path

from mlperf_wf.kinds import Scale
from mlperf_wf.results import units

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #eee; }
td.passed { background: #e3f4e3; } td.passed_except_declared { background: #fff3d6; }
td.failed, td.non_converged, td.refused, td.missing { background: #f8e0e0; }
.figure svg { max-width: 100%; height: auto; }
"""


def _number(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def _cell(value: object, css: str = "") -> str:
    attribute = f' class="{css}"' if css else ""
    return f"<td{attribute}>{html.escape(str(value))}</td>"


def _score(report: dict) -> list[str]:
    score = report["score"]
    if report.get("doomed"):
        return ["<p><b>No score: the required set can no longer be valid.</b></p>", *doomed_lines(report["doomed"])]
    if score["time_to_train_minutes"] is None:
        return ["<p><b>No score.</b></p>"]
    counted = score["counted_runs"]
    lines = [f"<p><b>Score: {units.duration(score['time_to_train_minutes'])}</b> (olympic mean {units.duration(score['olympic_minutes'])}"]
    source = "" if score["scaling_source"] == "none" else f" ({html.escape(str(score['scaling_source']))})"
    lines.append(f" × scaling factor {_number(score['scaling_factor'])}{source}; {units.runs_in_words(counted)} counted)")
    if score.get("energy_joules"):
        lines.append(f"; energy to train {_number(score['energy_joules'])} J")
    return ["".join(lines) + "</p>"]


def doomed_lines(doomed: dict) -> list[str]:
    """A set stopped as it could no longer be valid: why, the runs not started and the GPU-hours not spent, with how
    they were counted (``report.json``'s ``doomed``)."""
    runs = doomed["runs_not_started"]
    hours = "?" if doomed["hours_per_run"] is None else f"{doomed['hours_per_run']:.3g} h"
    how = f"{len(runs)} runs x {doomed['gpus_per_run']} GPUs x {hours} ({doomed['hours_from']})"
    spent = "not spent" if doomed["stopping"] else "the runs left would spend"
    return [
        "<ul>",
        *(f"<li>{html.escape(reason)}</li>" for reason in doomed["reasons"]),
        f"<li>Runs not started: {html.escape(', '.join(map(str, runs)) or 'none')}</li>",
        f"<li>GPU-hours {spent}: <b>{doomed['gpu_hours']:.4g}</b> = {html.escape(how)}</li>",
        "</ul>",
    ]


NOT_AT_TINY = "does not apply at tiny scale: reference convergence points describe the benchmark's own model and data, not the tiny tier's"
"""What the page says of the RCP check of a run that is not full scale (the checker's verdict on it means nothing)."""


def rcp_summary(report: dict) -> tuple[str | None, str]:
    """The RCP check as a reader is told it: its verdict (None where there is none: not made, or tiny scale, where it
    does not apply) and the words that go with it."""
    rcp = report.get("rcp")
    if rcp is None:
        return None, f"not made: {report.get('rcp_not_checked') or 'no reason recorded'}"
    if report["scale"] != Scale.FULL:
        return None, NOT_AT_TINY
    return rcp["verdict"], rcp["message"]


def _rcp(report: dict) -> str:
    verdict, said = rcp_summary(report)
    if verdict is None:
        return f"<p>RCP check: {html.escape(said)}</p>"
    rcp = report["rcp"]
    words = f"RCP check: <b>{html.escape(verdict)}</b> ({html.escape(said)})"
    if rcp.get("reference_mean") is not None:
        words += (
            f"; runs' olympic mean {_number(rcp.get('samples_to_converge'))} to converge, reference mean {_number(rcp['reference_mean'])}, "
            f"fastest allowed {_number(rcp.get('min_allowed_mean'))}"
        )
    return f"<p>{words}</p>"


def validity_reasons(report: dict) -> list[str]:
    """Why the set is not a valid submission, as a reader is told: at tiny scale without the RCP checker's verdict
    (the scale is the reason, and the RCP check does not apply to it)."""
    reasons = report.get("valid_submission_reasons") or []
    return reasons if report["scale"] == Scale.FULL else [reason for reason in reasons if not reason.startswith("RCP check: ")]


def shown_verdict(run: dict) -> str:
    """The verdict every reader gives the run (older reports: the checker's), with the checker's nuance for a run
    that counts (``passed_except_declared``: it passed except for the tiny tier's declared open rules)."""
    verdict = run.get("verdict") or run["compliance"]
    return verdict if verdict != "passed" else run["compliance"]


def why(run: dict, verdict: str, progress: str) -> str:
    """Why the run has its verdict, in words: where it reached the target, or what kept it from counting."""
    problems = list(run.get("compliance_problems") or [])
    if verdict in ("passed", "passed_except_declared"):
        samples = run.get("samples_to_converge")
        words = ["reached the target" + (f" at {_number(samples)} {progress}" if samples is not None else ""), *problems]
    elif verdict == "non_converged" or (run.get("status") not in (None, "success") and not problems):
        last = run.get("final_eval_accuracy")
        words = ["did not reach the target" + (f" (last eval {_number(last)})" if last is not None else ""), *problems]
    else:
        words = problems or [run.get("verdict_reason") or f"{verdict}: no reason recorded"]
    why = "; ".join(words)
    if run.get("power_problems") and run.get("energy_joules") is None and verdict in ("passed", "passed_except_declared"):
        why += f" (power logs refused: {'; '.join(run['power_problems'])})"
    return why


def _runs(report: dict) -> list[str]:
    unit = report.get("convergence_unit") or "samples_count"
    progress = units.progress_unit(unit)
    minutes = [run["minutes"] for run in report["runs"]]
    shown_unit, length = units.unit_for(minutes)
    metric = units.metric_of(report["benchmark"])
    header = ["run (folder)", "seed", "status", "verdict", "why", f"time to train ({shown_unit})", f"to converge ({progress})", f"final {metric}", "scored"]
    rows = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for run in report["runs"]:
        folder = str(Path(run["result_file"]).parent)
        shown = shown_verdict(run)
        scored = f"no: {run['dropped']}" if run["dropped"] else "yes"
        rows.append(
            "<tr>"
            + _cell(f"run {run['index']} ({folder})")
            + _cell(run["seed"])
            + _cell(run["status"])
            + _cell(shown, shown)
            + _cell(why(run, shown, progress))
            + _cell(_number(None if run["minutes"] is None else run["minutes"] / length))
            + _cell(_number(run["samples_to_converge"]))
            + _cell(_number(run["final_eval_accuracy"]))
            + _cell(scored)
            + "</tr>"
        )
    rows.append("</table>")
    return rows


def gpus_in_words(gpus: list[str]) -> str:
    """``8 × NVIDIA H100 80GB HBM3, 550.54``: each kind of accelerator a run saw (nvidia-smi's name and driver) and
    how many; ``none`` on a CPU host."""
    return ", ".join(f"{count} × {name}" for name, count in Counter(map(str, gpus)).items()) or "none"


def _provenance(report: dict) -> list[str]:
    """What made each run, from its ``provenance.json`` (the report's ``made_with``): launcher, host, GPUs, image,
    the workflow's commit, Python and package versions, and the command."""
    made = [(run, run.get("made_with")) for run in report["runs"]]
    if not any(record for _, record in made):
        return ["<p>No run has a <code>provenance.json</code>: the logs were not made by this workflow.</p>"]
    header = ["run", "launcher", "host", "GPUs", "image", "workflow commit", "Python", "packages", "command"]
    rows = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for run, record in made:
        if not record:
            rows.append(f'<tr>{_cell(run["index"])}<td colspan="{len(header) - 1}">no provenance.json</td></tr>')
            continue
        git = record.get("workflow_git") or {}
        commit = str(git.get("commit") or "unknown")[:12] + (" (uncommitted changes)" if git.get("dirty") else "")
        packages = ", ".join(f"{name} {version}" for name, version in sorted((record.get("packages") or {}).items()))
        command = html.escape(str(record.get("command") or ""))
        rows.append(
            "<tr>"
            + _cell(run["index"])
            + _cell(record.get("launcher") or "—")
            + _cell(record.get("host") or "—")
            + _cell(gpus_in_words(record.get("gpus") or []))
            + _cell(record.get("image") or "none")
            + _cell(commit)
            + _cell(record.get("python") or "—")
            + _cell(packages or "—")
            + f"<td><details><summary>command</summary><code>{command}</code></details></td>"
            + "</tr>"
        )
    rows.append("</table>")
    return rows


def page(report: dict, figures: dict[str, str]) -> str:
    """The page of ``report`` with ``figures`` (caption -> SVG text) inline."""
    name = report["benchmark"]
    target = report["quality_target"]
    goal = f"{units.metric_of(name)} {target['comparison']} {target['value']}"
    lines = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(name)}: MLPerf Training runs</title>',
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(name)}</h1>",
        f"<p>{html.escape(report['scale'])} scale; checked under ruleset <b>{html.escape(report['ruleset'])}</b>, "
        f"<b>{html.escape(report['division'])} division</b>; quality target: {html.escape(goal)}; "
        f"{len(report['runs'])} runs made, {report['required_runs']} required</p>",
        *_score(report),
        f"<p>Valid submission: <b>{'yes' if report['valid_submission'] else 'no'}</b></p>",
    ]
    reasons = validity_reasons(report)
    if reasons:
        lines += ["<ul>", *(f"<li>{html.escape(reason)}</li>" for reason in reasons), "</ul>"]
    lines.append(_rcp(report))
    lines += ["<h2>Runs</h2>", *_runs(report)]
    lines += ["<h2>Provenance</h2>", *_provenance(report)]
    for caption, svg in figures.items():
        lines += [f"<h2>{html.escape(caption)}</h2>", f'<div class="figure">{svg}</div>']
    lines.append("</body></html>")
    return "\n".join(lines) + "\n"


def write(report_file: Path, figures: list[Path], out: Path) -> Path:
    """Write the page of ``report_file`` with the SVG ``figures`` (named by their stem) to ``out``."""
    report = json.loads(report_file.read_text())
    inline = {path.stem.replace("_", " "): _svg_element(path.read_text()) for path in figures}
    out.write_text(page(report, inline))
    return out


def _svg_element(text: str) -> str:
    """The ``<svg>`` element of an SVG file (its XML declaration and doctype dropped: they may not sit inside HTML)."""
    start = text.find("<svg")
    return text[start:] if start >= 0 else text
