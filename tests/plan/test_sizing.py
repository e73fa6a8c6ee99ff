"""Sizing a campaign from the RCPs (``mlperf_wf.plan.sizing``, ``mlperf-wf size``) and the pass forecast.

Expectations come from the RCP JSON files mlperf-logging ships, read here directly, and from the official checker run
on written logs (``rcp_checker.check_directory``, as the summarizer runs it): the size command, the plan's default
hyperparameters and the forecast must say what those say.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
from importlib import resources
from itertools import pairwise
from pathlib import Path

import pytest

from mlperf_wf import cli
from mlperf_wf.config import mlperf_rules, registry
from mlperf_wf.errors import ConfigError
from mlperf_wf.plan import plan as planning
from mlperf_wf.plan import preflight, sizing
from mlperf_wf.results import forecast, scoring, status
from tests.mllogs import write_lora_log

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "mlperf_training_v5.1"
GEOMETRIES = [(1, 8), (8, 8), (64, 8)]


def shipped_rcps(benchmark: str, ruleset: str) -> dict:
    """The RCP JSON of a round as mlperf-logging ships it."""
    path = resources.files("mlperf_logging.rcp_checker") / f"training_{ruleset}" / f"rcps_{benchmark}.json"
    return json.loads(path.read_text())


def size_output(capsys, *argv: str) -> str:
    assert cli.main(["size", *argv]) == 0
    return capsys.readouterr().out


def latest(name: str) -> tuple[registry.BenchmarkDef, str]:
    bench = registry.load_benchmark(name)
    return bench, mlperf_rules.resolve_ruleset(bench.submission_benchmark, "latest")


@pytest.mark.parametrize("nodes,gpus", GEOMETRIES)
@pytest.mark.parametrize("name", registry.benchmark_names())
def test_the_size_command_prints_the_allowed_batches_their_rcps_and_hyperparameters(capsys, name, nodes, gpus):
    bench, ruleset = latest(name)
    rcps = shipped_rcps(bench.submission_benchmark, ruleset)  # every benchmark has RCPs in its latest round
    out = size_output(capsys, "--benchmark", name, "--nodes", str(nodes), "--gpus-per-node", str(gpus))
    assert out.startswith(f"{name} on {nodes}x{gpus} GPUs, ruleset {ruleset} ({mlperf_rules.required_runs(bench.submission_benchmark)} runs per set)")
    if sizing.launcher_nodes_problem(bench, nodes):  # the reference's launcher starts one node
        assert nodes > 1 and f"{name}'s reference command runs on one node" in out and "GBS" not in out
        return
    per_replica = bench.full.sizing.model_parallel
    if (nodes * gpus) % per_replica:
        assert f"do not hold whole model replicas of {per_replica} GPUs" in out
        return
    replicas = nodes * gpus // per_replica
    assert f"multiples of {replicas}" in out
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"^\s+(\d+)[* ] .*$", out, re.M)}
    assert sorted(rows) == sorted(record["BS"] for record in rcps.values())
    for record in rcps.values():
        row = rows[record["BS"]]
        runs = record.get("Epochs to converge", record.get("samples to converge"))
        assert f"  {len(runs):>4}  " in row, row
        assert ("not a multiple of the replicas" in row) == (record["BS"] % replicas != 0), row
    chosen = re.search(r"^  GBS (\d+): (.*)$", out, re.M)
    if chosen is None:
        assert not any(record["BS"] % replicas == 0 for record in rcps.values()) and "choose the GBS with --gbs" in out
        return
    gbs = int(chosen.group(1))
    exact = [record for record in rcps.values() if record["BS"] == gbs]
    shown = out[chosen.start() :]
    for record in exact or []:
        for key, value in record["Hyperparams"].items():
            assert f"{key} {value}" in shown, (key, shown)
    if not exact:
        assert "no RCP at" in shown and "nearest" in shown


def test_the_size_command_reads_the_checker_s_cases_and_a_walltime(capsys):
    out = size_output(capsys, "--benchmark", "llama31_8b", "--nodes", "1", "--gpus-per-node", "8", "--gbs", "48", "--throughput", "12")
    assert "GBS 48: RCP Interpolation (llama31_8b_ref_32, llama31_8b_ref_64)" in out
    assert "nearest llama31_8b_ref_32: opt_base_learning_rate 0.0008" in out and "nearest llama31_8b_ref_64" in out
    walltime = int(re.search(r"walltime (\d+) min", out).group(1))
    slowest = max(max(shipped_rcps("llama31_8b", "6.1.0")[f"llama31_8b_ref_{size}"]["Epochs to converge"]) for size in (32, 64))
    assert walltime == sizing.walltime_minutes(slowest, 12, 8) and walltime > slowest / (12 * 8) / 60
    out = size_output(capsys, "--benchmark", "llama2_70b_lora", "--nodes", "64", "--gpus-per-node", "8")
    assert ", 128 with 4 GPUs per replica" in out  # how a 512-GPU system still reaches an RCP
    assert cli.main(["size", "--benchmark", "llama31_8b", "--nodes", "1", "--gpus-per-node", "8", "--gbs", "12"]) == 2
    assert "--gbs 12 is not a multiple of the 8 data-parallel replicas" in capsys.readouterr().err
    assert cli.main(["size", "--benchmark", "llama31_8c", "--nodes", "1", "--gpus-per-node", "8"]) == 2
    assert "known: bert" in capsys.readouterr().err


def test_the_checker_s_pruning_decides_what_a_batch_is_tested_against():
    """dlrm_dcnv2's 65536 point converges slower than the line between its neighbours: the checker prunes it, so a
    set at 65536 is tested against the interpolation, as the size command and the plan's table say."""
    table = sizing.rcp_table("dlrm_dcnv2", "6.0.0")
    assert not table.point(65536).pruned and table.point(55296).pruned
    case = sizing.coverage(table, 65536)
    assert (case.kind, case.basis) == ("interpolated", ("dlrm_dcnv2_ref_55296", "dlrm_dcnv2_ref_160000"))
    assert sizing.coverage(table, 16384).kind == "below" and sizing.coverage(table, 200000).kind == "above"


