"""bench/gpu_smoke.py where there is no GPU: it skips with the reason as its report, and its pieces (the GPU listing and
polling, the power sampler over the steps, the report) run on the CPU with stand-ins for the driver; the tiny trainers'
device override (``MLPERF_WF_TINY_DEVICE``) refuses what it cannot do, in one line."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mlperf_wf.errors import ConfigError
from mlperf_wf.run import harness

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_smoke.py"
STAND_IN_SMI = """#!/bin/sh
# test-only stand-in for nvidia-smi's listing and memory/utilisation queries
case "$*" in
  *memory.used*) echo "1234, 56" ;;
  *) echo "Stand-in GPU, 81559 MiB, 550.00" ;;
esac
"""
STAND_IN_POWER = f"{sys.executable} -m mlperf_wf.run.stand_in_nvidia_smi --gpus 1 -lms {{interval_ms}}"


def gpu_smoke():
    """The script as a module (registered first: its dataclasses look their module up while being made)."""
    if "gpu_smoke" not in sys.modules:
        spec = importlib.util.spec_from_file_location("gpu_smoke", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules["gpu_smoke"] = module
        spec.loader.exec_module(module)
    return sys.modules["gpu_smoke"]


@pytest.fixture
def stand_in_smi(tmp_path: Path) -> str:
    path = tmp_path / "bin" / "nvidia-smi"
    path.parent.mkdir()
    path.write_text(STAND_IN_SMI)
    path.chmod(0o755)
    return str(path)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")
def test_without_a_driver_the_command_skips_with_the_reason_as_its_report(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    reason = "no nvidia-smi on PATH: no NVIDIA driver on this machine"
    assert proc.stdout.strip() == f"gpu-smoke: skipped: {reason} (report: {tmp_path / 'out' / 'report.md'})"
    assert f"- skipped: {reason}" in (tmp_path / "out" / "report.md").read_text()
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert (report["skipped"], report["steps"]) == (reason, [])


def test_a_tiny_trainer_runs_on_a_device_where_its_definition_says_so():
    """``tiny.runs_on_cuda`` in the benchmark's own definition, not a list of names kept beside the harness."""
    from mlperf_wf.config import registry

    declared = [name for name in registry.benchmark_names() if registry.load_benchmark(name).tiny.runs_on_cuda]
    assert "llama31_8b" in declared and "bert" not in declared
    assert harness.device_trainers() == declared


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch sees a CUDA device")
def test_a_driver_without_a_cuda_device_for_torch_is_a_skip_that_says_so(stand_in_smi):
    reason = gpu_smoke().gpu_missing("cuda", stand_in_smi)
    assert reason == f"torch {torch.__version__} (CUDA build {torch.version.cuda}) sees no CUDA device"


def test_a_driver_that_lists_no_gpu_or_fails_is_a_skip_that_says_so(tmp_path):
    quiet, failing = tmp_path / "quiet-smi", tmp_path / "failing-smi"
    quiet.write_text("#!/bin/sh\nexit 0\n")
    failing.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2\nexit 9\n")
    for path in (quiet, failing):
        path.chmod(0o755)
    module = gpu_smoke()
    assert module.gpu_missing("cuda", str(quiet)) == f"{quiet} lists no GPU"
    assert module.gpu_missing("cuda", str(failing)) == f"{failing} failed: NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver."


def test_on_the_cpu_the_power_sampler_and_the_gpu_poller_cover_the_smoke_and_its_report(tmp_path, stand_in_smi):
    module = gpu_smoke()
    out = tmp_path / "out"
    code, steps, header = module.smoke(out, [], device="cpu", budget_s=60, smi=stand_in_smi, gpu_command=STAND_IN_POWER, steps_wanted=())
    assert code == 0 and header["gpu"] == "Stand-in GPU, 81559 MiB, 550.00"
    assert [(s.name, s.status, s.detail) for s in steps[:2]] == [("tiny", "skipped", "not asked for"), ("reference", "skipped", "not asked for")]
    measured = steps[2]
    assert measured.name == "power" and measured.status == "ok", measured
    assert measured.figures["all"]["power_readings"] >= 1 and measured.figures["all"]["watts_mean"] > 0
    report = (out / "report.md").read_text()
    assert "| power | ok |" in report and "- power_command: " in report
    assert (out / "power" / "node_0.txt").is_file()


def test_the_poller_keeps_each_step_s_peak_memory_and_utilisation(stand_in_smi):
    import time

    poller = gpu_smoke().GpuPoller(stand_in_smi, interval_s=0.05).start()
    begun = time.time()
    while len(poller.samples) < 2 and time.time() - begun < 20:
        time.sleep(0.05)
    poller.stop()
    assert poller.peaks(begun - 1, time.time()) == {"gpu_memory_peak_mib": 1234.0, "gpu_utilisation_peak_percent": 56.0}
    assert poller.peaks(0, 1) == {}


def test_the_tiny_step_is_the_workflow_s_tiny_chain_with_the_device_in_the_environment(tmp_path):
    module = gpu_smoke()
    argv = module.tiny_argv(tmp_path, ["llama2_70b_lora", "llama31_8b"], 16)
    assert argv[1:4] == ["-m", "snakemake", "-s"] and argv[argv.index("--config") + 1 :] == ["benchmarks=[llama2_70b_lora,llama31_8b]", "runs=1"]
    assert module.snakemake_env("cuda")[harness.DEVICE_VARIABLE] == "cuda"
    assert set(module.DEFAULT_BENCHMARKS) <= set(harness.device_trainers())


def test_the_tiny_device_is_the_cpu_unless_set_and_a_bad_one_is_one_line():
    assert harness.run_device("bert", {}) == "cpu"
    assert harness.run_device("llama31_8b", {harness.DEVICE_VARIABLE: "cpu"}) == "cpu"
    with pytest.raises(ConfigError, match=r"^MLPERF_WF_TINY_DEVICE='gpu': not a device; allowed: cpu, cuda, cuda:N$"):
        harness.run_device("llama31_8b", {harness.DEVICE_VARIABLE: "gpu"})
    with pytest.raises(ConfigError, match=r"^MLPERF_WF_TINY_DEVICE=cuda: the tiny bert trainer runs on the CPU only; on cuda: deepseekv3_671b, "):
        harness.run_device("bert", {harness.DEVICE_VARIABLE: "cuda"})


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch sees a CUDA device")
def test_cuda_for_a_trainer_that_has_it_is_refused_where_torch_sees_no_device():
    with pytest.raises(ConfigError, match=r"^MLPERF_WF_TINY_DEVICE=cuda:0: torch .* sees no CUDA device$"):
        harness.run_device("llama2_70b_lora", {harness.DEVICE_VARIABLE: "cuda:0"})
