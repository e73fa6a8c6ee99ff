"""Figures of a benchmark's runs and of all benchmarks, from the reports and logs.

Every figure labels what it shows directly (run/seed on the axis, dropped runs
annotated, target and reference drawn with their values), so no legend hunt is
needed. Each is written as PNG (for the Snakemake report) and SVG (for papers).
"""

from __future__ import annotations

import json
import operator
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker
import pandas as pd
from mlperf_logging.compliance_checker import mlp_parser

from mlperf_wf.kinds import Scale
from mlperf_wf.results import overview, units
from mlperf_wf.results.compliance import mllog_record
from mlperf_wf.results.scoring import LOG_SUFFIXES, eval_progress, fast_mlperf_logging

COUNTED, DROPPED, OUTSIDE = "#3b75af", "#b0b0b0", "#e0e0e0"


def _save(fig: plt.Figure, stem: Path) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text as text: found, selected and copied in a browser
        fig.savefig(paths[1], bbox_inches="tight")
    plt.close(fig)
    return paths


def time_to_train(report: dict, stem: Path) -> list[Path]:
    """Bars of minutes per run (labelled with seed), the olympic mean, dropped runs greyed and named; when the runs
    have power logs, their energy to train in a panel beside, with the olympic energy score."""
    runs = report["runs"]
    with_energy = any(run.get("energy_joules") is not None for run in runs)
    width = max(6, 0.6 * len(runs) + 2)
    fig, axes = plt.subplots(1, 2 if with_energy else 1, figsize=(2 * width if with_energy else width, 4), squeeze=False)
    ax = axes[0][0]
    if with_energy:
        _energy_panel(axes[0][1], report)
    labels = [f"run {r['index']}\nseed {r['seed']}" for r in runs]
    score = report["score"]
    unit, length = units.unit_for([r["minutes"] for r in runs] + [score["olympic_minutes"]])
    heights = [r["minutes"] / length if r["minutes"] is not None else 0.0 for r in runs]
    colours = [COUNTED if not r["dropped"] else (OUTSIDE if r["dropped"] == "outside the selected window" else DROPPED) for r in runs]
    bars = ax.bar(range(len(runs)), heights, color=colours)
    for bar, run in zip(bars, runs, strict=True):
        if run["dropped"]:
            text = run["dropped"] if run["minutes"] is not None else f"{run['dropped']}\n(no time)"
            ax.annotate(
                text,
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=7,
                rotation=90,
                xytext=(0, 3),
                textcoords="offset points",
            )
    if score["olympic_minutes"] is not None:
        # in the legend, above the bars: a label on the line itself sits behind the bars that reach it
        mean = score["olympic_minutes"]
        ax.axhline(mean / length, color="#d62728", linestyle="--", linewidth=1, label=f"olympic mean {mean / length:.4g} {unit}")
        ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.set_xticks(range(len(runs)), labels, fontsize=7)
    ax.set_ylabel(f"time to train ({unit}, run_start to run_stop)")
    ttt = score["time_to_train_minutes"]
    verdict = f"score {units.duration(ttt, 4)} (x{score['scaling_factor']:.4g} scaling)" if ttt is not None else "no valid score"
    ax.set_title(f"{report['benchmark']} ({report['scale']}, ruleset {report['ruleset']}): {verdict}", fontsize=10)
    ax.margins(y=0.25)
    return _save(fig, stem)


def _joules_unit(values: list[float]) -> tuple[float, str]:
    """A divisor and unit that keep the largest value readable (J, kJ, MJ, GJ)."""
    largest = max([abs(v) for v in values] or [0.0])
    for divisor, unit in ((1e9, "GJ"), (1e6, "MJ"), (1e3, "kJ")):
        if largest >= divisor:
            return divisor, unit
    return 1.0, "J"