def write_set(folder: Path, gbs: int, converged: list[int], not_converged: int = 0) -> list[str]:
    """A closed 6.1.0 llama2_70b_lora run set: one log per run converging at the given samples, and runs that stop
    without converging; the logged GBS replaced by ``gbs``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    outcomes = [(samples, "success") for samples in converged] + [(3072, "aborted")] * not_converged
    for i, (samples, outcome) in enumerate(outcomes):
        last = 0.92 if outcome == "success" else 0.95  # a run that stops short never reached the 0.925 target
        path = write_lora_log(folder / f"result_{i}.txt", seed=i, minutes=20, evals=[(samples // 2, 0.99), (samples, last)], status=outcome)
        path.write_text(path.read_text().replace('"key": "global_batch_size", "value": 8,', f'"key": "global_batch_size", "value": {gbs},'))
        files.append(str(path))
    return files


@pytest.mark.parametrize(
    "gbs,samples",
    [(8, 3072), (8, 1536), (8, 2688), (12, 3000), (12, 1500), (4, 3500), (4, 2000), (256, 4000)],
    ids=["found", "found-too-fast", "found-just", "interpolated", "interpolated-too-fast", "below", "below-too-fast", "above"],
)
def test_with_every_run_the_forecast_is_the_official_rcp_verdict(tmp_path, gbs, samples):
    spread = [samples + step * 48 for step in range(-4, 6)]
    files = write_set(tmp_path / "set", gbs, spread)
    official = scoring.check_rcp(str(tmp_path / "set"), "6.1.0")  # the summarizer's RCP step
    table = sizing.rcp_table("llama2_70b_lora", "6.1.0")
    expected_message = {"below": "RCP not found but slower convergence on smaller batch size"}.get(sizing.coverage(table, gbs).kind)
    if official.verdict == "Pass" or expected_message is None:
        assert sizing.coverage(table, gbs).message == official.message
    made = forecast.forecast_of_files(files, 0, "llama2_70b_lora", "6.1.0", "closed", 10)
    assert made.finished == 10 and made.valid == 1.0
    assert made.rcp_pass == (1.0 if official.verdict == "Pass" else 0.0), (official, made)


def test_a_set_with_two_non_converged_runs_is_doomed_early_and_a_young_set_gets_a_probability(tmp_path):
    doomed = write_set(tmp_path / "doomed", 8, [3072, 3120, 3024], not_converged=2)
    made = forecast.forecast_of_files(doomed, 0, "llama2_70b_lora", "6.1.0", "closed", 10)
    assert (made.finished, made.valid, made.rcp_pass) == (5, 0.0, 0.0)
    young = write_set(tmp_path / "young", 8, [3072, 3120, 3024])
    made = forecast.forecast_of_files(young, 0, "llama2_70b_lora", "6.1.0", "closed", 10)
    assert 0.0 < made.valid < 1.0 and 0.0 < made.rcp_pass <= made.valid
    assert "3 of 10 runs finished (3 converged, 0 not)" in made.basis
    # runs converging far faster than the RCP allows make a set that cannot pass, however many come
    fast = write_set(tmp_path / "fast", 8, [1536, 1584, 1488, 1536])
    assert forecast.forecast_of_files(fast, 0, "llama2_70b_lora", "6.1.0", "closed", 10).rcp_pass == 0.0
    # the open division has no RCP test: only validity
    assert forecast.forecast_of_files(young, 0, "llama2_70b_lora", "6.1.0", "open", 10).rcp_pass is None
    # one more finished run that did not converge lowers the chance; one left is the olympic rule's allowance
    one_failed = forecast.forecast_of_files(young, 1, "llama2_70b_lora", "6.1.0", "closed", 10)
    assert one_failed.valid < made.valid


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="../shared/fixtures absent")
def test_on_published_result_sets_the_forecast_is_the_checker_s_and_the_summarizer_s_verdict():
    folders = sorted({path.parent for path in FIXTURES.glob("Lenovo/results/*/*/result_*.txt")})
    assert len(folders) >= 10
    for folder in folders:
        files = sorted(str(path) for path in folder.glob("result_*.txt"))
        benchmark = folder.name
        rcp = scoring.check_rcp(str(folder), "5.1.0")
        runs = [scoring.score_file(path, "5.1.0") for path in files]
        converged = [run.file for run in runs if run.status == "success"]
        made = forecast.forecast_of_files(converged, len(files) - len(converged), benchmark, "5.1.0", "closed", len(files))
        assert made.finished == len(files) == mlperf_rules.required_runs(benchmark)
        assert made.valid == (1.0 if len(files) - len(converged) <= 1 else 0.0)
        assert made.rcp_pass == (1.0 if rcp.verdict == "Pass" else 0.0), (folder, rcp)


def test_the_three_plans_run_the_rcp_s_hyperparameters_and_an_override_is_a_listed_deviation():
    config = status.load_config(ROOT, ["scale=full", "benchmarks=[llama31_8b, flux1, dlrm_dcnv2]"])
    plan = planning.load(config, project_root=ROOT)
    expected = {
        "llama31_8b": ("6.1.0", "llama31_8b_ref_32", {"opt_base_learning_rate": 0.0008, "opt_learning_rate_warmup_samples": 4096}),
        "flux1": ("6.1.0", "flux_ref_512", {"opt_base_learning_rate": 0.0002, "opt_learning_rate_warmup_steps": 1600}),
        "dlrm_dcnv2": ("6.0.0", "dlrm_dcnv2_ref_65536", {"opt_base_learning_rate": 0.004}),
    }
    for name, (ruleset, record, values) in expected.items():
        batch = plan.of(name).launch_settings().batch
        rcp = shipped_rcps(plan.bench(name).submission_benchmark, ruleset)[record]
        assert batch.split.gbs == rcp["BS"] and not batch.deviations
        for key, value in values.items():
            assert batch.values[key] == rcp["Hyperparams"][key] == value
    line = " ".join(plan.of("llama31_8b").train_job(0).command.split())
    assert "--max_lr 0.0008" in line and "--warmup_steps 128" in line and "--gbs 32 --mbs 2" in line  # 4096 samples / 32
    assert "--optimizer.lr=0.0002" in plan.of("flux1").train_job(0).command and "--lr_scheduler.warmup_steps=1600" in plan.of("flux1").train_job(0).command
    assert "--learning_rate 0.004 " in plan.of("dlrm_dcnv2").train_job(0).command
    table = preflight.batch_tables(plan, ["llama31_8b"])
    assert "DEVIATION" not in table and "opt_base_learning_rate            0.0008  the RCP's" in table

    deviating = status.load_config(ROOT, ["scale=full", "benchmarks=[llama31_8b]", "full_hyperparameters={llama31_8b: {opt_base_learning_rate: 0.0001}}"])
    plan = planning.load(deviating, project_root=ROOT)
    assert "--max_lr 0.0001" in plan.of("llama31_8b").train_job(0).command
    assert "opt_base_learning_rate            0.0001 (RCP: 0.0008)  DEVIATION from the RCP" in preflight.batch_tables(plan, ["llama31_8b"])
    moved = status.load_config(ROOT, ["scale=full", "benchmarks=[llama31_8b]", "full_hyperparameters={llama31_8b: {global_batch_size: 64}}"])
    line = planning.load(moved, project_root=ROOT).of("llama31_8b").train_job(0).command
    assert "--gbs 64 --mbs 2" in line and "--warmup_steps 96" in line and "GBS=64" in line  # 6144 samples / 64


@pytest.mark.parametrize(
    "overrides,words",
    [
        ({"global_batch_size": 48}, "no RCP of 6.1.0 has GBS 48 (nearest: 32, 64); give opt_base_learning_rate, opt_learning_rate_warmup_samples"),
        ({"global_batch_size": 12}, "12 cannot be made on 1x8 GPUs"),
        ({"opt_base_lr": 1}, "'opt_base_lr' is not a hyperparameter its command takes; allowed: global_batch_size, opt_base_learning_rate"),
    ],
)
def test_a_batch_without_an_rcp_or_a_misspelt_key_is_one_line(overrides, words):
    bench, ruleset = latest("llama31_8b")
    with pytest.raises(ConfigError, match=re.escape(words)):
        sizing.plan_batch(bench, ruleset, 1, 8, overrides)
    # a GBS without an RCP runs once every hyperparameter is named: all deviations
    given = sizing.plan_batch(bench, ruleset, 1, 8, {"global_batch_size": 48, "opt_base_learning_rate": 8e-4, "opt_learning_rate_warmup_samples": 5120})
    assert given.coverage.kind == "interpolated" and [row.key for row in given.rows if row.source == "override"] == [
        "global_batch_size",
        "opt_base_learning_rate",
        "opt_learning_rate_warmup_samples",
    ]


def test_closed_rules_on_planned_values_are_the_checker_s_expressions():
    checks = sizing.rule_checks("deepseekv3_671b", "6.1.0", {"global_batch_size": 16384, "opt_base_learning_rate": 2.4e-05})
    assert [(c.key, c.held) for c in checks] == [("global_batch_size", True), ("opt_base_learning_rate", True)]
    checks = sizing.rule_checks("deepseekv3_671b", "6.1.0", {"global_batch_size": 8192, "opt_base_learning_rate": 2.4e-05})
    assert [(c.key, c.held) for c in checks] == [("global_batch_size", False), ("opt_base_learning_rate", False)]


def test_closed_rules_run_through_the_checker_with_the_state_its_post_code_derives():
    """dlrmv4's learning-rate band is set by the ``POST`` of global_batch_size (6.1.0's closed_dlrmv4.yaml): only the
    checker's own run of the rule files (BEGIN, POST, CHECK in log order) can evaluate it on the planned values."""
    reference = 1e-6 * 16384 / 8192
    for lr, held in ((reference, True), (reference * 1.4, True), (reference * 1.6, False), (reference * 0.4, False)):
        checks = sizing.rule_checks("dlrmv4", "6.1.0", {"global_batch_size": 16384, "opt_base_learning_rate": lr})
        assert [(c.key, c.held) for c in checks] == [("global_batch_size", True), ("opt_base_learning_rate", held)], lr
    # the log the checker read: the keys it picks its rule files by, then the batch its POST derives from
    keys = [json.loads(line.split(":::MLLOG ", 1)[1])["key"] for line in sizing.planned_log("dlrmv4", {"opt_base_learning_rate": 1e-6, "global_batch_size": 8})]
    assert keys == ["submission_division", "submission_benchmark", "global_batch_size", "opt_base_learning_rate"]


