"""The rehearsal hook (``containers/hooks/mlperf_wf_rehearsal_steps.py``): a real Python process started with the images'
start-up hooks on ``PYTHONPATH``, training a small torch model on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HOOKS = Path(__file__).resolve().parents[2] / "containers" / "hooks"

TRAINING = """
import sys, torch
for name in ("a.bin", "b.bin"):
    open(sys.argv[1] + "/" + name, "rb").read()
open(sys.argv[1] + "/written.bin", "wb").close()  # a write is no input read
model = torch.nn.Linear(4, 1)
first, second = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(int(sys.argv[2])):
    loss = model(torch.ones(2, 4)).sum()
    loss.backward()
    first.step()
    second.step()  # a second optimizer in the same training step (a chained optimizer): one step, not two
    if step == int(sys.argv[3]):
        raise RuntimeError("the reference fails at step %d" % step)
print("training ended by itself")
sys.exit(7)
"""


def _train(tmp_path: Path, steps: str, iterations: int, fail_at: int = -1) -> tuple[subprocess.CompletedProcess, list[dict]]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for name in ("a.bin", "b.bin", "never.bin"):
        (data / name).write_bytes(b"x")
    ranks = tmp_path / "ranks"
    env = {
        **os.environ,
        "PYTHONPATH": str(HOOKS),
        "MLPERF_WF_REHEARSAL_STEPS": steps,
        "MLPERF_WF_REHEARSAL_RANKS": str(ranks),
        "MLPERF_WF_REHEARSAL_INPUTS": f"prepared={data},checkpoint={tmp_path / 'checkpoint'}",
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "MASTER_ADDR": "node-a",
        "MASTER_PORT": "29500",
    }
    proc = subprocess.run([sys.executable, "-c", TRAINING, str(data), str(iterations), str(fail_at)], env=env, capture_output=True, text=True, timeout=120)
    records = [json.loads(path.read_text()) for path in sorted(ranks.glob("rank-*.json"))] if ranks.is_dir() else []
    return proc, records


def test_the_hook_stops_the_run_after_n_steps_and_records_the_rank(tmp_path):
    proc, records = _train(tmp_path, "3", iterations=100)
    assert proc.returncode == 0 and "training ended by itself" not in proc.stdout, proc.stderr
    [record] = records
    assert (record["rank"], record["local_rank"], record["world_size"], record["rendezvous"]) == (3, 1, 4, "node-a:29500")
    assert record["steps"] == 3 and len(record["step_seconds"]) == 3 and all(s >= 0 for s in record["step_seconds"])
    assert record["status"] == 0 and record["how"] == "stopped after 3 training steps"
    opened = record["opened"]
    assert opened["prepared"]["count"] == 2 and sorted(Path(p).name for p in opened["prepared"]["files"]) == ["a.bin", "b.bin"]
    assert opened["checkpoint"] == {"count": 0, "files": []}
    assert record["cuda"] is False and record["peak_gpu_memory_bytes"] is None


def test_a_rank_that_fails_before_its_steps_records_the_error(tmp_path):
    proc, records = _train(tmp_path, "5", iterations=100, fail_at=1)
    assert proc.returncode == 1
    [record] = records
    assert record["status"] == 1 and record["steps"] == 2
    assert record["how"] == "ended after 2 of 5 training steps (RuntimeError: the reference fails at step 1)"


def test_without_the_variable_the_hook_is_not_loaded(tmp_path):
    proc, records = _train(tmp_path, "", iterations=2)
    assert proc.returncode == 7 and "training ended by itself" in proc.stdout and records == []


OLD_TORCH = """
import sys, types
import torch
optimizer_module = types.ModuleType("torch.optim.optimizer")  # torch 1.13's: no global step hooks


class Optimizer:
    def __init__(self, params, defaults):
        self.param_groups = [{"params": list(params)}]

    def step(self, closure=None):
        return "stepped"


optimizer_module.Optimizer = Optimizer
sys.modules["torch.optim.optimizer"] = optimizer_module
import mlperf_wf_rehearsal_steps
mlperf_wf_rehearsal_steps._count_steps(optimizer_module)
optimizer = Optimizer([torch.zeros(1)], {})
assert optimizer.step.__self__ is optimizer  # what torch 1.13's learning-rate scheduler wraps
for _ in range(10):
    assert optimizer.step() == "stepped"
