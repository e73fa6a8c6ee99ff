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