def test_a_benchmark_rule_replaces_the_common_rule_of_its_key_as_in_the_checker():
    for key in ("global_batch_size", "opt_base_learning_rate"):
        assert [rule["NAME"] for rule in sizing._effective_key_rules("dlrmv4", "6.1.0")].count(key) == 1


@pytest.mark.slow
def test_the_dry_run_prints_the_table_with_the_deviation(tmp_path):
    workdir = tmp_path / "project"
    shutil.copytree(ROOT / "config", workdir / "config")
    argv = [
        sys.executable,
        "-m",
        "snakemake",
        "-n",
        "-s",
        str(ROOT / "workflow" / "Snakefile"),
        "-d",
        str(workdir),
        "results/flux1/report.json",
        "--config",
        "scale=full",
        "full_hyperparameters={flux1: {opt_learning_rate_warmup_steps: 0}}",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=workdir)
    assert done.returncode == 0, done.stderr[-3000:]
    output = done.stdout + done.stderr
    assert "flux1 (6.1.0): GBS 512 = 32 replicas x micro batch 16 x 1 accumulation; RCP: RCP found (flux_ref_512)" in output
    assert "opt_learning_rate_warmup_steps  0 (RCP: 1600)  DEVIATION from the RCP" in output
    assert "rule opt_gradient_clip_norm: v['value'] == 1.0  holds" in output