def _energy_panel(ax: plt.Axes, report: dict) -> None:
    """Energy to train per run (the summarizer's, from the power logs) and the olympic energy score."""
    runs = report["runs"]
    score = report["score"]
    joules = [run.get("energy_joules") for run in runs]
    divisor, unit = _joules_unit([j for j in joules if j is not None] + [score.get("energy_joules") or 0.0])
    colours = [COUNTED if not r["dropped"] else (OUTSIDE if r["dropped"] == "outside the selected window" else DROPPED) for r in runs]
    bars = ax.bar(range(len(runs)), [(j or 0.0) / divisor for j in joules], color=colours)
    for bar, value, run in zip(bars, joules, runs, strict=True):
        refused = run.get("power_problems") and run.get("minutes") is not None
        text = f"{value / divisor:.4g}" if value is not None else "power log refused" if refused else "no power log"
        at = (bar.get_x() + bar.get_width() / 2, bar.get_height())
        ax.annotate(text, at, ha="center", va="bottom", fontsize=7, xytext=(0, 3), textcoords="offset points")
    energy = score.get("energy_joules")
    if energy is not None:
        ax.axhline(energy / divisor, color="#d62728", linestyle="--", linewidth=1)
        ax.annotate(f"energy score {energy / divisor:.4g} {unit}", (len(runs) - 0.5, energy / divisor), ha="right", va="bottom", color="#d62728", fontsize=8)
    ax.set_xticks(range(len(runs)), [f"run {r['index']}\nseed {r['seed']}" for r in runs], fontsize=7)
    ax.set_ylabel(f"energy to train ({unit}, MLPerf Power)")
    verdict = f"olympic {energy / divisor:.4g} {unit}" if energy is not None else "no energy score: " + "; ".join(score.get("energy_reasons") or [])[:80]
    ax.set_title(f"energy: {verdict}", fontsize=10)
    ax.margins(y=0.25)


UNJUDGED = ("refused", "missing")
"""Verdicts of runs whose log is not the run's (or is gone): no curve is drawn from it."""


def _curve_of(run: dict, ruleset: str, metric: str | None = None) -> list[tuple[float, float]]:
    """A report run's curve; none for a run whose log is refused or missing."""
    return [] if run.get("verdict") in UNJUDGED else eval_curve(Path(run["result_file"]), ruleset, metric)


def eval_curve(result_file: Path, ruleset: str, metric: str | None = None) -> list[tuple[float, float]]:
    """(samples or epochs, eval metric) points of one run (``metric``: only the events with that ``metric`` metadata)."""
    with fast_mlperf_logging():
        loglines, _ = mlp_parser.parse_file(str(result_file), ruleset=ruleset)
    points = []
    for line in loglines:
        if line.key == "eval_accuracy" and (metric is None or (line.value.get("metadata") or {}).get("metric") == metric):
            _, x = eval_progress(line.value.get("metadata") or {})
            if x is not None:
                points.append((float(x), float(line.value["value"])))
    return points


def reference_curves(folder: Path) -> dict[str, list[tuple[float, float]]]:
    """(samples or epochs, eval metric) points of every log under ``folder``, keyed by its path relative to it.

    Read line by line rather than with mlperf-logging's parser: reference convergence logs need not pass
    compliance (deepseekv3_671b's RCP logs have no ``time_ms``, which that parser requires), and a curve
    needs only the ``eval_accuracy`` events. Lines that are not MLLOG JSON are skipped; logs with no
    evaluation are left out."""
    curves = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in LOG_SUFFIXES):
        points = []
        with path.open(errors="replace") as lines:
            for line in lines:
                event = mllog_record(line) if '"eval_accuracy"' in line else None
                if event is None or event.get("key") != "eval_accuracy":
                    continue
                _, x = eval_progress(event.get("metadata") or {})
                try:
                    if x is not None:
                        points.append((float(x), float(event["value"])))
                except (ValueError, TypeError, KeyError):
                    continue
        if points:
            curves[path.relative_to(folder).with_suffix("").as_posix()] = points
    return curves