sys.exit(7)
"""


def test_before_torch_s_global_step_hooks_each_optimizer_s_step_is_counted(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(HOOKS), "MLPERF_WF_REHEARSAL_STEPS": "4", "MLPERF_WF_REHEARSAL_RANKS": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", OLD_TORCH], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    [record] = [json.loads(path.read_text()) for path in tmp_path.glob("rank-*.json")]
    assert record["steps"] == 4 and record["how"] == "stopped after 4 training steps"


FRAMEWORK_TRAINING = """
import os, signal, sys, torch
for name in ("a.bin",):
    open(sys.argv[1] + "/" + name, "rb").read()
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(int(sys.argv[2])):
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
print("training went on past the hook's count", flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # as a driver's ray.kill ends its actors: no atexit, no teardown
"""


def _framework(tmp_path: Path, script: str, steps: str, *args: str) -> tuple[subprocess.CompletedProcess, list[dict], list[dict]]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "a.bin").write_bytes(b"x")
    ranks = tmp_path / "ranks"
    env = {
        **os.environ,
        "PYTHONPATH": str(HOOKS),
        "MLPERF_WF_REHEARSAL_STEPS": steps,
        "MLPERF_WF_REHEARSAL_STOP": "framework",
        "MLPERF_WF_REHEARSAL_RANKS": str(ranks),
        "MLPERF_WF_REHEARSAL_INPUTS": f"prepared={data}",
        "RANK": "1",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "MASTER_ADDR": "node-a",
        "MASTER_PORT": "29500",
    }
    proc = subprocess.run([sys.executable, "-c", script, str(data), *args], env=env, capture_output=True, text=True, timeout=120)

    def read(pattern: str) -> list[dict]:
        return [json.loads(path.read_text()) for path in sorted(ranks.glob(pattern))] if ranks.is_dir() else []

    return proc, read("rank-*.json"), read("opened-*.json")


def test_where_the_framework_stops_the_run_the_hook_only_counts_and_the_record_survives_a_sigkill(tmp_path):
    proc, records, _ = _framework(tmp_path, FRAMEWORK_TRAINING, "3", "3")
    assert proc.returncode == -9 and "training went on past the hook's count" in proc.stdout, proc.stderr
    [record] = records
    assert (record["rank"], record["local_rank"], record["world_size"], record["rendezvous"]) == (1, 1, 4, "node-a:29500")
    assert record["steps"] == 3 and len(record["step_seconds"]) == 3 and record["status"] == 0
    assert record["how"] == "took 3 training steps; the run is ended by the framework's own step limit"
    assert record["opened"]["prepared"]["count"] == 1


def test_where_the_framework_stops_the_run_a_rank_past_its_steps_is_recorded_at_each_step(tmp_path):
    proc, records, _ = _framework(tmp_path, FRAMEWORK_TRAINING, "2", "5")
    assert proc.returncode == -9 and "training went on past the hook's count" in proc.stdout, proc.stderr
    [record] = records
    assert record["steps"] == 5 and record["status"] == 0 and record["how"].startswith("took 5 training steps;")


DRIVER = """
import sys
open(sys.argv[1] + "/a.bin", "rb").read()
print("the driver ends by itself")
"""


def test_where_the_framework_stops_the_run_a_process_that_is_no_rank_records_only_the_inputs_it_opened(tmp_path):
    proc, records, opened = _framework(tmp_path, DRIVER, "2")
    assert proc.returncode == 0 and records == [], proc.stderr
    [record] = opened
    assert record["opened"]["prepared"]["count"] == 1 and record["pid"] > 0 and record["node"]


def test_in_the_default_mode_a_process_that_is_no_rank_records_nothing(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.bin").write_bytes(b"x")
    env_free = subprocess.run(
        [sys.executable, "-c", DRIVER, str(tmp_path / "data")],
        env={**os.environ, "PYTHONPATH": str(HOOKS), "MLPERF_WF_REHEARSAL_STEPS": "2", "MLPERF_WF_REHEARSAL_RANKS": str(tmp_path / "torch-ranks"),
             "MLPERF_WF_REHEARSAL_INPUTS": f"prepared={tmp_path / 'data'}"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert env_free.returncode == 0 and not (tmp_path / "torch-ranks").exists(), env_free.stderr