@pytest.mark.parametrize("name", registry.benchmark_names())
def test_every_full_scale_plan_runs_at_a_batch_with_an_rcp_of_its_latest_round(name):
    bench, ruleset = latest(name)
    gbs = bench.full.sizing.global_batch_size
    assert gbs in [record["BS"] for record in shipped_rcps(bench.submission_benchmark, ruleset).values()]
    geometry = bench.full.geometry
    batch = sizing.plan_batch(bench, ruleset, geometry.nodes, geometry.gpus_per_node)
    if sizing.wired(bench):  # the command takes the batch and the RCP's values from the plan
        assert batch.split.gbs == gbs and batch.split.fits(bench.full.sizing.max_micro_batch) and not batch.deviations
        assert all(check.held is not False for check in batch.rules), batch.rules
    else:  # the command's literal flags: what they make on the reference's geometry is the RCP's
        assert batch.split.gbs == gbs and not batch.deviations and batch.coverage.kind not in ("above", "none"), batch.rows
        assert all(check.held is not False for check in batch.rules), batch.rules


# Where each plan that keeps literal batch flags passes the RCP's values: (RCP key, command flag or ENV variable, the
# value's unit conversion). Values the reference computes from the GBS itself are left out (llama31_405b's learning
# rate: R:pretrain_llama31.py:153 gbs / 1152 x 8e-5; stable_diffusion's from its config's per-sample rate).
LITERAL = {
    "bert": [("opt_base_learning_rate", "--learning_rate", float), ("num_warmup_steps", "--num_warmup_steps", int),
             ("opt_learning_rate_training_steps", "--num_train_steps", int), ("opt_lamb_beta_1", "--lamb_beta_1", float),
             ("opt_lamb_beta_2", "--lamb_beta_2", float), ("opt_lamb_weight_decay_rate", "--lamb_weight_decay_rate", float)],
    "deepseekv3_671b": [("opt_base_learning_rate", "--lr", float), ("opt_learning_rate_warmup_steps", "--warmup_steps", int)],
    "gpt3": [("opt_base_learning_rate", "--lr", float)],
    "gpt_oss_20b": [("opt_base_learning_rate", "$PRIMUS_LR", float), ("opt_learning_rate_warmup_samples", "$PRIMUS_LR_WARMUP_ITERS", "steps")],
    "qwen35_397b_grpo": [("opt_base_learning_rate", "++policy.megatron_cfg.optimizer.lr", float), ("opt_gradient_clip_norm", "++policy.max_grad_norm", float)],
    "retinanet": [("opt_base_learning_rate", "--lr", float)],
    "rgat": [("opt_base_learning_rate", "--learning_rate", float)],
}  # fmt: skip


