"""Official compliance verdicts and the olympic report on generated logs."""

from __future__ import annotations

import json

import pytest

from mlperf_wf import compliance
from mlperf_wf.cli import main
from tests.mllogs import write_lora_log

CONVERGED = [(384, 1.2), (768, 0.95), (1152, 0.92)]
NOT_CONVERGED = [(384, 1.2), (768, 1.0), (1152, 0.97)]


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
    command = ["report", "--benchmark", "llama2_70b_lora", "--ruleset", "6.1.0", "--division", "closed", "--scale", scale, *args, "--out", str(out)]
    assert main(command) == 0
    return json.loads(out.read_text())


@pytest.fixture
def ten_minutes():
    return [20.0, 21.0, 19.0, 25.0, 22.0, 18.0, 23.0, 24.0, 20.5, 21.5]


def test_olympic_score_drops_fastest_and_slowest(tmp_path, ten_minutes):
    report = run_report(tmp_path, make_runs(tmp_path, ten_minutes))
    middle = sorted(ten_minutes)[1:-1]
    assert report["score"]["minutes"] == pytest.approx(sum(middle) / 8, rel=1e-9)
    dropped = {r["index"]: r["dropped"] for r in report["runs"] if r["dropped"]}
    assert dropped == {5: "fastest", 3: "slowest"}
    assert report["valid_submission"] is True
    assert [r["samples_to_converge"] for r in report["runs"]] == [1152] * 10


def test_one_non_converged_run_is_the_dropped_slowest(tmp_path, ten_minutes):
    report = run_report(tmp_path, make_runs(tmp_path, ten_minutes, statuses={1: "aborted"}))
    counted = sorted(m for i, m in enumerate(ten_minutes) if i != 1)[1:]
    assert report["score"]["minutes"] == pytest.approx(sum(counted) / 8, rel=1e-9)
    dropped = {r["index"]: r["dropped"] for r in report["runs"] if r["dropped"]}
    assert dropped == {1: "did not converge", 5: "fastest"}
    assert report["runs"][1]["samples_to_converge"] is None


def test_two_non_converged_runs_give_no_score(tmp_path, ten_minutes):
    report = run_report(tmp_path, make_runs(tmp_path, ten_minutes, statuses={1: "aborted", 4: "aborted"}))
    assert report["score"]["minutes"] is None
    assert report["valid_submission"] is False
    assert any("2 runs did not converge" in r for r in report["valid_submission_reasons"])


def test_duplicate_seeds_and_tiny_scale_make_it_invalid(tmp_path, ten_minutes):
    seeds = [1, 2, 3, 4, 5, 6, 7, 8, 9, 9]
    report = run_report(tmp_path, make_runs(tmp_path, ten_minutes, seeds=seeds), scale="tiny")
    reasons = report["valid_submission_reasons"]
    assert any("seeds used by more than one run: [9]" in r for r in reasons)
    assert any("scale is 'tiny'" in r for r in reasons)
    assert report["valid_submission"] is False
