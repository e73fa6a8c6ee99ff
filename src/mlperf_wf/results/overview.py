"""A benchmark's page in the HTML report: what ``report.json`` says, for a reader.

The score (or why there is none), the ruleset and division the runs were checked under (the report's, not the
config's ``latest``), whether the set is a valid submission and why not, the RCP check or why it was not made, a table
of every run by its folder with its compliance verdict and the checker's reasons, and both figures inline (SVG). One
self-contained file: Snakemake's report shows it in its frame, and it opens on its own.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

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
    if score["time_to_train_minutes"] is None:
        return ["<p><b>No score.</b></p>"]
    lines = [f"<p><b>Score: {_number(score['time_to_train_minutes'])} minutes</b> (olympic mean {_number(score['olympic_minutes'])} min"]
    source = "" if score["scaling_source"] == "none" else f" ({html.escape(str(score['scaling_source']))})"
    lines.append(f" × scaling factor {_number(score['scaling_factor'])}{source}; runs {score['counted_runs']} counted)")
    if score.get("energy_joules"):
        lines.append(f"; energy to train {_number(score['energy_joules'])} J")
    return ["".join(lines) + "</p>"]


def _rcp(report: dict) -> str:
    rcp = report.get("rcp")
    if rcp is None:
        return f"<p>RCP check: not made: {html.escape(report.get('rcp_not_checked') or 'no reason recorded')}</p>"
    words = f"RCP check: <b>{html.escape(rcp['verdict'])}</b> ({html.escape(rcp['message'])})"
    if rcp.get("reference_mean") is not None:
        words += (
            f"; runs' olympic mean {_number(rcp.get('samples_to_converge'))} to converge, reference mean {_number(rcp['reference_mean'])}, "
            f"fastest allowed {_number(rcp.get('min_allowed_mean'))}"
        )
    return f"<p>{words}</p>"


def _runs(report: dict) -> list[str]:
    unit = report.get("convergence_unit") or "samples_count"
    header = ["run (folder)", "seed", "status", "verdict", "why", "minutes", f"to converge ({unit})", "final eval", "scored"]
    rows = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for run in report["runs"]:
        folder = str(Path(run["result_file"]).parent)
        verdict = run.get("verdict") or run["compliance"]  # the verdict every reader gives; older reports: the checker's
        shown = verdict if verdict != "passed" else run["compliance"]
        why = "; ".join(run.get("compliance_problems") or []) or ("—" if shown == "passed" else "")
        if run.get("power_problems") and run.get("energy_joules") is None and verdict == "passed":
            why += f" (power logs refused: {'; '.join(run['power_problems'])})"
        scored = f"no: {run['dropped']}" if run["dropped"] else "yes"
        rows.append(
            "<tr>"
            + _cell(f"run {run['index']} ({folder})")
            + _cell(run["seed"])
            + _cell(run["status"])
            + _cell(shown, shown)
            + _cell(why)
            + _cell(_number(run["minutes"]))
            + _cell(_number(run["samples_to_converge"]))
            + _cell(_number(run["final_eval_accuracy"]))
            + _cell(scored)
            + "</tr>"
        )
    rows.append("</table>")
    return rows


def page(report: dict, figures: dict[str, str]) -> str:
    """The page of ``report`` with ``figures`` (caption -> SVG text) inline."""
    name = report["benchmark"]
    target = report["quality_target"]
    lines = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{html.escape(name)}: MLPerf Training runs</title>',
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(name)}</h1>",
        f"<p>{html.escape(report['scale'])} scale; checked under ruleset <b>{html.escape(report['ruleset'])}</b>, "
        f"<b>{html.escape(report['division'])} division</b>; quality target {html.escape(target['comparison'])} {target['value']}; "
        f"{len(report['runs'])} runs made, {report['required_runs']} required</p>",
        *_score(report),
        f"<p>Valid submission: <b>{'yes' if report['valid_submission'] else 'no'}</b></p>",
    ]
    reasons = report.get("valid_submission_reasons") or []
    if reasons:
        lines += ["<ul>", *(f"<li>{html.escape(reason)}</li>" for reason in reasons), "</ul>"]
    lines.append(_rcp(report))
    lines += ["<h2>Runs</h2>", *_runs(report)]
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