def literal_value(bench: registry.BenchmarkDef, where: str) -> str:
    if where.startswith("$"):
        return bench.full.env[where[1:]]
    words = [word for part in bench.full.command for word in part.replace(" \\\n", " ").split()]
    for i, word in enumerate(words):
        if word.startswith(f"{where}="):
            return word.split("=", 1)[1]
        if word == where:
            return words[i + 1]
    raise AssertionError(f"{bench.name}: {where} is not in the command")


@pytest.mark.parametrize("name", sorted(set(LITERAL) & set(registry.benchmark_names())))
def test_the_plans_with_literal_flags_pass_the_rcp_s_values_at_their_batch(name):
    bench, ruleset = latest(name)
    assert not sizing.wired(bench)
    rcp = sizing.rcp_table(bench.submission_benchmark, ruleset).point(bench.full.sizing.global_batch_size)
    for key, where, unit in LITERAL[name]:
        value = literal_value(bench, where)
        expected = rcp.hyperparameters[key]
        if unit == "steps":
            assert int(value) * bench.full.sizing.global_batch_size == expected, (key, where, value)
        else:
            assert unit(value) == expected, (key, where, value, expected)
            # the definition names the same place, so the dry run compares it on any geometry
            assert bench.full.sizing.literal_values.get(key) == where, (key, bench.full.sizing.literal_values)


