"""The page cache before every full-scale run (mlperf_wf.plan.launch.drop_page_cache): dropped on every node of the run, the
same way for every benchmark and launcher, and `cache_clear` logged as what really happened (the hooks log
MLPERF_WF_CACHE_CLEARED instead of the references' hard-coded true).

The shell fragment runs for real in bash, on a stand-in for /proc/sys/vm/drop_caches, with stand-ins for srun (one
task per node) and sudo (refused): nothing here drops this machine's cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mlperf_wf.config import registry
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.plan import launch
from mlperf_wf.plan import plan as planning

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
HOOKS = ROOT / "containers" / "hooks"

FAKE_SRUN = """#!/bin/bash
# srun --nodes=N ... bash -c CMD: CMD once per node (SLURM_NODEID 0..N-1), failing when any node's task fails
nodes=1
while [ $# -gt 0 ]; do
  case "$1" in --nodes=*) nodes=${1#--nodes=} ;; --*) ;; *) break ;; esac
  shift
done
echo "srun $nodes $*" >> "$STANDIN/srun.log"
status=0
for node in $(seq 0 $((nodes - 1))); do SLURM_NODEID=$node "$@" || status=1; done
exit $status
"""
REFUSING_SUDO = "#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n"


@pytest.fixture
def standin(tmp_path) -> dict[str, str]:
    """An environment whose PATH has the srun and sudo stand-ins, and STANDIN the folder of the stand-in files."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("sudo", REFUSING_SUDO)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "STANDIN": str(tmp_path)}


def run_line(line: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``line`` then the value it exported, in the strict bash Snakemake runs jobs with."""
    script = f"set -euo pipefail; {line}; echo cleared=${launch.CACHE_CLEARED_VARIABLE}"
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)


def test_on_this_host_the_drop_writes_3_and_the_run_is_told_it_worked(standin, tmp_path):
    target = tmp_path / "drop_caches"
    proc = run_line(launch.drop_page_cache(target=str(target)), standin)
    assert proc.returncode == 0 and proc.stdout.strip() == "cleared=true"
    assert target.read_text() == "3\n"
    assert "page cache dropped on this host: the run logs cache_clear: true" in proc.stderr


def test_a_drop_without_permission_does_not_fail_the_line_and_says_false_in_the_log(standin, tmp_path):
    target = tmp_path / "no" / "such" / "drop_caches"  # not writable, even for root; and sudo refuses
    proc = run_line(launch.drop_page_cache(target=str(target)), standin)
    assert proc.returncode == 0 and proc.stdout.strip() == "cleared=false"
    assert "sudo: a password is required" in proc.stderr
    assert "mlperf-wf: could not drop the page cache on " in proc.stderr
    assert "not dropped on this host (no permission?): the run logs cache_clear: false" in proc.stderr


def test_under_pyxis_one_srun_task_per_node_drops_it_and_one_failing_node_makes_it_false(standin, tmp_path):
    line = launch.drop_page_cache(2, srun=True, target="$STANDIN/node_$SLURM_NODEID")
    proc = run_line(line, standin)
    assert proc.stdout.strip() == "cleared=true", proc.stderr
    assert [(tmp_path / f"node_{k}").read_text() for k in (0, 1)] == ["3\n", "3\n"]
    assert (tmp_path / "srun.log").read_text().startswith("srun 2 bash -c ")
    assert "page cache dropped on every node of the run (2)" in proc.stderr

    (tmp_path / "node_1").unlink()
    (tmp_path / "node_1").mkdir()  # node 1 cannot write it
    proc = run_line(line, standin)
    assert proc.returncode == 0 and proc.stdout.strip() == "cleared=false"
    assert proc.stderr.count("mlperf-wf: could not drop the page cache") == 1
    assert "not dropped on every node of the run (2)" in proc.stderr


def full_job(workdir: Path, name: str, launcher: str, nodes: int = 1) -> str:
    config = {**DEFAULTS, "scale": "full", "launcher": launcher, "full_geometry": {name: {"nodes": nodes}}}
    return planning.Plan(WorkflowConfig.parse(config), ROOT, workdir=workdir).of(name).train_job(0).command


def test_a_two_node_pyxis_run_drops_the_cache_on_each_node_before_its_training_step(tmp_path):
    command = full_job(tmp_path, "llama2_70b_lora", "pyxis", nodes=2)
    drop = launch.drop_page_cache(2, srun=True)
    assert drop.startswith("if srun --nodes=2 --ntasks-per-node=1 --overlap bash -c ") and drop in command
    training = command.index("srun --nodes=2 --ntasks-per-node=1 --mpi=none --kill-on-bad-exit=1 --overlap --container-image=")
    assert command.index(drop) < training
    names = command[training:].split("--container-env=", 1)[1].split()[0].split(",")
    assert launch.CACHE_CLEARED_VARIABLE in names, "the drop's outcome reaches every task"


@pytest.mark.parametrize("name", registry.benchmark_names())
def test_every_benchmark_and_launcher_drops_it_the_same_way_and_passes_the_outcome_in(name, tmp_path):
    # a benchmark whose nodes split into roles never runs on one node: only its pyxis line (below) drops the cache
    one_node = () if registry.load_benchmark(name).full.geometry.node_split else ("docker", "apptainer", "local")
    for launcher in one_node:
        command = full_job(tmp_path, name, launcher)
        # right before the launch, after the node check, in the run's subshell (its MLLOG files are merged after it; a
        # second "(": a benchmark with per-run scratch removes it after a successful run)
        drop = launch.drop_page_cache()
        before = "--excluded results/excluded-nodes.txt || exit 1; run_status=0; ("
        assert f"{before}{drop}; " in command or f"{before}({drop}; " in command, launcher
        run = command.split(f"{launch.drop_page_cache()}; ", 1)[1]
        limits = launch.raise_limits(registry.load_benchmark(name).full.ulimits)  # then the limits the reference raises
        run = run.removeprefix(f"{limits}; " if limits else "")
        if launcher == "docker":
            assert f" -e {launch.CACHE_CLEARED_VARIABLE} " in run
        elif launcher == "apptainer":
            assert f' --env "{launch.CACHE_CLEARED_VARIABLE}=${{{launch.CACHE_CLEARED_VARIABLE}}}" ' in run
        else:
            assert run.startswith("(cd ") and " exec env " in run  # a subshell: the exported value is inherited
    nodes = registry.load_benchmark(name).full.geometry.nodes
    assert launch.drop_page_cache(nodes, srun=True) in full_job(tmp_path, name, "pyxis", nodes)


# ---- what the run logs ---------------------------------------------------------------------------------------------

LOGGING_SCRIPT = """
from mlperf_logging import mllog
import sys
mllog.config(filename=sys.argv[1])
logger = mllog.get_mllogger()
logger.event(key="cache_clear", value=True)   # the references' hard-coded value
logger.event(key="cache_clear", value="True")  # llama2_70b_lora's
logger.start(key="init_start")
"""


def logged(tmp_path: Path, cleared: str | None) -> list[dict]:
    """What a reference that logs ``cache_clear: true`` writes with the hooks loaded, when the launch says ``cleared``."""
    script, result = tmp_path / "reference.py", tmp_path / f"result_{cleared}.txt"
    script.write_text(LOGGING_SCRIPT)
    env = {key: value for key, value in os.environ.items() if key != launch.CACHE_CLEARED_VARIABLE}
    env.update({"PYTHONPATH": str(HOOKS), "MLPERF_WF_HOOKS": ""})
    if cleared is not None:
        env[launch.CACHE_CLEARED_VARIABLE] = cleared
    subprocess.run([sys.executable, str(script), str(result)], env=env, check=True, capture_output=True, text=True)
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in result.read_text().splitlines() if ":::MLLOG " in line]


def test_the_hooks_log_the_launchs_outcome_as_cache_clear_for_every_reference(tmp_path):
    failed = logged(tmp_path, "false")
    assert [(line["key"], line["value"]) for line in failed] == [("cache_clear", False), ("cache_clear", False), ("init_start", None)]
    assert {line["metadata"]["file"] for line in failed} == {str(tmp_path / "reference.py")}, "the caller is still the reference"
    assert [line["metadata"]["lineno"] for line in failed] == [6, 7, 8]
    assert [line["value"] for line in logged(tmp_path, "true")][:2] == [True, True]
    # outside a workflow launch (no variable) the hooks leave the reference's value alone
    assert [line["value"] for line in logged(tmp_path, None)][:2] == [True, "True"]


def test_the_patches_that_log_cache_clear_themselves_read_the_same_variable(monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("hooks_mllog_under_test", HOOKS / "mlperf_wf_mllog.py")
    mllog_hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mllog_hooks)
    assert mllog_hooks.CACHE_CLEARED_VARIABLE == launch.CACHE_CLEARED_VARIABLE
    for value, cleared in (("true", True), ("1", True), ("false", False), ("", False)):
        monkeypatch.setenv(launch.CACHE_CLEARED_VARIABLE, value)
        assert mllog_hooks.cache_cleared() is cleared
    monkeypatch.delenv(launch.CACHE_CLEARED_VARIABLE)
    assert mllog_hooks.cache_cleared() is False
    for path in sorted((ROOT / "containers").glob("*/patches/*.py")):
        text = path.read_text()
        assert "drop_caches" not in text, f"{path}: the launch line drops the cache, the same way for every benchmark"
        for line in text.splitlines():
            if "event(" in line and ("cache_clear" in line or "CACHE_CLEAR" in line):
                assert "cache_cleared()" in line, f"{path}: {line.strip()}"


def test_qwens_patch_logs_cache_clear_before_init_start_where_its_launcher_stand_in_does_not(tmp_path):
    """NeMo-RL's run.sub logs cache_clear after its drop; the workflow's per-node launcher does not, so the patch does."""
    result = tmp_path / "result.txt"
    script = f"from mlperf_logging import mllog\nmllog.config(filename={str(result)!r})\nmllog.get_mllogger().start(key='init_start')\n"
    patches = ROOT / "src/mlperf_wf/benchmarks" / "qwen35_397b_grpo" / "container" / "patches"
    env = {**os.environ, "PYTHONPATH": f"{HOOKS}:{patches}", "MLPERF_WF_HOOKS": "mlperf_wf_qwen35_397b_grpo", launch.CACHE_CLEARED_VARIABLE: "false"}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True)
    lines = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in result.read_text().splitlines() if ":::MLLOG " in line]
    assert [(line["key"], line["value"]) for line in lines] == [("cache_clear", False), ("init_start", None)]
