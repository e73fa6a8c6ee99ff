"""What holds for every benchmark's full-scale plan, checked the same way for each (``scaffold.py``); each
benchmark's own ``test_<name>_plan.py`` adds the words of its command."""

from __future__ import annotations

import pytest
import yaml

from mlperf_wf.config import mlperf_rules, registry
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.plan import plan as planning
from mlperf_wf.run import launchers
from tests.benchmarks import scaffold
from tests.conftest import ROOT
from tests.plan.test_plan import workdir  # noqa: F401 - a fixture

NAMES = registry.benchmark_names()
MULTI_NODE = [name for name in NAMES if registry.load_benchmark(name).full.geometry.nodes > 1]


@pytest.mark.parametrize("name", NAMES)
def test_the_full_scale_dry_run_plans_every_required_run_from_the_published_sources(full_dry_runs, name):
    bench = registry.load_benchmark(name)
    ran = full_dry_runs(name)
    required = mlperf_rules.required_runs(bench.submission_benchmark)
    assert ran.counts["train"] == ran.counts["check_compliance"] == required, ran.counts
    assert len(ran.train_lines) == required and len(set(ran.train_lines)) == required, "one train job per run, each its own"
    downloads = [line for line in ran.output.splitlines() if line.startswith("Shell command: mlperf-wf download ")]
    assert downloads and all(f"--jobs {planning.DOWNLOAD_CONNECTIONS} " in line for line in downloads), "as many connections as the job will open"
    for dataset_id in bench.datasets_read():
        source = registry.load_dataset(dataset_id).source
        if source.protocol == "r2":
            assert f"--uri {source.uri}" in ran.output, f"{dataset_id}: the download job fetches the published {source.uri}"
        elif source.protocol == "huggingface":
            assert f"--revision {source.revision}" in ran.output, f"{dataset_id}: the download job pins {source.revision}"


@pytest.mark.parametrize("name", NAMES)
def test_the_full_scale_dry_run_shows_the_launch_its_launcher_starts(full_dry_runs, name, monkeypatch):
    """After the jobs (whose shell command writes the run's spec), the dry run prints the launch a site reviews: run 0's
    command as its launcher renders it from the plan's spec."""
    ran = full_dry_runs(name)
    monkeypatch.chdir(ran.folder)  # where Snakemake planned it (-d): the mounts are its folders
    config = {**yaml.safe_load((ran.folder / "config" / "config.yaml").read_text()), "scale": "full"}
    spec = planning.Plan(WorkflowConfig.parse(config), ROOT, workdir=ran.folder).of(name).train_spec(0)
    shown = ran.output.split("\nlaunch of the full-scale runs", 1)[-1].splitlines()
    assert f"  {launchers.launcher_for(spec).command(spec)}" in shown, ran.output[-3000:]
    assert any(line.startswith(f"{name} ({spec.launcher}, ") for line in shown)


@pytest.mark.parametrize("name", MULTI_NODE)
def test_the_reference_geometry_plan_asks_for_every_node_and_only_pyxis_runs_it(workdir, name):  # noqa: F811
    scaffold.reference_pyxis_job(name, workdir)
