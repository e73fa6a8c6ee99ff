"""Time before spending it: the table of published results (``mlperf_wf.plan.published``), the expected time to
train and walltime ``size`` and the dry run give from it (or from model FLOPs), and the preflight's refusal of a
walltime that cannot hold a run."""

from __future__ import annotations

import csv
import math
import os
import re
import shutil
from pathlib import Path

import pytest

from mlperf_wf import cli
from mlperf_wf.config import registry
from mlperf_wf.plan import preflight, published, sizing
from mlperf_wf.results import published_rounds
from tests.plan.test_preflight import DEFAULTS, SYSTEM, fine_plan, workdir  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("MLPERF_WF_FIXTURES", ROOT.parent / "shared" / "fixtures"))
H100 = "NVIDIA H100-SXM5-80GB"


def test_every_row_is_typed_and_cites_the_folder_it_was_scored_from():
    rows = published.published_results()
    assert len(rows) >= 50
    names = set(registry.benchmark_names())
    for row in rows:
        assert row.benchmark in names and row.family == published.family_of(row.accelerator) and published.peak_tflops(row.family)
        round_name = ".".join(row.round.split(".")[:2])
        pattern = (
            rf"https://github.com/mlcommons/training_results_v{re.escape(round_name)}/tree/[0-9a-f]{{40}}/[^/]+/results/{re.escape(row.system)}/[a-z0-9_]+"
        )
        assert re.fullmatch(pattern, row.source), row.source
    covered = {row.benchmark for row in rows}
    assert {"gpt3", "llama2_70b_lora", "llama31_405b", "llama31_8b", "bert", "stable_diffusion", "rgat", "retinanet", "flux1", "dlrm_dcnv2"} <= covered
    assert {row.family for row in rows} >= {"A100", "H100", "H200", "B200", "GB200", "MI300X"}


def test_a_bad_row_is_one_line_naming_its_line(tmp_path, monkeypatch):
    table = tmp_path / published.TABLE
    shutil.copy(ROOT / "src/mlperf_wf/plan" / published.TABLE, table)
    lines = table.read_text().splitlines()
    lines[3] = lines[3].replace(",https://", ",http://")
    table.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(published, "_data_file", lambda name: table if name == published.TABLE else ROOT / "src/mlperf_wf/plan" / name)
    published.published_results.cache_clear()
    try:
        with pytest.raises(Exception, match=rf"^{published.TABLE}:4: source: String should match pattern"):
            published.published_results()
    finally:
        published.published_results.cache_clear()


@pytest.mark.skipif(not (FIXTURES / "mlperf_training_v5.1").is_dir(), reason="the published-results fixtures (../shared/fixtures) are absent")
def test_the_table_is_made_by_scoring_a_round_as_the_official_summarizer_does(tmp_path):
    round_folder = tmp_path / "round"
    shutil.copytree(FIXTURES / "mlperf_training_v5.1" / "Lenovo", round_folder / "Lenovo")
    rows = published_rounds.rows_of_round(round_folder, "5.1.0", "mlcommons/training_results_v5.1", "441d65f4445cd59687466533fd9f55399136e7a4", jobs=2)
    expected = {}
    with open(FIXTURES / "mlperf_training_v5.1" / "expected_lenovo_5.1.0.csv") as handle:
        for record in csv.DictReader(handle):
            for benchmark in ("llama31_8b", "dlrm_dcnv2", "retinanet", "flux1", "llama2_70b_lora", "rgat", "llama31_405b"):
                if record[benchmark]:
                    expected[(record["details_url"].rsplit("/", 1)[1].removesuffix(".json"), benchmark)] = float(record[benchmark])
    got = {(row.system, row.benchmark): row for row in rows}
    assert set(got) == set(expected)
    for key, minutes in expected.items():
        assert math.isclose(got[key].minutes, minutes, abs_tol=5e-4), (key, got[key].minutes, minutes)  # kept to the millisecond
        assert got[key].family in ("B200", "B300") and got[key].accelerators == 8
    # the command that writes the table: the round's rows replace that round's, other rounds' stay
    table = tmp_path / "table.csv"
    shutil.copy(ROOT / "src/mlperf_wf/plan" / published.TABLE, table)
    others = [row for row in published.read_rows(table.read_text()) if row.round != "5.1.0"]
    argv = [str(round_folder), "--round", "5.1.0", "--repo", "mlcommons/training_results_v5.1", "--commit", "441d65f4445cd59687466533fd9f55399136e7a4"]
    assert published_rounds.main([*argv, "--table", str(table)]) == 0
    written = published.read_rows(table.read_text())
    assert sorted(written, key=repr) == sorted([*others, *rows], key=repr)


