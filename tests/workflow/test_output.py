"""What Snakemake prints: a tiny run names each job in one line and prints no shell command (unless asked with -p);
a full-scale dry run keeps every job's command and resources."""

from __future__ import annotations

import re

from tests.workflow.test_workflow import job_counts, new_workdir, snakemake

CONFIG = ("--config", "benchmarks=[rgat]", "runs=2")


def test_a_tiny_run_prints_a_line_per_job_and_no_shell_command(tmp_path):
    workdir = new_workdir(tmp_path / "tiny")
    proc = snakemake(workdir, "-n", *CONFIG)
    out = proc.stdout + proc.stderr
    assert "Shell command:" not in out
    jobs = re.findall(r"^Job \d+: (.+)$", out, flags=re.MULTILINE)
    assert len(jobs) == sum(job_counts(proc.stdout).values())
    assert "train rgat run 1 (log logs/tiny/train/rgat/1.log)" in jobs
    assert "check rgat run 0 (seed 1234) against the 5.1.0 rules" in jobs
    assert not re.search(r"^(local)?rule \w+:$", out, flags=re.MULTILINE), "no multi-line job block"
    # asked for, the commands are there
    assert "Shell command: " in snakemake(workdir, "-n", "-p", *CONFIG).stdout


def test_a_full_scale_dry_run_keeps_each_job_s_block_and_command(tmp_path):
    workdir = new_workdir(tmp_path / "full")
    out = snakemake(workdir, "-n", "results/rgat/report.json", "--config", "scale=full").stdout
    assert out.count("rule train:") == 10 and out.count("Shell command: ") >= 10


def test_a_full_scale_dry_run_prints_no_line_over_200_characters_and_its_wrapped_commands_are_the_planned_ones(tmp_path, monkeypatch):
    from pathlib import Path

    from mlperf_wf.config.config_check import parsed_config
    from mlperf_wf.plan import plan as planning
    from tests.workflow.test_workflow import ROOT, planned_train_lines, unwrapped

    workdir = new_workdir(tmp_path / "wide")
    proc = snakemake(workdir, "-n", "results/rgat/report.json", "--config", "scale=full", wrapped=True)
    out = proc.stdout + proc.stderr
    # but the invocation as typed, and a preflight problem: one line each, however long, as every refusal
    wide = [line for line in out.splitlines() if len(line) > 200 and not line.startswith(("  Command: ", "  - "))]
    assert not wide, f"{len(wide)} lines over 200 characters, e.g. {wide[0][:300]}"
    assert sum(line.startswith("Shell command: ") for line in out.splitlines()) >= 10
    # joined again, a train job's printed command is the one it runs
    import yaml

    config = yaml.safe_load((workdir / "config/config.yaml").read_text()) | {"scale": "full"}
    monkeypatch.chdir(workdir)  # as Snakemake plans it: the mounts are absolute paths in the workflow folder
    plan = planning.load(parsed_config(config), project_root=ROOT, workdir=Path(workdir))
    lines = planned_train_lines(unwrapped(proc.stdout), "rgat")
    assert len(lines) == 10
    for run in range(10):
        assert sum(plan.of("rgat").train_job(run).command in line for line in lines) == 1, run


def test_a_full_scale_dry_run_lists_the_preflight_problems_before_the_jobs(tmp_path):
    import subprocess

    from tests.workflow.test_workflow import snakemake_argv, snakemake_env

    workdir = new_workdir(tmp_path / "preflight")
    env = {key: value for key, value in snakemake_env().items() if not key.startswith(("MLPERF_WF_CF_", "HF_TOKEN"))}
    argv = snakemake_argv(workdir, "-n", "results/rgat/report.json", "--config", "scale=full")
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, check=True).stdout
    heading = re.search(r"^WARNING: mlperf-wf preflight: (\d+) problems? in the full-scale plan of rgat:$", out, flags=re.MULTILINE)
    assert heading, out[-3000:]
    assert heading.start() < out.index("rule train:"), "the problems come before the jobs"
    listed = [line for line in out.splitlines() if line.startswith("  - ")]
    assert len(listed) == int(heading.group(1)), "each problem is listed once"
    assert out.rstrip().endswith(f"mlperf-wf preflight: the {heading.group(1)} problems listed before the jobs stop a run without -n until they are fixed.")


def test_a_dry_run_says_it_would_package_again_and_changes_nothing(tmp_path):
    import json

    workdir = new_workdir(tmp_path / "dry")
    check = workdir / "results/tiny/submission/6.1.0-closed/package_check.json"
    check.parent.mkdir(parents=True)
    check.write_text(json.dumps({"files": {"package/mlperf-workflow/systems/cpu-tiny.json": "0" * 64}}))
    proc = snakemake(workdir, "-n", "--config", "runs=1")
    assert "removed since the package check (package_check.json) was made: would package again (a dry run changes nothing)" in proc.stderr
    assert check.is_file(), "a dry run removes nothing"
