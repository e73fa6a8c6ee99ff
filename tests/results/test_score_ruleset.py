"""``mlperf-wf score`` takes the ruleset from the folder's ``report.json`` (the workflow's own results record it), and
a ruleset the folder's benchmark is not part of is one line, before any run is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlperf_wf.cli import main
from tests.mllogs import write_lora_log

CONVERGED = [(1536, 1.2), (2304, 0.95), (3264, 0.92)]
MINUTES = [20.0, 21.0, 19.0, 25.0, 22.0, 18.0, 23.0, 24.0, 20.5, 21.5]


@pytest.fixture
def folder(tmp_path) -> Path:
    """A benchmark folder of ten converged llama2_70b_lora logs."""
    folder = tmp_path / "llama2_70b_lora"
    for i, minutes in enumerate(MINUTES):
        write_lora_log(folder / f"result_{i}.txt", 100 + i, minutes, CONVERGED)
    return folder


def test_score_reads_the_ruleset_from_the_folder_s_report(folder, tmp_path, capsys):
    (folder / "report.json").write_text(json.dumps({"benchmark": "llama2_70b_lora", "ruleset": "6.1.0", "division": "closed"}))
    assert main(["score", str(folder), "--json", str(tmp_path / "s.json")]) == 0
    (score,) = json.loads((tmp_path / "s.json").read_text())
    assert score["time_to_train"] == pytest.approx(sum(sorted(MINUTES)[1:-1]) / 8, rel=1e-9)
    assert "ruleset 6.1.0 (from " in capsys.readouterr().err
    # the workflow's results folder of several benchmarks: the rulesets their reports record, when they agree
    assert main(["score", str(tmp_path), "--json", str(tmp_path / "s.json")]) == 0


def test_a_ruleset_the_benchmark_is_not_part_of_is_one_line(folder, capsys):
    assert main(["score", str(folder), "--ruleset", "3.1.0"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == [
        f"mlperf-wf: error: --ruleset 3.1.0: llama2_70b_lora ({folder}) is not part of that round; its rounds: 4.0.0, 4.1.0, 5.0.0, 5.1.0, 6.0.0, 6.1.0"
    ]


def test_without_a_report_the_ruleset_is_asked_for_in_one_line(folder, capsys):
    assert main(["score", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"mlperf-wf: error: score: no report.json under {folder} records the ruleset; give --ruleset (e.g. 6.1.0)"]


def test_reports_of_different_rulesets_ask_for_one(folder, tmp_path, capsys):
    (folder / "report.json").write_text(json.dumps({"benchmark": "llama2_70b_lora", "ruleset": "6.1.0"}))
    (tmp_path / "rgat").mkdir()
    (tmp_path / "rgat" / "report.json").write_text(json.dumps({"benchmark": "rgat", "ruleset": "5.1.0"}))
    assert main(["score", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "record rulesets 5.1.0, 6.1.0" in err[0] and "score each benchmark's folder" in err[0]