def test_an_estimate_scales_the_nearest_published_result_of_the_family_and_says_so():
    h100 = [row for row in published.published_results() if row.benchmark == "gpt3" and row.family == "H100"]
    nearest = min(h100, key=lambda row: abs(math.log(row.accelerators / 64)))
    slowdown = published.flops_table().reference_slowdown["gpt3"].factor
    estimate = published.estimate("gpt3", "H100", 64)
    assert math.isclose(estimate.minutes, nearest.minutes * nearest.accelerators / 64 * slowdown)
    assert nearest.source in estimate.basis and "fp32" in estimate.basis
    # no row of the family: the nearest count, then the nearest peak (retinanet on 8 H100: an 8-H200 result, same peak)
    retinanet = published.estimate("retinanet", "H100", 8)
    assert " H200 " in retinanet.basis and "dense BF16 peak" in retinanet.basis, retinanet.basis
    # another family: scaled by the dense BF16 peaks
    other = published.estimate("rgat", "A100", 8)
    assert "A100 vs" in other.basis and other.minutes > published.estimate("rgat", "H200", 8).minutes
    # no published result: the model's FLOPs over the system's peak
    flops = published.estimate("deepseekv3_671b", "B200", 256, samples_to_converge=1e6)
    model = published.flops_table().models["deepseekv3_671b"]
    assert math.isclose(flops.minutes, model.flops_per_sample * 1e6 / (256 * 2250e12 * published.ASSUMED_MFU) / 60)
    assert flops.basis.startswith("model FLOPs") and published.estimate("deepseekv3_671b", "B200", 256) is None


def dlrm_lower_bound() -> bool:
    return published.estimate("dlrmv4", "MI350X", 8).lower_bound


UNPUBLISHED = ("dlrmv4", "qwen35_397b_grpo")
"""The benchmarks whose first round (6.1.0) has no published results: mlcommons/training_results_v6.1 is not out."""


def test_a_benchmark_without_a_published_result_says_so_and_what_its_estimate_rests_on_instead():
    table = published.flops_table()
    for name in UNPUBLISHED:
        assert not [row for row in published.published_results() if row.benchmark == name]
        assert "6.1.0" in table.unpublished[name]
    # qwen35_397b_grpo: the model's FLOPs, said to be the fallback
    qwen = published.estimate("qwen35_397b_grpo", "GB300", 256, samples_to_converge=4608)
    model = table.models["qwen35_397b_grpo"]
    assert math.isclose(qwen.minutes, model.flops_per_sample * 4608 / (256 * 2500e12 * published.ASSUMED_MFU) / 60)
    assert qwen.basis.startswith(f"no published result ({table.unpublished['qwen35_397b_grpo']}); model FLOPs: "), qwen.basis
    assert qwen.lower_bound and not dlrm_lower_bound()
    # dlrmv4: the reference's own measured runs, scaled as a published row would be
    run = table.reference_runs["dlrmv4"]
    dlrm = published.estimate("dlrmv4", "MI350X", 16)
    assert math.isclose(dlrm.minutes, run.minutes * run.accelerators / 16)
    assert dlrm.basis.startswith(f"no published result ({table.unpublished['dlrmv4']}); the reference's own runs: {run.minutes:.1f} min on 8 MI350X")
    assert "README.MD" in dlrm.basis and "MI300X vs MI350X" in published.estimate("dlrmv4", "MI300X", 8).basis
    # a benchmark with published rows never says so
    assert "no published result" not in published.estimate("gpt3", "H100", 64).basis