def _draw_reference(ax: plt.Axes, curves: dict[str, list[tuple[float, float]]], folder: Path) -> None:
    for label, points in curves.items():
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, "-", color="#7f7f7f", linewidth=0.8, alpha=0.7, marker=".", markersize=2)
        ax.annotate(label, (xs[-1], ys[-1]), fontsize=5, color="#7f7f7f", xytext=(3, 0), textcoords="offset points")
    ax.set_title(f"reference: {len(curves)} logs of {folder.name}/", fontsize=9)


def _draw_target(ax: plt.Axes, target: dict) -> None:
    """The target line, labelled at its left end, clear of the axis (where the runs are still far from it and cross
    it nowhere), on the side the curves reach last (below a loss's, above an accuracy's); the axis widened so the
    label stays inside it."""
    value, comparison = target["value"], target["comparison"]
    ax.axhline(value, color="#d62728", linewidth=1)
    below = comparison.startswith("<")
    ax.annotate(
        f"target {comparison} {value}",
        (0, value),
        xycoords=("axes fraction", "data"),
        xytext=(6, -3 if below else 3),
        textcoords="offset points",
        ha="left",
        va="top" if below else "bottom",
        color="#d62728",
        fontsize=8,
    )
    low, high = ax.get_ylim()
    room = 0.12 * ((max(high, value) - min(low, value)) or abs(value) or 1.0)
    ax.set_ylim(min(low, value - room) if below else low, high if below else max(high, value + room))


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
LINESTYLES = ("-", "--", "-.", ":")
"""Each run's marker and line style (by its place in the report): twenty runs differ in both, not in colour alone."""


def run_style(position: int) -> tuple[str, str]:
    """(marker, line style) of the run at ``position``."""
    return MARKERS[position % len(MARKERS)], LINESTYLES[position % len(LINESTYLES)]


MEETS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


def crossing(points: list[tuple[float, float]], target: dict) -> tuple[float, float] | None:
    """The first (samples, value) of ``points`` that meets ``target``; None when none does."""
    meets = MEETS[target["comparison"]]
    return next(((x, y) for x, y in points if meets(y, target["value"])), None)


def _draw_runs(ax: plt.Axes, report: dict, target: dict, metric: str | None = None) -> None:
    """Every run's curve in its own marker and line style (dropped runs say so in the legend), a large hollow marker
    where it first met ``target``, and the legend under the axes."""
    for position, run in enumerate(report["runs"]):
        points = _curve_of(run, report["ruleset"], metric)
        if not points:
            continue
        marker, linestyle = run_style(position)
        xs, ys = zip(*points, strict=True)
        dropped = f" ({run['dropped']})" if run["dropped"] else ""
        (curve,) = ax.plot(xs, ys, linestyle=linestyle, linewidth=1, marker=marker, markersize=3.5, label=f"seed {run['seed']}{dropped}")
        reached = crossing(points, target)
        if reached is not None:
            ax.plot(
                [reached[0]],
                [reached[1]],
                linestyle="none",
                marker=marker,
                markersize=11,
                markerfacecolor="none",
                markeredgecolor=curve.get_color(),
                markeredgewidth=1.5,
                gid=f"crossing-run-{run['index']}",
                label="_crossing",
            )
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.plot([], [], linestyle="none", marker="o", markersize=11, markerfacecolor="none", markeredgecolor="#444", label="reached the target")
        columns = min(5, len(handles) + 1)
        ax.legend(fontsize=6, ncol=columns, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.16))


def _metric_panels(report: dict, stem: Path) -> list[Path]:
    """One panel per metric with its target, for a benchmark whose evaluations log several (stable_diffusion)."""
    targets = report["quality_target"]["all"]
    fig, axes = plt.subplots(1, len(targets), figsize=(6 * len(targets), 4.5), squeeze=False)
    for ax, target in zip(axes[0], targets, strict=True):
        _draw_runs(ax, report, target, target["metric"])
        _draw_target(ax, target)
        ax.set_xlabel("samples (eval_accuracy samples_count)")
        ax.set_ylabel(target["metric"])
        ax.set_title(f"{report['benchmark']}: {target['metric']} of {len(report['runs'])} runs ({report['scale']})", fontsize=10)
    return _save(fig, stem)


