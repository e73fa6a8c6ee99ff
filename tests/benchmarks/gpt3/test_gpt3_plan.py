"""gpt3's full-scale plan: ``--exit-duration-in-mins`` follows the run's walltime.

run_gpt3.sh:43-45 gives Megatron the job's time left less 15 minutes (set aside to save the last checkpoint); the
plan gives it the run's walltime (the definition's ``walltime_minutes``) less the same 15 minutes, so a shorter or
longer walltime moves the exit with it instead of leaving 465 (480 - 15) behind.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mlperf_wf.config import registry
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.plan import plan as planning

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
EXIT_MARGIN_MINUTES = 15
"""run_gpt3.sh:43-45."""


def _with_walltime(minutes: int) -> registry.BenchmarkDef:
    bench = registry.load_benchmark("gpt3")
    geometry = bench.full.geometry.model_copy(update={"walltime_minutes": minutes})
    return bench.model_copy(update={"full": bench.full.model_copy(update={"geometry": geometry})})


@pytest.mark.parametrize("walltime", [480, 240, 720])
def test_exit_duration_is_the_walltime_less_15_minutes(walltime, tmp_path, monkeypatch):
    (tmp_path / "config").symlink_to(ROOT / "config")
    monkeypatch.chdir(tmp_path)
    bench, load = _with_walltime(walltime), registry.load_benchmark
    monkeypatch.setattr(registry, "load_benchmark", lambda name: bench if name == "gpt3" else load(name))
    plan = planning.Plan(WorkflowConfig.parse({**DEFAULTS, "scale": "full", "benchmarks": ["gpt3"]}), project_root=ROOT, workdir=tmp_path)
    job = plan.of("gpt3").train_job(0)
    assert job.resources.runtime == walltime
    assert f"--exit-duration-in-mins {walltime - EXIT_MARGIN_MINUTES} " in job.command, job.command


@pytest.mark.parametrize("walltime", ["300", 900])
def test_a_walltime_set_in_the_config_moves_the_exit_duration_with_the_scheduler_s_limit(walltime, tmp_path, monkeypatch):
    """``full_geometry: {gpt3: {walltime_minutes: N}}`` (the site's limit) reaches both the job's runtime and the
    reference's own stop (a fixed 465 would kill a longer allocation's run early, or outlive a shorter one)."""
    (tmp_path / "config").symlink_to(ROOT / "config")
    monkeypatch.chdir(tmp_path)
    config = {**DEFAULTS, "scale": "full", "benchmarks": ["gpt3"], "full_geometry": {"gpt3": {"walltime_minutes": walltime}}}
    plan = planning.Plan(WorkflowConfig.parse(config), project_root=ROOT, workdir=tmp_path)
    job = plan.of("gpt3").train_job(0)
    assert job.resources.runtime == int(walltime)
    assert f"--exit-duration-in-mins {int(walltime) - EXIT_MARGIN_MINUTES} " in job.command, job.command
