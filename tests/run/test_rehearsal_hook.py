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


SPAWNING = """
import sys, torch.multiprocessing as mp


def rank(local_rank):
    import torch
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(100):
        model(torch.ones(2, 4)).sum().backward()
        optimizer.step()


if __name__ == "__main__":
    for name in ("a.bin", "b.bin"):
        open(sys.argv[1] + "/" + name, "rb").read()  # the entry process loads the data, as rgat's does before its spawn
    mp.spawn(rank, nprocs=2, join=True)
"""


def test_an_entry_process_that_reads_the_inputs_and_spawns_its_ranks_is_recorded_as_no_rank(tmp_path):
    data, ranks = tmp_path / "data", tmp_path / "ranks"
    data.mkdir()
    for name in ("a.bin", "b.bin"):
        (data / name).write_bytes(b"x")
    script = tmp_path / "train.py"
    script.write_text(SPAWNING)
    env = {
        **os.environ,
        "PYTHONPATH": str(HOOKS),
        "MLPERF_WF_REHEARSAL_STEPS": "2",
        "MLPERF_WF_REHEARSAL_RANKS": str(ranks),
        "MLPERF_WF_REHEARSAL_INPUTS": f"prepared={data}",
    }
    proc = subprocess.run([sys.executable, str(script), str(data)], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(path.read_text()) for path in sorted(ranks.glob("*.json"))]
    stepped = [record for record in records if record["rank"] is not None]
    [entry] = [record for record in records if record["rank"] is None]
    assert [(record["steps"], record["status"]) for record in stepped] == [(2, 0), (2, 0)]
    assert all(record["opened"]["prepared"]["count"] == 0 for record in stepped)
    assert entry["opened"]["prepared"]["count"] == 2 and entry["steps"] == 0 and entry["status"] == 0
    assert entry["how"] == "no rank: read the inputs and ended with status 0"


def test_a_tensorflow_process_of_a_tf_config_world_records_its_place_in_it(monkeypatch):
    """TensorFlow's multi-worker world (``TF_CONFIG``: the chief first, then the workers) gives the rank, the world size
    and the rendezvous (the first member's address); without it a TensorFlow process forms no world of its own."""
    monkeypatch.syspath_prepend(str(HOOKS))
    monkeypatch.delenv("MLPERF_WF_REHEARSAL_STEPS", raising=False)
    import mlperf_wf_rehearsal_steps as hook

    monkeypatch.setitem(hook._framework, "name", "tensorflow")
    cluster = {"chief": ["n1:2222"], "worker": ["n2:2222", "n3:2222"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}))
    monkeypatch.setenv("MASTER_ADDR", "n9")
    record = hook.record(0, "stopped")
    assert (record["framework"], record["rank"], record["world_size"], record["rendezvous"]) == ("tensorflow", 2, 3, "n1:2222")
    monkeypatch.delenv("TF_CONFIG")
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "1")
    for variable in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(variable, raising=False)
    record = hook.record(0, "stopped")
    assert (record["rank"], record["world_size"], record["rendezvous"], record["cuda"]) == (0, 1, "", False)


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

    records = read("rank-*.json")
    return proc, [record for record in records if record["rank"] is not None], [record for record in records if record["rank"] is None]


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


PROGRAMS = """
import subprocess, sys, torch
subprocess.run(["cat", sys.argv[1] + "/task.sif"], stdout=subprocess.DEVNULL, check=True)  # as NeMo-Gym hands apptainer its SIF
subprocess.run(["true", "--bind=" + sys.argv[1] + "/a.bin:/inside/a.bin,/elsewhere:/x"], check=True)
subprocess.run("true " + sys.argv[1] + "/b.bin", shell=True, check=True)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(100):
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
"""


def test_a_file_under_an_input_handed_to_a_program_the_rank_starts_counts_as_read(tmp_path):
    data, ranks = tmp_path / "data", tmp_path / "ranks"
    data.mkdir()
    for name in ("task.sif", "a.bin", "b.bin"):
        (data / name).write_bytes(b"x")
    env = {
        **os.environ,
        "PYTHONPATH": str(HOOKS),
        "MLPERF_WF_REHEARSAL_STEPS": "2",
        "MLPERF_WF_REHEARSAL_RANKS": str(ranks),
        "MLPERF_WF_REHEARSAL_INPUTS": f"task_images={data}",
    }
    proc = subprocess.run([sys.executable, "-c", PROGRAMS, str(data)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    [record] = [json.loads(path.read_text()) for path in ranks.glob("rank-*.json")]
    assert record["steps"] == 2 and record["opened"]["task_images"]["count"] == 3
    assert sorted(Path(path).name for path in record["opened"]["task_images"]["files"]) == ["a.bin", "b.bin", "task.sif"]