def convergence(report: dict, stem: Path, reference_logs: Path | None = None) -> list[Path]:
    """Eval metric vs samples (or epochs) of every run, the quality target line and the RCP reference band;
    with ``reference_logs``, the reference's own curves too: on the same axes at full scale, in a panel of
    their own beside a tiny run (whose samples are not comparable)."""
    if len(report["quality_target"].get("all", [])) > 1:
        return _metric_panels(report, stem)
    curves = reference_curves(reference_logs) if reference_logs else {}
    beside = bool(curves) and report["scale"] != Scale.FULL
    fig, axes = plt.subplots(1, 2 if beside else 1, figsize=(12 if beside else 7, 4.5), squeeze=False)
    ax = axes[0][0]
    if curves and not beside:
        _draw_reference(ax, curves, reference_logs)
    _draw_runs(ax, report, report["quality_target"])
    _draw_target(ax, report["quality_target"])
    rcp = report.get("rcp")
    # RCPs describe the real benchmark; against a tiny run they would only squash the curves.
    if report["scale"] == Scale.FULL and rcp and rcp.get("reference_mean"):
        ax.axvspan(rcp["min_allowed_mean"], rcp["reference_mean"], color="#2ca02c", alpha=0.15)
        ax.annotate(
            f"RCP: mean {rcp['reference_mean']:.4g}, min allowed {rcp['min_allowed_mean']:.4g}",
            (rcp["reference_mean"], 1.0),
            xycoords=("data", "axes fraction"),
            color="#2ca02c",
            fontsize=8,
            ha="right",
            va="top",
        )
    unit = report.get("convergence_unit") or "samples_count"
    ax.set_xlabel(f"{'epochs' if unit == 'epoch_num' else 'samples'} (eval_accuracy {unit})")
    ax.set_ylabel(units.metric_of(report["benchmark"]), fontsize=8)
    drawn = f" and {len(curves)} reference logs (grey)" if curves and not beside else ""
    ax.set_title(f"{report['benchmark']}: convergence of {len(report['runs'])} runs ({report['scale']}){drawn}", fontsize=10)
    if beside:
        other = axes[0][1]
        _draw_reference(other, curves, reference_logs)
        _draw_target(other, report["quality_target"])
        other.set_xlabel("samples of the full-scale reference runs")
        other.set_title(f"reference at full scale: {len(curves)} logs of {reference_logs.name}/", fontsize=9)
    return _save(fig, stem)


def benchmark_figures(report_file: Path, out_dir: Path, reference_logs: Path | None = None) -> list[Path]:
    """Both per-benchmark figures (``reference_logs``: see ``convergence``)."""
    report = json.loads(report_file.read_text())
    return time_to_train(report, out_dir / "time_to_train") + convergence(report, out_dir / "convergence", reference_logs)


def _package_of(report: dict, packages: list[dict]) -> dict | None:
    """The package check of the report's round and division (a check without a division: of its round)."""
    for package in packages:
        if package.get("ruleset") == report["ruleset"] and package.get("division", report["division"]) == report["division"]:
            return package
    return None


def _rcp_in_words(report: dict) -> str:
    """The RCP check's verdict, why none was made, or (a run that is not full scale) that it does not apply."""
    rcp = report.get("rcp")
    if rcp is None:
        return f"not checked: {report.get('rcp_not_checked')}"
    return "does not apply at tiny scale" if report["scale"] != Scale.FULL else str(rcp.get("verdict"))