def test_size_gives_a_lower_bound_as_one_and_no_walltime(capsys):
    assert cli.main(["size", "--benchmark", "qwen35_397b_grpo", "--nodes", "64", "--gpus-per-node", "4", "--accelerator", "GB300"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "expected time to train on 256 GB300: at least 3.6 min (a lower bound: no walltime follows" in out and "no published result (" in out, out


def test_the_dry_run_says_which_benchmarks_have_no_published_result(workdir):  # noqa: F811
    _described(workdir, "NVIDIA GB300")
    qwen = " ".join(preflight.time_tables(fine_plan(workdir, "qwen35_397b_grpo"), ["qwen35_397b_grpo"]).split())
    assert "qwen35_397b_grpo on 64x4 GB300: at least 4 min to train (a lower bound); the run's 240 min is not checked by it" in qwen, qwen
    assert "no published result (" in qwen and "model FLOPs" in qwen, qwen
    _described(workdir, "AMD Instinct MI350X")
    dlrm = " ".join(preflight.time_tables(fine_plan(workdir, "dlrmv4"), ["dlrmv4"]).split())
    assert "dlrmv4 on 1x8 MI350X: expected" in dlrm and "no published result (" in dlrm and "the reference's own runs" in dlrm, dlrm


def test_size_gives_the_expected_time_and_a_walltime(capsys):
    assert cli.main(["size", "--benchmark", "gpt3", "--nodes", "8", "--gpus-per-node", "8", "--accelerator", H100]) == 0
    out = capsys.readouterr().out
    expected = published.estimate("gpt3", "H100", 64)
    line = re.search(r"expected time to train on 64 H100: ([0-9.]+) min; walltime per run ([0-9]+) min", out)
    assert line, out
    assert float(line.group(1)) == round(expected.minutes, 1) and int(line.group(2)) == sizing.walltime_for(expected.minutes)
    assert int(line.group(2)) > 480  # the definition's 480 minutes cannot hold a run
    assert cli.main(["size", "--benchmark", "gpt3", "--nodes", "8", "--gpus-per-node", "8"]) == 0
    assert "give --accelerator" in capsys.readouterr().out


def _described(workdir: Path, accelerator: str) -> None:  # noqa: F811 - the fixture's folder
    path = workdir / "config" / "systems" / f"{SYSTEM}.yaml"
    path.write_text(re.sub(r"(?m)^accelerator_model_name: .*$", f"accelerator_model_name: {accelerator}", path.read_text()))


def test_the_preflight_names_a_walltime_that_cannot_hold_a_run(workdir):  # noqa: F811
    _described(workdir, H100)
    plan = fine_plan(workdir, "gpt3")
    (problem,) = [problem for problem in preflight.plan_problems(plan, ["gpt3"], environ={}) if problem.kind == "walltime"]
    estimate = published.estimate("gpt3", "H100", 64)
    assert problem.subject == "gpt3" and "480 min" in problem.message and f"{estimate.minutes:.0f} min" in problem.message
    assert f"full_geometry: {{gpt3: {{walltime_minutes: {sizing.walltime_for(estimate.minutes)}}}}}" in problem.message
    held = fine_plan(workdir, "gpt3", full_geometry={"gpt3": {"walltime_minutes": sizing.walltime_for(estimate.minutes)}})
    assert not [problem for problem in preflight.plan_problems(held, ["gpt3"], environ={}) if problem.kind == "walltime"]
    table = preflight.time_tables(plan, ["gpt3"])
    assert f"gpt3 on 8x8 H100: expected {estimate.minutes:.0f} min to train" in table and "cannot hold" in table


def test_without_a_known_accelerator_the_dry_run_assumes_one_and_the_preflight_does_not_refuse(workdir):  # noqa: F811
    plan = fine_plan(workdir, "gpt3")  # the description names no accelerator
    assert not [problem for problem in preflight.plan_problems(plan, ["gpt3"], environ={}) if problem.kind == "walltime"]
    assert "assumed H100: config/systems/dgx-example.yaml names no accelerator the table knows" in preflight.time_tables(plan, ["gpt3"])


@pytest.mark.slow
def test_the_dry_run_prints_the_expected_time_and_the_walltime_that_cannot_hold_it(tmp_path):
    import subprocess
    import sys

    project = tmp_path / "project"
    shutil.copytree(ROOT / "config", project / "config")
    argv = [sys.executable, "-m", "snakemake", "-n", "-s", str(ROOT / "workflow" / "Snakefile"), "-d", str(project), "results/gpt3/report.json"]
    done = subprocess.run([*argv, "--config", "scale=full"], capture_output=True, text=True, check=False, cwd=project)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    expected = published.estimate("gpt3", "H100", 64)
    assert f"gpt3 on 8x8 H100 (assumed H100: config/systems/cpu-tiny.yaml names no accelerator the table knows): expected {expected.minutes:.0f} min" in output
    assert "the run's 480 min cannot hold it" in output


def test_a_model_s_flops_are_read_from_its_benchmark_s_folder():
    """``<benchmark folder>/model_flops.yaml``: FLOPs per sample and, where the reference trains slower than the
    published code, its slowdown, where no round published it, why and the reference's own runs; the plan's
    ``model_flops.yaml`` keeps the accelerators' peaks only."""
    owned = {path.parent.name for path in registry.BENCHMARKS_DIR.glob(f"*/{published.FLOPS_TABLE}")}
    table = published.flops_table()
    assert owned and set(table.models) | set(table.reference_runs) == owned
    assert set(table.reference_slowdown) | set(table.unpublished) <= owned
    assert "models" not in (ROOT / "src" / "mlperf_wf" / "plan" / published.FLOPS_TABLE).read_text()


def test_an_older_round_s_folder_name_is_the_benchmark_s_own_declaration():
    """A round's results folder that names a benchmark otherwise (rgat's ``gnn``, retinanet's ``ssd``) is read as the
    benchmark whose definition lists that name (``results_folder_names``), not from a table beside the scorer."""
    declared = {alias: name for name in registry.benchmark_names() for alias in registry.load_benchmark(name).results_folder_names}
    assert published_rounds.folder_names() == declared
    if "rgat" in registry.benchmark_names():
        assert declared["gnn"] == "rgat"
