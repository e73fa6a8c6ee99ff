"""Official compliance verdicts and the olympic report on generated logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlperf_wf.cli import main
from mlperf_wf.results import compliance
from tests.mllogs import write_lora_log

# Samples to converge above the llama2_70b_lora RCP mean at GBS 8 (3178.7), so the RCP check passes unscaled.
CONVERGED = [(1536, 1.2), (2304, 0.95), (3264, 0.92)]
NOT_CONVERGED = [(1536, 1.2), (2304, 1.0), (3264, 0.97)]


def test_compliant_log_passes_the_official_checker(tmp_path):
    result = compliance.check(write_lora_log(tmp_path / "r.txt", 1, 20.0, CONVERGED), "6.1.0")
    assert result.verdict == "passed", result.messages


def test_run_that_never_reached_the_target_is_non_converged(tmp_path):
    result = compliance.check(write_lora_log(tmp_path / "r.txt", 1, 30.0, NOT_CONVERGED, status="aborted"), "6.1.0")
    assert result.verdict == "non_converged", result.messages
    assert result.returncode == 1


def test_missing_required_key_fails_and_the_cli_fails_the_job(tmp_path, capsys):
    log = write_lora_log(tmp_path / "r.txt", 1, 20.0, CONVERGED, drop_keys=("lora_rank",))
    assert compliance.check(log, "6.1.0").verdict == "failed"
    assert main(["compliance", str(log), "--ruleset", "6.1.0", "--out", str(tmp_path / "v.json")]) == 2
    assert "compliance check (6.1.0) FAILED" in capsys.readouterr().err
    assert json.loads((tmp_path / "v.json").read_text())["verdict"] == "failed"


def make_runs(tmp_path, minutes, statuses=None, seeds=None):
    args = []
    for i, m in enumerate(minutes):
        status = (statuses or {}).get(i, "success")
        evals = CONVERGED if status == "success" else NOT_CONVERGED
        seed = (seeds or list(range(100, 100 + len(minutes))))[i]
        result = write_lora_log(tmp_path / "runs" / str(i) / "result.txt", seed, m, evals, status=status, start_ms=1_800_000_000_000 + i * 10_000_000)
        verdict = tmp_path / "runs" / str(i) / "compliance.json"
        assert main(["compliance", str(result), "--ruleset", "6.1.0", "--out", str(verdict)]) == 0
        args += ["--result", str(result), "--compliance", str(verdict)]
    return args


def run_report(tmp_path, args, scale="full"):
    out = tmp_path / "report.json"
    command = ["report", "--benchmark", "llama2_70b_lora", "--ruleset", "6.1.0", "--division", "closed", "--scale", scale, "--platform", "test-platform"]
    command += [*args, "--out", str(out)]
    assert main(command) == 0
    return json.loads(out.read_text())


@pytest.fixture
def ten_minutes():
    return [20.0, 21.0, 19.0, 25.0, 22.0, 18.0, 23.0, 24.0, 20.5, 21.5]


def test_olympic_score_drops_fastest_and_slowest(tmp_path, ten_minutes):
    report = run_report(tmp_path, make_runs(tmp_path, ten_minutes))
    middle = sorted(ten_minutes)[1:-1]
    assert report["score"]["time_to_train_minutes"] == pytest.approx(sum(middle) / 8, rel=1e-9)
    assert report["score"]["scaling_factor"] == 1.0
    assert report["rcp"]["verdict"] == "Pass"
    dropped = {r["index"]: r["dropped"] for r in report["runs"] if r["dropped"]}
    assert dropped == {5: "fastest", 3: "slowest"}
    assert report["valid_submission"] is True, report["valid_submission_reasons"]
    assert [r["samples_to_converge"] for r in report["runs"]] == [3264] * 10


@pytest.mark.parametrize(
    ("minutes", "division", "said"),
    [
        ([20.0, 21.0], "closed", "the RCP check needs at least 3 scored runs; 2 here"),
        ([20.0, 21.0, 19.0], "open", "the open division has no RCP check (mlperf-logging checks closed results only)"),
    ],
)
def test_a_report_without_an_rcp_check_says_why_and_so_does_the_summary(tmp_path, minutes, division, said):
    from mlperf_wf.results import plots

    args = make_runs(tmp_path, minutes)
    out = tmp_path / "report.json"
    command = ["report", "--benchmark", "llama2_70b_lora", "--ruleset", "6.1.0", "--division", division, "--scale", "full", "--platform", "p"]
    assert main([*command, *args, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["rcp"] is None and report["rcp_not_checked"] == said
    frame = plots.summary([out], tmp_path / "summary.csv", tmp_path / "summary")
    assert list(frame["rcp"]) == [f"not checked: {said}"]


def test_one_non_converged_run_is_the_dropped_slowest(tmp_path, ten_minutes):
    report = run_report(tmp_path, make_runs(tmp_path, ten_minutes, statuses={1: "aborted"}))
    counted = sorted(m for i, m in enumerate(ten_minutes) if i != 1)[1:]
    assert report["score"]["time_to_train_minutes"] == pytest.approx(sum(counted) / 8, rel=1e-9)
    dropped = {r["index"]: r["dropped"] for r in report["runs"] if r["dropped"]}
    assert dropped == {1: "did not converge", 5: "fastest"}
    assert report["runs"][1]["samples_to_converge"] is None


def test_two_non_converged_runs_give_no_score(tmp_path, ten_minutes):
    report = run_report(tmp_path, make_runs(tmp_path, ten_minutes, statuses={1: "aborted", 4: "aborted"}))
    assert report["score"]["time_to_train_minutes"] is None
    assert report["valid_submission"] is False
    assert any("2 runs failed compliance or did not converge" in r for r in report["valid_submission_reasons"])


def test_duplicate_seeds_and_tiny_scale_make_it_invalid(tmp_path, ten_minutes):
    seeds = [1, 2, 3, 4, 5, 6, 7, 8, 9, 9]
    report = run_report(tmp_path, make_runs(tmp_path, ten_minutes, seeds=seeds), scale="tiny")
    reasons = report["valid_submission_reasons"]
    assert any("seeds used by more than one run: [9]" in r for r in reasons)
    assert any("scale is 'tiny'" in r for r in reasons)
    assert report["valid_submission"] is False


def test_more_runs_than_required_scores_the_window_closest_to_the_median(tmp_path):
    minutes = [20.0, 30.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 10.0, 40.0, 41.0]
    report = run_report(tmp_path, make_runs(tmp_path, minutes))
    windows = []
    for start in range(len(minutes) - 10 + 1):
        window = sorted(minutes[start : start + 10])[1:-1]
        windows.append(sum(window) / 8)
    median = sorted(windows)[len(windows) // 2]
    best = min(range(len(windows)), key=lambda i: (abs(windows[i] - median), i))
    selection = report["selection"]
    assert selection["runs_made"] == 13 and selection["required"] == 10
    assert selection["window_minutes"] == pytest.approx(windows, rel=1e-9)
    assert selection["window_runs"] == list(range(best, best + 10))
    assert report["score"]["time_to_train_minutes"] == pytest.approx(windows[best], rel=1e-9)
    outside = [r["index"] for r in report["runs"] if r["dropped"] == "outside the selected window"]
    assert outside == [i for i in range(13) if not best <= i < best + 10]
    assert report["valid_submission"] is True, report["valid_submission_reasons"]


def test_score_cli_on_a_benchmark_folder(tmp_path, capsys):
    folder = tmp_path / "org" / "results" / "sys" / "llama2_70b_lora"
    minutes = [20.0, 21.0, 19.0, 25.0, 22.0, 18.0, 23.0, 24.0, 20.5, 21.5]
    for i, m in enumerate(minutes):
        status = "aborted" if i == 3 else "success"
        write_lora_log(folder / f"result_{i}.txt", 100 + i, m, CONVERGED if status == "success" else NOT_CONVERGED, status=status)
    assert main(["score", str(folder), "--ruleset", "6.1.0", "--json", str(tmp_path / "s.json")]) == 0
    (score,) = json.loads((tmp_path / "s.json").read_text())
    counted = sorted(m for i, m in enumerate(minutes) if i != 3)[1:]
    assert score["time_to_train"] == pytest.approx(sum(counted) / 8, rel=1e-9)
    assert {Path(r["file"]).name: r["dropped"] for r in score["runs"] if r["dropped"]} == {"result_3.txt": "did not converge", "result_5.txt": "fastest"}

    write_lora_log(folder / "result_4.txt", 104, 22.0, NOT_CONVERGED, status="aborted")
    assert main(["score", str(folder), "--ruleset", "6.1.0"]) == 1
    assert "INVALID: 2 runs failed compliance or did not converge" in capsys.readouterr().out


def test_score_cli_rejects_a_compliance_failure_and_duplicate_seeds(tmp_path, capsys):
    folder = tmp_path / "llama2_70b_lora"
    for i in range(10):
        seed = 7 if i in (2, 6) else 100 + i
        write_lora_log(folder / f"result_{i}.txt", seed, 20.0 + i, CONVERGED, drop_keys=("lora_rank",) if i == 9 else ())
    assert main(["score", str(folder), "--ruleset", "6.1.0", "--json", str(tmp_path / "s.json")]) == 1
    (score,) = json.loads((tmp_path / "s.json").read_text())
    bad = next(r for r in score["runs"] if r["file"].endswith("result_9.txt"))
    assert bad["compliant"] is False and bad["dropped"] == "failed compliance"
    assert any("lora_rank" in m for m in bad["messages"])
    assert any("seeds used by more than one run: [7]" in r for r in score["reasons"])


def test_score_takes_a_round_s_folder_of_organisations(tmp_path):
    """As the result summarizer takes root/{*}: every organisation folder (results/, systems/) under the round's."""
    minutes = [20.0, 21.0, 19.0, 25.0, 22.0, 18.0, 23.0, 24.0, 20.5, 21.5]
    for org, system in (("OrgA", "sys_a"), ("OrgB", "sys_b")):
        (tmp_path / "round" / org / "systems").mkdir(parents=True)
        (tmp_path / "round" / org / "systems" / f"{system}.json").write_text(json.dumps({"system_name": system, "division": "closed"}))
        for i, m in enumerate(minutes):
            write_lora_log(tmp_path / "round" / org / "results" / system / "llama2_70b_lora" / f"result_{i}.txt", 100 + i, m, CONVERGED)
    (tmp_path / "round" / "README.md").write_text("not an organisation")
    assert main(["score", str(tmp_path / "round"), "--ruleset", "6.1.0", "--json", str(tmp_path / "s.json")]) == 0
    scores = json.loads((tmp_path / "s.json").read_text())
    assert sorted(score["system"] for score in scores) == ["sys_a", "sys_b"]
    assert all(score["time_to_train"] == pytest.approx(sum(sorted(minutes)[1:-1]) / 8, rel=1e-9) for score in scores)
