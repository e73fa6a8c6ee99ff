"""Logs the workflow did not write get a verdict that names what is wrong, never a traceback.

The fixture folder holds the MLPerf reference implementations' own convergence logs
(console ``.out`` files): deepseekv3_671b's lines carry no ``time_ms`` (the official
checker raises ``KeyError: 'time_ms'``), qwen35_397b_grpo's fail 6.1.0 on eval_samples
and four keys that round added. The run_stop status handling is tested on small
generated logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.cli import main
from mlperf_wf.results import compliance, plots, scoring
from tests.mllogs import write_lora_log

FIXTURES = Path(os.environ.get("MLPERF_WF_FIXTURES", Path(__file__).resolve().parents[3] / "shared" / "fixtures"))
REFERENCE = FIXTURES / "reference_logs_aa344c7"
DEEPSEEK = REFERENCE / "llm_moe_pretraining" / "nemo" / "rcp_logs"
QWEN = REFERENCE / "llm_post_training" / "rcp_logs"
QWEN_610_MISSING = ["lowest_numerical_precision_in_linear", "lowest_numerical_precision_in_attn", "lowest_numerical_precision_in_comm", "config_filename"]

CONVERGED = [(1536, 1.2), (2304, 0.95), (3264, 0.92)]
NOT_CONVERGED = [(1536, 1.2), (2304, 1.0), (3264, 0.97)]


def fixture_folder(path: Path) -> Path:
    if not path.is_dir():
        pytest.skip(f"reference logs fixture not present: {path}")
    return path


def deepseek_folders() -> list[Path]:
    return sorted(p for p in DEEPSEEK.iterdir() if p.is_dir()) if DEEPSEEK.is_dir() else [DEEPSEEK / "absent"]


def run_lines(out: str) -> dict[str, str]:
    """``seed_1.out: failed: ...`` lines of the score command, by file name."""
    lines = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    return {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines}


# ---- the reference logs ----


@pytest.mark.parametrize("folder", deepseek_folders(), ids=lambda p: p.name)
def test_score_deepseek_folder_says_time_ms_is_missing(folder, capsys):
    folder = fixture_folder(folder)
    assert main(["score", str(folder), "--ruleset", "6.1.0", "--jobs", "2"]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert captured.out.startswith(f"{folder.name}/deepseekv3_671b: no score")
    runs = run_lines(captured.out)
    assert sorted(runs) == sorted(p.name for p in folder.glob("seed_*.out"))
    for verdict in runs.values():
        assert verdict.startswith("failed: no time_ms on any :::MLLOG line (the checker needs it to order events)")
        assert "KeyError: 'time_ms'" in verdict


def test_score_of_the_folder_of_rcp_folders_gives_each_its_verdicts(capsys):
    folder = fixture_folder(DEEPSEEK)
    assert main(["score", str(folder), "--ruleset", "6.1.0", "--jobs", "2"]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    groups = [line.split(":", 1)[0] for line in captured.out.splitlines() if not line.startswith(" ")]
    assert groups == [f"{sub.name}/deepseekv3_671b" for sub in deepseek_folders()]


def test_score_qwen_at_610_names_eval_samples_and_the_missing_keys(tmp_path, capsys):
    folder = fixture_folder(QWEN / "GBS256")
    assert main(["score", str(folder), "--ruleset", "6.1.0", "--jobs", "2", "--json", str(tmp_path / "s.json")]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    runs = run_lines(captured.out)
    assert len(runs) == 6
    for verdict in runs.values():
        assert verdict == "failed: eval_samples is 256, 6.1.0 requires 251; missing: " + ", ".join(QWEN_610_MISSING)
    (score,) = json.loads((tmp_path / "s.json").read_text())
    assert score["benchmark"] == "qwen35_397b_grpo" and score["valid"] is False
    assert {r["verdict"] for r in score["runs"]} == {"failed"}
    assert {r["dropped"] for r in score["runs"]} == {"failed compliance"}


def test_score_qwen_at_600_says_the_round_has_no_rules_for_it(capsys):
    folder = fixture_folder(QWEN / "GBS512")
    assert main(["score", str(folder), "--ruleset", "6.0.0", "--jobs", "2"]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    (line,) = captured.err.strip().splitlines()  # one line for the folder, not a failed check per run
    assert "--ruleset 6.0.0: qwen35_397b_grpo" in line and "is not part of that round; its rounds: 6.1.0" in line, line


def test_compliance_of_a_deepseek_log_turns_the_checker_crash_into_a_verdict(tmp_path, capsys):
    result = fixture_folder(DEEPSEEK / "15360") / "seed_1.out"
    out = tmp_path / "v.json"
    assert main(["compliance", "--result", str(result), "--ruleset", "6.1.0", "--out", str(out)]) == 2
    verdict = json.loads(out.read_text())
    assert verdict["verdict"] == "failed"
    assert verdict["returncode"] != 0
    assert verdict["messages"][0] == "no time_ms on any :::MLLOG line (the checker needs it to order events)"
    assert any("crashed: KeyError: 'time_ms'" in m for m in verdict["messages"])
    assert not any("Traceback" in m for m in verdict["messages"] + verdict["problems"])
    err = capsys.readouterr().err
    assert "compliance check (6.1.0) FAILED: no time_ms on any :::MLLOG line" in err
    assert "Traceback" not in err


def test_compliance_of_a_qwen_log_at_610_names_what_is_wrong(tmp_path):
    result = fixture_folder(QWEN / "GBS256") / "seed_1.out"
    out = tmp_path / "v.json"
    assert main(["compliance", str(result), "--ruleset", "6.1.0", "--out", str(out)]) == 2
    verdict = json.loads(out.read_text())
    assert verdict["verdict"] == "failed"
    assert verdict["problems"] == ["eval_samples is 256, 6.1.0 requires 251", "missing: " + ", ".join(QWEN_610_MISSING)]
    # The checker's own messages, one per complaint (it joins them with dashed lines).
    for key in QWEN_610_MISSING:
        assert f"Required EXACTLY_ONE occurrence of '{key}' but found 0" in verdict["messages"]
    assert any(m.startswith("CHECK for 'eval_samples' failed") for m in verdict["messages"])


def test_compliance_of_a_qwen_log_at_600_is_a_verdict_not_a_crash(tmp_path):
    result = fixture_folder(QWEN / "GBS1024") / "seed_2.out"
    verdict = compliance.check(result, "6.0.0")
    assert verdict.verdict == "failed"
    assert verdict.problems[0].startswith("6.0.0 has no rules for qwen35_397b_grpo")
    assert "closed_qwen35_397b_grpo.yaml" in verdict.problems[0]


def test_the_installed_command_prints_no_traceback(tmp_path):
    folder = fixture_folder(DEEPSEEK / "16384")
    command = Path(sys.executable).with_name("mlperf-wf")
    if not command.is_file():
        pytest.skip(f"{command} not installed")
    scored = subprocess.run([str(command), "score", str(folder), "--ruleset", "6.1.0"], capture_output=True, text=True, check=False)
    assert scored.returncode == 1
    assert "Traceback" not in scored.stdout + scored.stderr
    assert "seed_3.out: failed: no time_ms on any :::MLLOG line" in scored.stdout
    checked = subprocess.run(
        [str(command), "compliance", "--result", str(folder / "seed_3.out"), "--ruleset", "6.0.0", "--out", str(tmp_path / "v.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 2
    assert "Traceback" not in checked.stdout + checked.stderr
    assert "no time_ms on any :::MLLOG line" in checked.stderr
    assert json.loads((tmp_path / "v.json").read_text())["verdict"] == "failed"


# ---- run_stop status (generated logs) ----


def without_run_stop(path: Path) -> Path:
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True) if '"run_stop"' not in line))
    return path


@pytest.mark.parametrize("status", ["aborted", "fail", "stopped_early"])
def test_any_status_but_success_with_only_the_target_missed_is_non_converged(tmp_path, status):
    log = write_lora_log(tmp_path / "r.txt", 1, 30.0, NOT_CONVERGED, status=status)
    verdict = compliance.check(log, "6.1.0")
    assert verdict.verdict == "non_converged", verdict.messages
    assert verdict.problems and verdict.problems[0].startswith("no eval_accuracy met the target")
    run = scoring.score_file(str(log), "6.1.0")
    assert run.verdict == "non_converged" and run.status == status and run.minutes is None
    assert main(["compliance", str(log), "--ruleset", "6.1.0", "--out", str(tmp_path / "v.json")]) == 0
    assert compliance.read(tmp_path / "v.json").verdict == "non_converged"


def test_success_status_that_missed_the_target_is_failed(tmp_path):
    log = write_lora_log(tmp_path / "r.txt", 1, 30.0, NOT_CONVERGED, status="success")
    assert compliance.check(log, "6.1.0").verdict == "failed"


def test_non_success_status_with_another_complaint_is_failed(tmp_path):
    log = write_lora_log(tmp_path / "r.txt", 1, 30.0, NOT_CONVERGED, status="fail", drop_keys=("lora_rank",))
    verdict = compliance.check(log, "6.1.0")
    assert verdict.verdict == "failed"
    assert "missing: lora_rank" in verdict.problems


def test_a_log_without_run_stop_is_failed_and_says_so(tmp_path, capsys):
    log = without_run_stop(write_lora_log(tmp_path / "r.txt", 1, 30.0, NOT_CONVERGED, status="fail"))
    verdict = compliance.check(log, "6.1.0")
    assert verdict.verdict == "failed"
    assert verdict.problems[0] == "run_stop is missing: the run ended without logging one"
    assert "Required EXACTLY_ONE occurrence of 'run_stop' but found 0" in verdict.messages
    assert not any("missing: run_stop" in p for p in verdict.problems)
    run = scoring.score_file(str(log), "6.1.0")
    assert run.verdict == "failed" and "run_stop is missing: the run ended without logging one" in run.problems
    assert main(["compliance", str(log), "--ruleset", "6.1.0", "--out", str(tmp_path / "v.json")]) == 2
    assert "run_stop is missing" in capsys.readouterr().err


def test_classify_knows_mlperf_loggings_statuses():
    target = ["Failed checks for eval_accuracy : v['value'] <= 0.925"]
    assert compliance.classify(True, [], ["success"]) == "passed"
    assert compliance.classify(False, target, ["aborted"]) == "non_converged"
    assert compliance.classify(False, target, ["fail"]) == "non_converged"
    assert compliance.classify(False, target, ["success"]) == "failed"
    assert compliance.classify(False, target, [None]) == "failed"
    assert compliance.classify(False, target, []) == "failed"
    assert compliance.classify(False, target, ["aborted", "aborted"]) == "failed"
    assert compliance.classify(False, [*target, "Required EXACTLY_ONE occurrence of 'lora_rank' but found 0"], ["aborted"]) == "failed"
    # A warning the checker prints beside the complaints does not fail a log.
    assert compliance.classify(False, [*target, "Required EXACTLY_ONE occurrence of 'seed' but found 2"], ["fail"]) == "non_converged"


def test_every_complaint_of_the_checker_output_is_a_message():
    output = (
        "INFO - Running compliance on file: r.txt\n"
        "WARNING -  Failed checks for eval_accuracy : v['value'] <= 0.925\n"
        "------------------------------\n"
        "failed test: s['run_stopped']\n"
        "current context[s]={}\n"
        "ERROR - FAILED\n"
        "** Logging output also at compliance_checker.log\n"
    )
    messages = compliance._checker_messages(output)
    assert messages == ["Failed checks for eval_accuracy : v['value'] <= 0.925", "failed test: s['run_stopped']\ncurrent context[s]={}"]
    assert compliance.classify(False, messages, ["aborted"]) == "failed"


# ---- logs without time_ms or of any name (generated) ----


def test_some_lines_without_time_ms_are_located(tmp_path):
    log = write_lora_log(tmp_path / "r.txt", 1, 20.0, CONVERGED)
    lines = log.read_text().splitlines()
    record = json.loads(lines[4].removeprefix(":::MLLOG "))
    del record["time_ms"]
    lines[4] = ":::MLLOG " + json.dumps(record)
    log.write_text("\n".join(lines) + "\n")
    expected = f"1 of {len(lines)} :::MLLOG lines have no time_ms (first: line 5) (the checker needs it to order events)"
    verdict = compliance.check(log, "6.1.0")
    assert verdict.verdict == "failed"
    assert verdict.problems[0] == expected
    assert any("crashed: KeyError: 'time_ms'" in p for p in verdict.problems)
    run = scoring.score_file(str(log), "6.1.0")
    assert run.verdict == "failed" and run.problems[0] == expected and run.seed == 1


def test_score_reads_a_folder_of_console_logs_of_any_name(tmp_path, capsys):
    folder = tmp_path / "GBS8"
    minutes = [20.0, 21.0, 19.0, 25.0, 22.0, 18.0, 23.0, 24.0, 20.5, 21.5]
    for i, m in enumerate(minutes):
        log = write_lora_log(tmp_path / "made" / f"{i}.txt", 100 + i, m, CONVERGED)
        suffix = [".out", ".log", ".txt"][i % 3]
        (folder / f"seed_{i + 1}{suffix}").parent.mkdir(parents=True, exist_ok=True)
        (folder / f"seed_{i + 1}{suffix}").write_text("starting\n[rank0]: " + log.read_text().replace("\n", "\nconsole noise\n"))
    (folder / "notes.txt").write_text("no MLPerf lines here\n")
    (folder / "seed_11.out").write_text("crashed before logging anything\n")
    (found,) = scoring.discover(folder)
    assert found.benchmark == "llama2_70b_lora" and found.system == "GBS8"
    assert [Path(p).name for p in found.result_files] == [f"seed_{i}{['.out', '.log', '.txt'][(i - 1) % 3]}" for i in range(1, 11)]
    assert main(["score", str(folder), "--ruleset", "6.1.0", "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("GBS8/llama2_70b_lora: ")
    assert f"{sum(sorted(minutes)[1:-1]) / 8:.4f} min" in out
    assert run_lines(out) == {}


def test_a_folder_without_logs_is_one_line_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.out").write_text("nothing\n")
    assert main(["score", str(tmp_path / "empty"), "--ruleset", "6.1.0"]) == 2
    assert "logs (*.out, *.log, *.txt) with :::MLLOG lines" in capsys.readouterr().err


# ---- reference curves in the convergence figure ----


def drawn_figures(monkeypatch) -> list:
    """The figures ``plots`` would save (saved as usual, and kept for inspection)."""
    figures = []
    save = plots._save

    def keep(fig, stem):
        figures.append([[line.get_xydata().tolist() for line in ax.get_lines()] for ax in fig.axes])
        return save(fig, stem)

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def one_run_report(tmp_path: Path, scale: str) -> dict:
    result = tmp_path / "result_0.txt"
    write_lora_log(result, 1, 1.0, CONVERGED)
    run = {"index": 0, "seed": 1, "result_file": str(result), "dropped": None, "minutes": 1.0}
    target = {"value": 0.925, "comparison": "<="}
    return {"benchmark": "deepseekv3_671b", "scale": scale, "ruleset": "6.1.0", "runs": [run], "quality_target": target}


def test_reference_curves_are_read_from_logs_the_official_parser_cannot_read(tmp_path):
    folder = tmp_path / "rcp_logs" / "16384"
    folder.mkdir(parents=True)
    (folder / "seed_1.out").write_text(
        "srun: starting\n"
        + ':::MLLOG {"key": "eval_accuracy", "value": 5.1, "metadata": {"samples_count": 16384}}\n'
        + ':::MLLOG {"key": "eval_accuracy", "value": 3.59, "metadata": {"samples_count": 32768}}\n'
        + ':::MLLOG {"key": "eval_accuracy", "value": broken\n'
        + ':::MLLOG {"key": "train_loss", "value": 3.0, "metadata": {"samples_count": 32768}}\n'
    )
    (folder / "seed_2.out").write_text(':::MLLOG {"key": "run_start", "value": null, "metadata": {}}\n')
    assert plots.reference_curves(tmp_path / "rcp_logs") == {"16384/seed_1": [(16384.0, 5.1), (32768.0, 3.59)]}


@pytest.mark.parametrize(("scale", "panels"), [("full", 1), ("tiny", 2)])
def test_the_convergence_figure_draws_the_deepseek_reference_runs(tmp_path, monkeypatch, scale, panels):
    folder = fixture_folder(DEEPSEEK / "16384")
    figures = drawn_figures(monkeypatch)
    paths = plots.convergence(one_run_report(tmp_path, scale), tmp_path / "convergence", folder)
    assert all(path.stat().st_size for path in paths)
    (axes,) = figures
    assert len(axes) == panels
    reference_lines = [line for line in axes[-1] if len(line) > 2 and line[0][0] >= 16384]
    assert len(reference_lines) == 6, "one curve per seed of the RCP folder"
    # the reference runs cross the 3.6 target in the 40s of steps of GBS 16384 (see the logs' last evals)
    assert all(line[-1][1] <= 3.6 for line in reference_lines)
    if panels == 2:
        assert [pair for line in axes[0] for pair in line if pair[0] >= 16384] == [], "a tiny run's own axes keep its samples"


def test_plot_cli_refuses_a_missing_reference_folder(tmp_path, capsys):
    report = tmp_path / "report.json"
    report.write_text(json.dumps(one_run_report(tmp_path, "tiny")))
    assert main(["plot", str(report), "--out-dir", str(tmp_path / "plots"), "--reference-logs", str(tmp_path / "absent")]) == 2
    assert "--reference-logs: " in capsys.readouterr().err
