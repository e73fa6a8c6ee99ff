"""The report of a set that can no longer be valid, stopped with ``stop_when_doomed``: written from its finished runs,
with why, the runs not started and the GPU-hours not spent (``report.json``'s ``doomed``), and no score; ``mlperf-wf
score``, ``mlperf-wf status``, the benchmark's page and the summary say the same. The workflow that writes it:
``tests/workflow/test_doomed.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlperf_wf.cli import main
from mlperf_wf.results import doom, overview, plots, report, status
from tests.mllogs import write_lora_log
from tests.results.test_compliance_and_report import CONVERGED, NOT_CONVERGED

LORA = "llama2_70b_lora"
FINISHED = {0: "aborted", 1: "aborted", 3: "success"}
"""Runs 0 and 1 did not converge, run 3 did; 2 and 4 to 9 were not started."""
DOOM = doom.Doom(
    reasons=("the olympic rule's allowance is used up: runs 0, 1 failed or did not converge, at most 1 of 10 scored runs may",),
    stopping=True,
    runs_not_started=(2, 4, 5, 6, 7, 8, 9),
    gpus_per_run=16,
    hours_per_run=0.5,
    hours_from="the finished runs' mean",
    gpu_hours=7 * 16 * 0.5,
)


def finished_runs(folder: Path) -> list[str]:
    args = []
    for index, run_status in FINISHED.items():
        result = folder / "runs" / str(index) / "result.txt"
        evals = CONVERGED if run_status == "success" else NOT_CONVERGED
        write_lora_log(result, 100 + index, 20.0 + index, evals, status=run_status, start_ms=1_800_000_000_000 + index * 10_000_000)
        verdict = result.parent / "compliance.json"
        assert main(["compliance", str(result), "--ruleset", "6.1.0", "--out", str(verdict)]) == 0
        args += ["--result", str(result), "--compliance", str(verdict)]
    return args


def report_command(folder: Path, *args: str) -> list[str]:
    command = ["report", "--benchmark", LORA, "--ruleset", "6.1.0", "--division", "closed", "--scale", "full", "--platform", "p"]
    return [*command, *args, "--out", str(folder / "report.json")]


@pytest.fixture
def doomed_report(tmp_path: Path) -> tuple[Path, dict]:
    folder = tmp_path / LORA
    record = json.dumps(DOOM.summary())
    assert main(report_command(folder, *finished_runs(folder), "--doomed", record)) == 0
    return folder, json.loads((folder / "report.json").read_text())


def test_a_doomed_set_s_report_names_its_finished_runs_the_runs_not_started_and_the_gpu_hours_and_gives_no_score(doomed_report):
    _, made = doomed_report
    assert [run["index"] for run in made["runs"]] == [0, 1, 3]
    assert [run["verdict"] for run in made["runs"]] == ["non_converged", "non_converged", "passed"]
    assert made["score"]["time_to_train_minutes"] is None and made["score"]["olympic_minutes"] is None
    assert made["score"]["counted_runs"] == []
    assert made["valid_submission"] is False
    first = made["valid_submission_reasons"][0]
    assert first == doom.report_reason(DOOM.text())
    assert first.startswith("the required set can no longer pass: the olympic rule's allowance is used up: runs 0, 1")
    assert "stop_when_doomed: 7 runs (2, 4, 5, 6, 7, 8, 9) not started, 56 GPU-hours not spent (7 x 16 GPUs x 0.5 h, the finished runs' mean)" in first
    doomed = made["doomed"]
    assert doomed["runs_not_started"] == [2, 4, 5, 6, 7, 8, 9]
    assert (doomed["gpus_per_run"], doomed["hours_per_run"], doomed["hours_from"], doomed["gpu_hours"]) == (16, 0.5, "the finished runs' mean", 56.0)
    assert doomed["stopping"] is True and doomed["reasons"] == list(DOOM.reasons)
    assert made["rcp"] is None and made["rcp_not_checked"] == "the required set can no longer be valid: no score, so no RCP check"


def test_a_set_that_can_still_be_valid_is_reported_as_before(tmp_path):
    folder = tmp_path / LORA
    assert main(report_command(folder, *finished_runs(folder))) == 0
    made = json.loads((folder / "report.json").read_text())
    assert made["doomed"] is None and [run["index"] for run in made["runs"]] == [0, 1, 2]
    assert not any(reason.startswith("the required set can no longer pass") for reason in made["valid_submission_reasons"])


def test_a_doomed_record_that_is_not_one_or_does_not_fit_the_runs_is_one_line(tmp_path, capsys):
    folder = tmp_path / LORA
    args = finished_runs(folder)
    capsys.readouterr()
    missing = json.dumps({k: v for k, v in DOOM.summary().items() if k != "gpu_hours"})
    said = {
        "{nope": "--doomed: '{nope' is not JSON (",
        missing: "--doomed: not a doomed-set record ('gpu_hours'); it needs reasons, stopping, runs_not_started, gpus_per_run,",
        json.dumps({**DOOM.summary(), "runs_not_started": [0, 4]}): "--doomed: runs not started [0, 4] do not fit the 3 finished runs given with --result (",
    }
    for record, start in said.items():
        assert main(report_command(folder, *args, "--doomed", record)) != 0
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"mlperf-wf: error: {start}"), line
    assert not (folder / "report.json").exists()


def test_score_of_the_doomed_set_s_folder_gives_the_report_s_verdict(doomed_report, tmp_path, capsys):
    folder, made = doomed_report
    assert main(["score", str(folder), "--ruleset", "6.1.0", "--json", str(tmp_path / "s.json")]) == 1
    (score,) = json.loads((tmp_path / "s.json").read_text())
    assert score["time_to_train"] is None and score["valid"] is False
    assert score["reasons"][0] == made["valid_submission_reasons"][0]
    assert f"{LORA}: no score, 3 runs INVALID: {made['valid_submission_reasons'][0]}" in capsys.readouterr().out
    # once the runs not started are made, the record of them no longer judges the folder
    write_lora_log(folder / "runs/2/result.txt", 102, 22.0, CONVERGED, start_ms=1_800_000_000_000 + 2 * 10_000_000)
    assert doom.recorded_in_report(folder / "report.json", [str(p) for p in sorted(folder.glob("runs/*/result.txt"))]) is None


def test_the_page_and_the_summary_of_a_doomed_set_say_why_the_runs_not_started_and_the_gpu_hours(doomed_report, tmp_path):
    folder, made = doomed_report
    page = overview.page(made, {})
    assert "No score: the required set can no longer be valid." in page
    assert "Runs not started: 2, 4, 5, 6, 7, 8, 9" in page
    assert "GPU-hours not spent: <b>56</b> = 7 runs x 16 GPUs x 0.5 h (the finished runs&#x27; mean)" in page
    frame = plots.summary([folder / "report.json"], tmp_path / "summary.csv", tmp_path / "summary")
    assert frame["valid_submission"].tolist() == [False]
    assert frame["reasons"][0].startswith(made["valid_submission_reasons"][0])


def test_status_reads_the_doomed_report_by_run_number(doomed_report):
    folder, _ = doomed_report
    summary = status._report_summary(folder / "report.json")
    assert summary["runs"] == 10 and summary["indices"] == [0, 1, 3] and summary["runs_not_started"] == [2, 4, 5, 6, 7, 8, 9]
    runs = [status.RunStatus(index=i, state="non_converged" if i in (0, 1) else "passed" if i == 3 else "not_started") for i in range(10)]
    assert status._with_staleness(summary, runs)["stale"] == []
    runs[3] = status.RunStatus(index=3, state="failed")
    assert status._with_staleness(summary, runs)["stale"] == ["run 3 is failed now, report.json says passed"]


def test_the_report_and_its_run_numbers_are_built_from_the_record():
    results = [Path(f"runs/{index}/result.txt") for index in FINISHED]
    assert report.doomed_run_numbers(results, DOOM) == [0, 1, 3]
    assert report.doomed_run_numbers(results, None) == [0, 1, 2]


def test_the_command_that_writes_the_report_is_the_invocation_again_its_targets_replaced_by_the_report():
    report_file = f"results/tiny/{LORA}/report.json"
    argv = ["/usr/bin/snakemake", "--profile", "slurm", "--config", "stop_when_doomed=true", "runs=3"]
    assert doom.next_command(argv, [], [report_file]) == "snakemake --profile slurm --config stop_when_doomed=true runs=3"
    argv = ["/x/snakemake/__main__.py", "-d", "camp aign", f"results/tiny/{LORA}/runs/2/result.txt", "--cores", "1"]
    assert doom.next_command(argv, [f"results/tiny/{LORA}/runs/2/result.txt"], [report_file]) == (
        f"snakemake -d 'camp aign' --cores 1 results/tiny/{LORA}/report.json"
    )