def summary(report_files: list[Path], csv_out: Path, stem: Path, package_checks: list[Path] | Path | None = None) -> pd.DataFrame:
    """``summary.csv`` (one row per benchmark, by name) and a figure of every benchmark's score; each row has the
    checker's verdict on the package of its round and division (``package_checks``: one per package)."""
    checks = [package_checks] if isinstance(package_checks, Path) else list(package_checks or [])
    packages = [json.loads(path.read_text()) for path in checks]
    from mlperf_wf.results import verdict as run_verdicts

    rows = []
    for path in report_files:
        report = json.loads(path.read_text())
        score = report["score"]
        judged = run_verdicts.report_verdicts(report)  # the runs judged from their files now, as every reader judges them
        stale = run_verdicts.disagreements(report, judged)
        package = _package_of(report, packages)
        package_errors = "; ".join(package["package_checker"]["errors"]) if package else ""
        rows.append(
            {
                "benchmark": report["benchmark"],
                "scale": report["scale"],
                "ruleset": report["ruleset"],
                "division": report["division"],
                "runs": len(report["runs"]),
                "required_runs": report["required_runs"],
                "time_to_train_minutes": score["time_to_train_minutes"],
                "energy_joules": score.get("energy_joules"),
                "olympic_minutes": score["olympic_minutes"],
                "scaling_factor": score["scaling_factor"],
                "rcp": _rcp_in_words(report),
                "run_verdicts": run_verdicts.outcome_counts(judged),
                "valid_submission": report["valid_submission"] and not stale,
                "reasons": "; ".join([*overview.validity_reasons(report), *stale]),
                "package_checker": ("passed" if package["package_checker"]["passed"] else f"errors: {package_errors}") if package else None,
            }
        )
    frame = pd.DataFrame(rows).sort_values("benchmark", kind="stable").reset_index(drop=True)
    csv_out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(csv_out, index=False)
    ax = _summary_bars(frame)
    passed = all(package["package_checker"]["passed"] for package in packages)
    verdict = "" if not packages else f" (package checker: {'passed' if passed else 'errors, see package_check.json'})"
    ax.set_title(f"All benchmarks{verdict}", fontsize=10)
    _save(ax.figure, stem)
    return frame


WIDE = 10.0
"""Scores whose largest is this many times the smallest are drawn on a log axis (a linear one squashes the short)."""


def _summary_bars(frame: pd.DataFrame) -> plt.Axes:
    """A bar per benchmark's score in the unit that fits the longest, on a log axis where the scores span a wide
    range; each bar says its score, scale and validity inside the axes: in the bar's end when it reaches past the
    middle, beside it otherwise; a benchmark with no score says so at the axis."""
    scores = [None if pd.isna(value) else float(value) for value in frame["time_to_train_minutes"]]
    known = [value for value in scores if value and value > 0]
    unit, length = units.unit_for(known)
    wide = bool(known) and max(known) / min(known) >= WIDE
    _, ax = plt.subplots(figsize=(8, 0.6 * max(1, len(frame)) + 1.5))
    positions = list(range(len(frame)))
    values = [(value or 0.0) / length for value in scores]
    ax.barh(positions, values, color=[COUNTED if valid else DROPPED for valid in frame["valid_submission"]])
    ax.set_yticks(positions, list(frame["benchmark"]))
    ax.invert_yaxis()  # first by name at the top, as the table reads
    largest = max(known) / length if known else 1.0
    if wide:
        ax.set_xscale("log")
        ax.set_xlim(min(known) / length / 2, largest * 2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    else:
        ax.set_xlim(0, largest * 1.1)
    ax.set_xlabel(f"time to train ({unit}, olympic mean x scaling{'; log scale' if wide else ''})")
    to_axes = ax.transAxes.inverted()
    rows = zip(positions, scores, frame["valid_submission"], frame["scale"], frame["energy_joules"], strict=True)
    for y, score, valid, scale, joules in rows:
        energy = f", {joules:.4g} J" if pd.notna(joules) else ""
        validity = "" if valid else ", not a valid submission"
        if score is None or score <= 0:
            ax.annotate(f"no score, {scale}{validity}", (0.01, y), xycoords=("axes fraction", "data"), va="center", fontsize=7)
            continue
        end = to_axes.transform(ax.transData.transform((score / length, y)))[0]
        past_middle = end > 0.5
        ax.annotate(
            f"{units.duration(score)}{energy}, {scale}{validity}",
            (score / length, y),
            xytext=(-3 if past_middle else 3, 0),
            textcoords="offset points",
            ha="right" if past_middle else "left",
            va="center",
            fontsize=7,
            color="white" if past_middle and valid else "black",
        )
    return ax