@pytest.mark.parametrize(
    "samples,not_converged",
    [(3072, 0), (1536, 0), (3072, 1), (3072, 2)],
    ids=["passes", "converges-too-fast", "one-not-converged", "two-not-converged"],
)
def test_a_report_of_every_required_run_forecasts_its_own_verdicts(tmp_path, samples, not_converged):
    """report.json's forecast with the ten runs there: its RCP verdict and the olympic rule's validity."""
    from mlperf_wf.results import compliance, report

    files = write_set(tmp_path / "runs", 8, [samples + 48 * step for step in range(10 - not_converged)], not_converged)
    verdicts = [compliance.check(Path(path), "6.1.0").verdict for path in files]
    built = report.build(
        benchmark="llama2_70b_lora",
        submission_benchmark="llama2_70b_lora",
        ruleset="6.1.0",
        division="closed",
        scale="full",
        platform="test-platform",
        quality_target={"comparison": "<=", "value": 0.925},
        required=10,
        results=[Path(path) for path in files],
        verdicts=verdicts,
    )
    forecast = built.forecast
    assert forecast["finished"] == 10 and verdicts.count("non_converged") == not_converged
    assert forecast["valid"] == (1.0 if not_converged <= 1 else 0.0)
    assert forecast["rcp_pass"] == (1.0 if built.rcp["verdict"] == "Pass" else 0.0), built.rcp
    assert forecast["rcp_pass"] == (1.0 if samples == 3072 and not_converged <= 1 else 0.0)


def test_the_walltime_can_rest_on_a_run_measured_on_the_system(capsys, tmp_path):
    """A first run's log (3,072 samples at its last evaluation, 800 s after run_start, on 8 GPUs) gives the throughput."""
    log = write_lora_log(tmp_path / "result.txt", seed=1, minutes=20, evals=[(1536, 0.95), (3072, 0.92)])
    out = size_output(capsys, "--benchmark", "llama2_70b_lora", "--nodes", "1", "--gpus-per-node", "8", "--throughput-from", str(log))
    assert "measured on" in out and "0.48 samples/s per GPU" in out
    slowest = max(shipped_rcps("llama2_70b_lora", "6.1.0")["llama2_70b_lora_ref_8"]["samples to converge"])
    assert f"walltime {sizing.walltime_minutes(slowest, 0.48, 8)} min" in out
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert cli.main(["size", "--benchmark", "llama2_70b_lora", "--nodes", "1", "--gpus-per-node", "8", "--throughput-from", str(empty)]) == 2
    assert "no run_start and evaluation" in capsys.readouterr().err


def _every_rcp_table() -> list[tuple[str, str]]:
    """Every (benchmark, ruleset) RCP table the installed checker reads (not a retired benchmark's old table)."""
    from mlperf_logging.rcp_checker import rcp_checker

    root = resources.files("mlperf_logging.rcp_checker")
    known = rcp_checker.submission_runs[sizing.USAGE]
    tables = sorted(
        (path.name.removeprefix("rcps_").removesuffix(".json"), folder.name.removeprefix(f"{sizing.USAGE}_"))
        for folder in root.iterdir()
        if folder.is_dir() and folder.name.startswith(f"{sizing.USAGE}_")
        for path in folder.iterdir()
        if path.name.startswith("rcps_") and path.name.endswith(".json")
    )
    return [(benchmark, ruleset) for benchmark, ruleset in tables if benchmark in known]


