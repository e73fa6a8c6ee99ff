"""What the figures say: the benchmark's metric on the axis, the seeds and the olympic mean in legends (labels at
the curves' ends overlapped where runs stop at the same evaluation; a label on the mean's line sat behind the bars)."""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.config import registry
from mlperf_wf.results import plots
from tests.mllogs import write_lora_log
from tests.run.test_reference_logs import CONVERGED


def kept_figures(monkeypatch) -> list:
    figures = []
    save = plots._save

    def keep(fig, stem):
        figures.append(fig)
        return save(fig, stem)

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def three_run_report(tmp_path: Path) -> dict:
    runs = []
    for index in range(3):
        result = tmp_path / f"result_{index}.txt"
        write_lora_log(result, 1234 + index, 1.0 + index, CONVERGED)  # every run stops at the same evaluation
        runs.append({"index": index, "seed": 1234 + index, "result_file": str(result), "dropped": None, "minutes": 1.0 + index})
    score = {"olympic_minutes": 2.0, "time_to_train_minutes": 2.0, "scaling_factor": 1.0}
    target = {"value": 0.925, "comparison": "<="}
    return {"benchmark": "llama2_70b_lora", "scale": "tiny", "ruleset": "6.1.0", "runs": runs, "quality_target": target, "score": score}


def test_the_convergence_figure_names_the_metric_and_keeps_the_seeds_in_a_legend(tmp_path, monkeypatch):
    figures = kept_figures(monkeypatch)
    plots.convergence(three_run_report(tmp_path), tmp_path / "convergence")
    (ax,) = figures[0].axes
    assert ax.get_ylabel() == registry.load_benchmark("llama2_70b_lora").quality_metric, "a loss is named a loss"
    assert [text.get_text() for text in ax.get_legend().get_texts()][:3] == ["seed 1234", "seed 1235", "seed 1236"]
    assert not [text for text in ax.texts if text.get_text().startswith("seed ")], "no seed label at a curve's end"


def test_the_time_to_train_figure_keeps_the_olympic_mean_above_the_bars(tmp_path, monkeypatch):
    figures = kept_figures(monkeypatch)
    plots.time_to_train(three_run_report(tmp_path), tmp_path / "time_to_train")
    (ax,) = figures[0].axes
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["olympic mean 2 minutes"]
    assert not [text for text in ax.texts if "olympic" in text.get_text()]


def ten_run_report(tmp_path: Path) -> dict:
    """Ten runs, each reaching the target at another evaluation (run i at its (i % 3 + 3)rd)."""
    report = three_run_report(tmp_path)
    runs = []
    for index in range(10):
        result = tmp_path / f"ten_{index}.txt"
        reached = index % 3 + 3
        evals = [(768 * (k + 1), 1.5 - 0.1 * k) for k in range(reached - 1)] + [(768 * reached, 0.92)]
        write_lora_log(result, 1234 + index, 1.0 + index, evals)
        runs.append({"index": index, "seed": 1234 + index, "result_file": str(result), "dropped": None, "minutes": 1.0 + index})
    return {**report, "runs": runs}


def test_the_convergence_figure_tells_runs_apart_without_colour_and_marks_where_each_crossed_the_target(tmp_path, monkeypatch):
    figures = kept_figures(monkeypatch)
    report = ten_run_report(tmp_path)
    plots.convergence(report, tmp_path / "convergence")
    (ax,) = figures[0].axes
    curves = [line for line in ax.get_lines() if str(line.get_label()).startswith("seed ")]
    assert len(curves) == 10
    assert len({(line.get_marker(), line.get_linestyle()) for line in curves}) == 10, "each run has its own marker and line style"
    for run in report["runs"]:
        (crossing,) = [line for line in ax.get_lines() if line.get_gid() == f"crossing-run-{run['index']}"]
        reached = run["index"] % 3 + 3
        assert list(crossing.get_xdata()) == [768 * reached] and list(crossing.get_ydata()) == [0.92]


