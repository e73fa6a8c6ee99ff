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
    assert ax.get_ylabel() == f"eval_accuracy: {registry.load_benchmark('llama2_70b_lora').quality_metric}"
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["seed 1234", "seed 1235", "seed 1236"]
    assert not [text for text in ax.texts if text.get_text().startswith("seed ")], "no seed label at a curve's end"


def test_the_time_to_train_figure_keeps_the_olympic_mean_above_the_bars(tmp_path, monkeypatch):
    figures = kept_figures(monkeypatch)
    plots.time_to_train(three_run_report(tmp_path), tmp_path / "time_to_train")
    (ax,) = figures[0].axes
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["olympic mean 2 min"]
    assert not [text for text in ax.texts if "olympic" in text.get_text()]