def test_the_cached_rcp_numbers_are_the_checker_s_for_every_table_and_case(tmp_path, monkeypatch):
    """A parse reads each table's numbers from the cache an earlier process wrote (no scipy): for every RCP table of
    the installed mlperf-logging, the points and the coverage of every case (exact, interpolated, below, above) read
    back are those the checker computed."""
    monkeypatch.setenv(sizing.RCP_CACHE_VARIABLE, str(tmp_path / "cache"))
    tables = _every_rcp_table()
    assert len(tables) > 20, tables
    for benchmark, ruleset in tables:
        sizing.rcp_table.cache_clear()
        computed = sizing.rcp_table(benchmark, ruleset)
        sizes = sorted({point.gbs for point in computed.points})
        asked = sorted({1, *sizes, *((a + b) // 2 for a, b in pairwise(sizes)), sizes[-1] * 2})
        cases = {gbs: sizing.coverage(computed, gbs) for gbs in asked}
        sizing.rcp_table.cache_clear()
        cached = sizing.rcp_table(benchmark, ruleset)
        assert "checker" not in cached.__dict__, "read from the cache, not computed"
        assert cached == computed and cached.unit == computed.unit, (benchmark, ruleset)
        assert cached.coverages == cases, (benchmark, ruleset)
        assert [case.record for case in cached.coverages.values()] == [case.record for case in cases.values()], "the records the test reads"
    sizing.rcp_table.cache_clear()


def test_an_rcp_cache_file_is_named_by_what_made_its_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv(sizing.RCP_CACHE_VARIABLE, str(tmp_path))
    one, other = sizing._cache_file("flux1", "6.1.0", b"{}"), sizing._cache_file("flux1", "6.1.0", b'{"changed": 1}')
    assert one.parent == tmp_path and one != other, "another RCP file (a new round's numbers) never reads the old cache"
    (tmp_path / one.name).write_text("not json")  # a cut-short write: computed again
    assert sizing._read_cache("flux1", "6.1.0", one) is None


# ---- a geometry other than the reference's ----


def test_a_node_count_the_definition_s_batch_cannot_fill_plans_an_rcp_batch_with_its_values():
    """llama2_70b_lora on 8 nodes: 64 GPUs cannot make the definition's GBS 8; the plan takes the RCP batch the
    reference's per-GPU batch reaches (128: micro batch 1 x 2 accumulation) and every value of that RCP."""
    bench, ruleset = latest("llama2_70b_lora")
    batch = sizing.plan_batch(bench, ruleset, 8, 8)
    rcp = shipped_rcps("llama2_70b_lora", ruleset)["llama2_70b_lora_ref_128"]["Hyperparams"]
    assert (batch.split.gbs, batch.split.micro_batch, batch.split.accumulation) == (128, 1, 2) and batch.coverage.kind == "exact"
    assert batch.values["opt_base_learning_rate"] == rcp["opt_base_learning_rate"] == 0.001 and not batch.deviations
    table = "\n".join(sizing.describe_batch(batch))
    assert "the definition's GBS 8 cannot be made on 8x8 GPUs" in table
    config = status.load_config(ROOT, ["scale=full", "benchmarks=[llama2_70b_lora]", "full_geometry={llama2_70b_lora: {nodes: 8}}"])
    line = " ".join(planning.load(config, project_root=ROOT).of("llama2_70b_lora").train_job(0).command.split())
    assert "--learning_rate 0.001 " in line and "--per_device_train_batch_size 1 --gradient_accumulation_steps 2" in line
    assert "--eval_steps 3 " in line  # the rules' evaluation every 384 samples, at GBS 128
    # the reference's own geometry runs what it ran
    own = planning.load(status.load_config(ROOT, ["scale=full", "benchmarks=[llama2_70b_lora]"]), project_root=ROOT)
    line = " ".join(own.of("llama2_70b_lora").train_job(0).command.split())
    assert "--learning_rate 0.0004 " in line and "--eval_steps 48 " in line and "--gradient_accumulation_steps 1 " in line


def test_size_picks_a_batch_the_reference_s_micro_batch_makes(capsys):
    """stable_diffusion on 4x8 without accumulation: GBS 2048 would need 64 samples per GPU (the reference runs 8);
    256 is an exact RCP at 8 per GPU."""
    out = size_output(capsys, "--benchmark", "stable_diffusion", "--nodes", "4", "--gpus-per-node", "8")
    assert re.search(r"^  GBS 256: RCP found \(sd_ref_256\); micro batch 8 x 1 accumulation$", out, re.M), out


def test_size_refuses_more_nodes_than_the_reference_s_launcher_spans(capsys):
    out = size_output(capsys, "--benchmark", "rgat", "--nodes", "8", "--gpus-per-node", "8")
    assert "rgat's reference command runs on one node (no full.multi_node_args): size it with --nodes 1" in out
    assert "GBS" not in out


def test_an_rcp_that_counts_tokens_is_printed_in_tokens(capsys):
    out = size_output(capsys, "--benchmark", "gpt3", "--nodes", "8", "--gpus-per-node", "8")
    assert "RCPs of 4.1.0 (tokens to converge;" in out and "expected to converge: mean" in out
    assert re.search(r"expected to converge: mean [0-9,]+ tokens \([0-9,]+ samples of 2048 tokens\)", out), out


def test_the_batch_fits_the_gpus_memory(capsys):
    """llama31_8b's micro batch 2 is the reference's on 141 GiB H200s: on 40 GiB GPUs the plan keeps GBS 32 with micro
    batch 1 and more accumulation; a reference that does not accumulate (dlrmv4: 1024 per rank on 288 GiB MI350X)
    moves to a smaller batch or says it fits nowhere."""
    bench, ruleset = latest("llama31_8b")
    assert sizing.micro_batch_limit(bench.full.sizing, 40) == 1 and sizing.micro_batch_limit(bench.full.sizing, None) == 2
    batch = sizing.plan_batch(bench, ruleset, 1, 8, gpu_memory_gib=40)
    assert (batch.split.gbs, batch.split.micro_batch, batch.split.accumulation) == (32, 1, 4) and not batch.deviations
    out = size_output(capsys, "--benchmark", "llama31_8b", "--nodes", "1", "--gpus-per-node", "8", "--gpu-memory-gib", "40")
    assert "micro batch at most 1 on 40 GiB GPUs (the reference's 2 on 141 GiB, in proportion" in out
    assert re.search(r"^  GBS 32: RCP found \(llama31_8b_ref_32\); micro batch 1 x 4 accumulation$", out, re.M), out
    dlrm, dlrm_rules = latest("dlrmv4")
    assert sizing.micro_batch_limit(dlrm.full.sizing, 80) == 284
    assert sizing.choose_gbs(dlrm, sizing.rcp_table("dlrmv4", dlrm_rules), 64, gpu_memory_gib=80) == 8192  # 128 per rank on 64 GPUs
    assert sizing.choose_gbs(dlrm, sizing.rcp_table("dlrmv4", dlrm_rules), 8, gpu_memory_gib=80) is None


def test_a_command_with_literal_batch_flags_shows_what_a_geometry_makes_of_them():
    """retinanet's command keeps its reference's literal flags (--batch-size 32 per GPU, --lr 0.0001): on 3 nodes they
    make GBS 768, whose RCP trained at lr 0.00013, so the dry run's table names the literal value as a deviation; on
    the reference's own node there is none."""
    own = planning.load(status.load_config(ROOT, ["scale=full", "benchmarks=[retinanet]"]), project_root=ROOT)
    batch = own.of("retinanet").launch_settings().batch
    assert batch.split.gbs == 256 and not batch.deviations and batch.coverage.kind == "exact"
    config = status.load_config(ROOT, ["scale=full", "benchmarks=[retinanet]", "full_geometry={retinanet: {nodes: 3}}"])
    plan = planning.load(config, project_root=ROOT)
    batch = plan.of("retinanet").launch_settings().batch
    assert batch.split.gbs == 768 and [row.key for row in batch.deviations] == ["opt_base_learning_rate"]
    table = preflight.batch_tables(plan, ["retinanet"])
    assert re.search(r"opt_base_learning_rate +0.0001 \(RCP: 0.00013\)  DEVIATION from the RCP \(literal --lr", table), table
    assert "global_batch_size" in table and "the command's literal per-GPU batch 32 x 24 GPUs" in table
    assert "--lr 0.0001 " in plan.of("retinanet").train_job(0).command  # the command itself is the reference's


def test_rcps_that_count_tokens_are_those_of_a_definition_that_gives_tokens_per_sample():
    """gpt3's RCPs count tokens (its definition's ``full.sizing.tokens_per_sample`` turns them into samples); the others'
    count samples or epochs."""
    for name in registry.benchmark_names():
        bench = registry.load_benchmark(name)
        gives = bool(bench.full.sizing and bench.full.sizing.tokens_per_sample)
        assert sizing.counts_tokens(bench.submission_benchmark) is gives, name
    if "gpt3" in registry.benchmark_names():
        assert sizing.counts_tokens("gpt3") and not sizing.counts_tokens("no_such_benchmark")


def test_a_young_set_s_forecast_quiets_the_checker_once_not_once_per_draw(monkeypatch):
    """``logging.disable`` clears the cache of every logger the process has (404 once transformers is
    imported): the forecast's 2000 draws each testing a completed set must not toggle it each time."""
    calls = []
    real = logging.disable
    monkeypatch.setattr(logging, "disable", lambda level=logging.CRITICAL: (calls.append(level), real(level))[1])
    table = sizing.rcp_table("llama2_70b_lora", "6.1.0")
    made = sizing.forecast(10, [3072.0, 3120.0, 3024.0], 0, table, 8, draws=2000)
    assert 0.0 < made.rcp_pass <= made.valid < 1.0
    assert len(calls) <= 2, f"logging.disable called {len(calls)} times for {made.draws} draws"
    assert logging.root.manager.disable == logging.NOTSET, "the forecast left logging disabled"
