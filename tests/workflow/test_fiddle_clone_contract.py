"""NeMo-Run's ``Executor.clone`` (``fdl.build(self.to_config())``, fiddle's config round trip), the real one at the llama31
references' pin and the rehearsal's stand-in (``tests/rehearsal/nemo_run.py``, which rebuilds the dataclass
from its init fields): the same executor out of the same executor in.

Both references make their data-index executor as ``executor.clone()`` of the training's ``LocalExecutor`` and then set
``launcher``, ``nodes``, ``ntasks_per_node`` and ``retries`` on it (pretrain_llama31.py:448-452 of small_llm_pretraining,
:428-432 of large_language_model_pretraining); what the clone keeps (fields, a launcher object, the environment) and
loses (``nodes``, not a field of ``LocalExecutor``; the non-init fields) decides the data-index task's launch. The real
fiddle 0.3.1 and NeMo-Run are in ``.venv-reference`` (``make .venv-reference/bin/activate``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reference_venv import reference_python_with
from tests.rehearsal.spec import REFERENCE_SOURCES, ROOT

NEMO_RUN_SOURCE = REFERENCE_SOURCES / "nemo-run-34259bd" / "src" / "nemo_run"

# NeMo-Run is installed from this source (make .venv-reference/bin/activate), which ../shared holds: without it, skip
pytestmark = pytest.mark.skipif(not NEMO_RUN_SOURCE.is_dir(), reason=f"NeMo-Run's source is not at {NEMO_RUN_SOURCE}")

SCENARIOS = """
import dataclasses, json, os

def describe(executor):
    # the packager is a stand-in of its own (only the launch path's fields)
    fields = {f.name: repr(getattr(executor, f.name)) for f in dataclasses.fields(executor) if f.name != "packager"}
    extra = {name: repr(value) for name, value in vars(executor).items() if name not in fields and name != "packager"}
    return {"type": type(executor).__name__, "fields": fields, "not fields": extra}

def as_the_reference_makes_it(devices, launcher):
    # pretrain_llama31.py:51-58 (local_executor)
    executor = run.LocalExecutor()
    executor.launcher = launcher
    executor.env_vars = {"TORCH_NCCL_AVOID_RECORD_STREAMS": "1", "TOKENIZERS_PARALLELISM": "false"}
    executor.retries = 0
    executor.nodes = 1
    executor.ntasks_per_node = devices
    return executor

def as_the_405b_reference_makes_it():
    # large_language_model_pretraining/nemo/pretrain_llama31.py:65-118 (slurm_executor), which the 405b round patch
    # turns into its LocalExecutor
    executor = run.SlurmExecutor(
        account="mlperf", partition="batch", tunnel=run.SSHTunnel(user="u", host="h", job_dir="/jobs"), nodes=2,
        ntasks_per_node=8, gpus_per_node=8, mem="0", exclusive=True, gres="gpu:8",
        packager=run.GitArchivePackager(subpath="large_language_model_pretraining/nemo", ref="HEAD"), dependencies=[],
    )
    executor.launcher = None
    executor.container_image = "image"
    executor.container_mounts = ["/data:/data"]
    executor.env_vars = {"TOKENIZERS_PARALLELISM": "false"}
    executor.retries = 0
    executor.time = "01:00:00"
    return executor

made = [as_the_reference_makes_it(devices, launcher) for devices, launcher in ((8, "torchrun"), (1, None))]
made.append(as_the_reference_makes_it(4, base.Torchrun(rdzv_backend="c10d", rdzv_port=29500)))
if os.environ.get("MLPERF_WF_HOOKS") == "mlperf_wf_llama31_405b":
    made.append(as_the_405b_reference_makes_it())
outcomes = []
for executor in made:
    executor.job_dir = "/results/job"
    executor.experiment_id = "pretrain"
    executor.experiment_dir = "/results/experiment"
    before = describe(executor)
    clone = executor.clone()
    data_index = describe(clone)
    clone.launcher = "torchrun"; clone.nodes = 1; clone.ntasks_per_node = 1; clone.retries = 1
    clone.env_vars["ONLY_IN_THE_CLONE"] = "1"
    outcomes.append({
        "clone": data_index,
        "clone is a new object": clone is not executor,
        "the original after the clone's changes": describe(executor) == before,
        "the same launcher object": clone.launcher is executor.launcher,
    })
print(json.dumps(outcomes))
"""

REAL = "import nemo_run as run\nfrom nemo_run.core.execution import base\n" + SCENARIOS

STAND_IN = (
    f"""
from pathlib import Path
from tests.rehearsal import nemo_run as _nemo_run
loaded = _nemo_run.load(Path({str(NEMO_RUN_SOURCE)!r}))
run, base = loaded.run, loaded.base
"""
    + SCENARIOS
)


def _outcomes(python: str, script: str, patches: str | None, folder: Path) -> list:
    # as the image starts every process: the start-up hooks, and the benchmark's round patches where given
    folders = [ROOT / "containers" / "hooks", *([ROOT / "src/mlperf_wf/benchmarks" / patches / "container" / "patches"] if patches else []), ROOT]
    env = {**os.environ, "NEMORUN_HOME": str(folder / "nemo_run_home"), "PYTHONPATH": ":".join(map(str, folders))}
    env.pop("MLPERF_WF_HOOKS", None)
    if patches:
        env["MLPERF_WF_HOOKS"] = f"mlperf_wf_{patches}"
    done = subprocess.run([python, "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("patches", [None, "llama31_8b", "llama31_405b"])
def test_the_stand_in_clones_an_executor_as_fiddle_does(tmp_path, patches):
    reference = reference_python_with("nemo_run", "NeMo-Run (with fiddle)")
    real = _outcomes(str(reference), REAL, patches, tmp_path)
    stand_in = _outcomes(sys.executable, STAND_IN, patches, tmp_path)
    assert stand_in == real
    assert len(real) == (4 if patches == "llama31_405b" else 3)
    # what the comparison rests on: the round trip drops `nodes` and the non-init fields, keeps the rest
    assert real[0]["clone"]["not fields"] == {} and real[0]["clone"]["fields"]["ntasks_per_node"] == "8", real[0]
    assert real[0]["clone"]["fields"]["experiment_dir"] == "''" and real[0]["the original after the clone's changes"], real[0]


def test_nemo_run_source_is_the_pinned_one():
    assert (Path(NEMO_RUN_SOURCE) / "core" / "execution" / "base.py").read_text().count("return fdl.build(self.to_config())") == 1
