"""``mlperf-wf status`` with no arguments follows what the running (or the last) Snakemake invocation targets: its
``--config`` values and its benchmarks, not the config file's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mlperf_wf.cli import main
from mlperf_wf.results import invocation
from tests.results.test_status import hold_lock, live_snakemake, shutil_copy_config


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """A campaign folder whose config names llama2_70b_lora alone (the default)."""
    root = tmp_path / "campaign"
    shutil_copy_config(root)
    monkeypatch.chdir(root)
    return root


def shown(capsys, *argv: str) -> list[str]:
    """The benchmarks ``mlperf-wf status`` shows (its JSON)."""
    assert main(["status", "--json", *argv]) == 0
    return [bench["benchmark"] for bench in json.loads(capsys.readouterr().out)["benchmarks"]]


def test_status_follows_the_last_invocation_and_its_config(folder, capsys):
    invocation.record(folder, {"benchmarks": ["rgat"], "runs": 2}, ["rgat"], pid=os.getpid() + 10_000_000)
    assert shown(capsys) == ["rgat"]
    assert main(["status"]) == 0
    text = capsys.readouterr().out
    assert "follows the last Snakemake invocation (--config benchmarks=[rgat] runs=2)" in text
    assert text.count("rgat (rgat, 5.1.0") == 1 and "llama2_70b_lora (" not in text
    assert "  runs: 2 planned (10 required)" in text  # runs=2 as the invocation was given it
    # an explicit --benchmark or --config is the user's choice
    assert shown(capsys, "--benchmark", "llama2_70b_lora") == ["llama2_70b_lora"]
    assert shown(capsys, "--config", "runs=1") == ["llama2_70b_lora"]


def test_status_follows_the_running_snakemake_by_what_it_locked(folder, capsys):
    """A Snakemake that has not recorded its invocation yet (building its DAG): the benchmarks its output lock names."""
    invocation.record(folder, {}, ["llama2_70b_lora"], pid=os.getpid() + 10_000_000)  # an earlier, finished one
    hold_lock(folder, ["results/tiny/rgat/runs/0/result.txt", "results/tiny/rgat/report.json", "results/tiny/summary.csv"])
    with live_snakemake(folder):
        assert shown(capsys) == ["rgat"]


def test_without_any_record_status_shows_the_config_file_benchmarks(folder, capsys):
    assert shown(capsys) == ["llama2_70b_lora"]
    (folder / ".snakemake/mlperf-wf").mkdir(parents=True)
    (folder / invocation.RECORD).write_text("{not json")
    assert shown(capsys) == ["llama2_70b_lora"]  # an unreadable record is no invocation