def renderer_of(fig):
    """The figure drawn again as it was saved (a closed figure has no canvas of its own)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def inside(inner, outer, slack: float = 0.5) -> bool:
    return inner.x0 >= outer.x0 - slack and inner.x1 <= outer.x1 + slack and inner.y0 >= outer.y0 - slack and inner.y1 <= outer.y1 + slack


def test_the_target_label_sits_inside_the_axes_clear_of_the_y_axis(tmp_path, monkeypatch):
    figures = kept_figures(monkeypatch)
    plots.convergence(three_run_report(tmp_path), tmp_path / "convergence")
    fig = figures[0]
    (ax,) = fig.axes
    renderer = renderer_of(fig)
    (label,) = [text for text in ax.texts if text.get_text().startswith("target")]
    box, frame = label.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert inside(box, frame) and box.x0 > frame.x0 + 5, (box, frame)


def summary_of(tmp_path: Path, minutes: dict[str, float | None]) -> tuple:
    import json

    reports = []
    for name, value in minutes.items():
        report = {
            "benchmark": name, "scale": "tiny", "ruleset": "6.1.0", "division": "closed", "runs": [], "required_runs": 10,
            "score": {"time_to_train_minutes": value, "olympic_minutes": value, "scaling_factor": 1.0, "energy_joules": None},
            "valid_submission": False, "valid_submission_reasons": ["scale is 'tiny'"], "rcp": None, "rcp_not_checked": "tiny",
        }  # fmt: skip
        path = tmp_path / name / "report.json"
        path.parent.mkdir()
        path.write_text(json.dumps(report))
        reports.append(path)
    return reports


def test_the_summary_uses_a_log_axis_for_wide_ranges_and_keeps_its_text_inside_the_frame(tmp_path, monkeypatch):
    figures = kept_figures(monkeypatch)
    reports = summary_of(tmp_path, {"llama2_70b_lora": 2.3, "retinanet": 85.0, "rgat": 0.0207, "bert": None})
    frame = plots.summary(reports, tmp_path / "summary.csv", tmp_path / "summary")
    assert sorted(frame["benchmark"]) == ["bert", "llama2_70b_lora", "retinanet", "rgat"], "every report is in the summary"
    fig = figures[0]
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    renderer = renderer_of(fig)
    axes_box = ax.get_window_extent(renderer)
    said = {text.get_text() for text in ax.texts}
    assert any(text.startswith("1.24 seconds") for text in said) and any(text.startswith("85 minutes") for text in said), said
    assert any(text.startswith("no score") for text in said), said
    for text in ax.texts:
        assert inside(text.get_window_extent(renderer), axes_box), text.get_text()
    title = ax.title.get_window_extent(renderer)
    assert inside(title, fig.bbox), "the title inside the figure"


def test_the_summary_keeps_a_linear_axis_when_the_scores_are_close(tmp_path, monkeypatch):
    figures = kept_figures(monkeypatch)
    plots.summary(summary_of(tmp_path, {"llama2_70b_lora": 2.3, "retinanet": 8.5}), tmp_path / "summary.csv", tmp_path / "summary")
    (ax,) = figures[0].axes
    assert ax.get_xscale() == "linear"


def test_the_time_to_train_figure_counts_a_tiny_campaign_in_seconds(tmp_path, monkeypatch):
    figures = kept_figures(monkeypatch)
    report = three_run_report(tmp_path)
    for run in report["runs"]:
        run["minutes"] /= 100
    report["score"] = {**report["score"], "olympic_minutes": 0.02, "time_to_train_minutes": 0.02}
    plots.time_to_train(report, tmp_path / "time_to_train")
    (ax,) = figures[0].axes
    assert ax.get_ylabel().startswith("time to train (seconds") and "score 1.2 seconds" in ax.get_title()
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["olympic mean 1.2 seconds"]


def test_the_summary_says_the_rcp_check_does_not_apply_at_tiny_scale(tmp_path):
    import json

    (tiny,) = summary_of(tmp_path, {"rgat": 0.0207})
    report = json.loads(tiny.read_text())
    report["rcp"] = {"verdict": "Fail", "message": "RCP found"}
    report["valid_submission_reasons"] = ["scale is 'tiny'", "RCP check: Fail (RCP found)"]
    tiny.write_text(json.dumps(report))
    full = tmp_path / "full.json"
    full.write_text(json.dumps({**report, "benchmark": "retinanet", "scale": "full"}))
    frame = plots.summary([tiny, full], tmp_path / "summary.csv", tmp_path / "summary")
    assert list(frame["rcp"]) == ["Fail", "does not apply at tiny scale"], "retinanet (full) first, by name"
    assert list(frame["reasons"]) == ["scale is 'tiny'; RCP check: Fail (RCP found)", "scale is 'tiny'"]


def test_a_benchmark_with_two_metrics_gets_a_panel_each_named_by_its_metric_with_each_crossing(tmp_path, monkeypatch):
    import json

    figures = kept_figures(monkeypatch)
    report = three_run_report(tmp_path)
    for run in report["runs"]:  # each evaluation logged as an FID and as a CLIP score, as stable_diffusion logs them
        lines = []
        for line in Path(run["result_file"]).read_text().splitlines():
            record = json.loads(line.split(" ", 1)[1]) if line.startswith(":::MLLOG") else None
            if record and record["key"] == "eval_accuracy":
                for metric, value in (("FID", 100 * record["value"]), ("CLIP", 0.2 / record["value"])):
                    lines.append(":::MLLOG " + json.dumps({**record, "value": value, "metadata": {**record["metadata"], "metric": metric}}))
            else:
                lines.append(line)
        Path(run["result_file"]).write_text("\n".join(lines) + "\n")
    targets = [{"metric": "FID", "comparison": "<=", "value": 93.0}, {"metric": "CLIP", "comparison": ">=", "value": 0.2}]
    report = {**report, "benchmark": "stable_diffusion", "quality_target": {**targets[0], "all": targets}}
    plots.convergence(report, tmp_path / "convergence")
    fid, clip = figures[0].axes
    assert (fid.get_ylabel(), clip.get_ylabel()) == ("FID", "CLIP")
    for ax, reached in ((fid, 3264), (clip, 2304)):  # FID 120, 95, 92 against <= 93; CLIP 0.167, 0.211, 0.217 against >= 0.2
        crossings = [line for line in ax.get_lines() if str(line.get_gid()).startswith("crossing-run-")]
        assert [line.get_xdata()[0] for line in crossings] == [reached] * 3
