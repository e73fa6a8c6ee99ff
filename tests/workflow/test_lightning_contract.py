"""Lightning's choice of cluster environment and its world checks, the real Trainer and the rehearsal's stand-ins: the
same world accepted or refused.

Lightning does not run in the rehearsal's venv, so the probes re-type what it decides at start-up: a benchmark's
srun world (``SLURMEnvironment``: stable_diffusion's ``_check_geometry``, checked beside its tests with these
scenarios) and
``llama31.world`` (torchrun's ranks: ``TorchElasticEnvironment``). A world the real Lightning refuses, or one it would not take from the launcher (a job
named ``bash`` makes Lightning spawn ranks of its own), must fail the rehearsal too. Each scenario builds the real
``Trainer`` (``.venv-reference``: lightning 2.4.0, NeMo 24.12's) under the scenario's environment and runs what
``fit`` runs before its first step on the CPU (the launcher's ``validate_settings`` and the rank's device), and runs the
stand-in check under the same environment.

stable_diffusion pins pytorch-lightning 1.9.4, whose ``SLURMEnvironment`` has no ``validate_settings`` (2.x added it:
a mismatch of ``devices``/``num_nodes`` with srun's geometry then shards the data wrongly instead of failing); the
stand-in refuses it as 2.4 does. The job name ``interactive`` (refused by 2.4 only) is left out: the plan never uses it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.reference_venv import REFERENCE_PYTHON, reference_python_with
from tests.rehearsal import llama31 as _llama31
from tests.rehearsal import probe

REAL_TRAINER = """
import json, os, sys, warnings
warnings.filterwarnings("ignore")
from lightning.pytorch import Trainer
outcomes = []
for scenario in json.loads(sys.argv[1]):
    os.environ.clear()
    os.environ.update({"PATH": "/usr/bin:/bin", **scenario["env"]})
    try:
        trainer = Trainer(accelerator="cpu", devices=scenario["devices"], num_nodes=scenario["nodes"], strategy="ddp",
                          logger=False, enable_checkpointing=False, enable_progress_bar=False)
        environment = trainer.strategy.cluster_environment
        if not environment.creates_processes_externally:
            outcomes.append(f"refused: {type(environment).__name__} spawns ranks of its own")
            continue
        trainer.strategy.launcher.launch(lambda: None, trainer=trainer)  # fit's start: validate_settings
        trainer.strategy.root_device  # the rank's device: parallel_devices[local_rank]
        outcomes.append(f"accepted: {type(environment).__name__} world {environment.world_size()}")
    except Exception as error:
        outcomes.append(f"refused: {type(error).__name__}: {error}")
print(json.dumps(outcomes))
"""
"""One process for every scenario (Lightning takes seconds to import); the Trainer reads the environment when built."""


def _srun(tasks_per_node: int | None, nodes: int, job_name: str = "train") -> dict[str, str]:
    """What srun gives the last task of a step of ``nodes`` x ``tasks_per_node`` (its geometry, not its placement)."""
    per_node = tasks_per_node or 2
    env = {"SLURM_NTASKS": str(nodes * per_node), "SLURM_NNODES": str(nodes), "SLURM_JOB_NAME": job_name, "SLURM_JOB_ID": "4242"}
    env |= {"SLURM_PROCID": str(nodes * per_node - 1), "SLURM_LOCALID": str(per_node - 1), "SLURM_NODEID": str(nodes - 1)}
    if tasks_per_node is not None:
        env["SLURM_NTASKS_PER_NODE"] = str(tasks_per_node)
    return env


def _torchrun(nnodes: int, nproc: int) -> dict[str, str]:
    """What torchrun gives the last rank of ``--nnodes`` x ``--nproc_per_node``."""
    world = nnodes * nproc
    env = {"WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(nproc), "RANK": str(world - 1), "LOCAL_RANK": str(nproc - 1)}
    return env | {"GROUP_RANK": str(nnodes - 1), "MASTER_ADDR": "node0", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none"}


SLURM_SCENARIOS = {
    # name: (trainer devices, trainer num_nodes, srun's environment)
    "the-plan-s-geometry": (2, 2, _srun(2, 2)),
    "job-named-bash": (2, 2, _srun(2, 2, job_name="bash")),
    "ntasks-without-ntasks-per-node": (2, 2, _srun(None, 2)),
    "devices-above-tasks-per-node": (4, 2, _srun(2, 2)),
    "devices-below-tasks-per-node": (1, 2, _srun(2, 2)),
    "num-nodes-below-srun-s-nodes": (2, 1, _srun(2, 2)),
    "not-under-srun": (2, 2, {}),
}
TORCHRUN_SCENARIOS = {
    "the-plan-s-geometry": (2, 2, _torchrun(2, 2)),
    "one-world-per-node": (2, 2, _torchrun(1, 2)),
    "all-ranks-on-one-node": (2, 2, _torchrun(1, 4)),
    "world-above-the-recipe": (2, 2, _torchrun(2, 4)),
}


def _real(scenarios: dict[str, tuple[int, int, dict[str, str]]]) -> dict[str, str]:
    reference_python_with("lightning", "Lightning")
    given = [{"devices": devices, "nodes": nodes, "env": env} for devices, nodes, env in scenarios.values()]
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([str(REFERENCE_PYTHON), "-c", REAL_TRAINER, json.dumps(given)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(zip(scenarios, json.loads(done.stdout.splitlines()[-1]), strict=True))


def _stand_in(check, env: dict[str, str], monkeypatch) -> str:
    monkeypatch.setattr(os, "environ", dict(env))  # the probes read os.environ as well as ctx.env
    ctx = probe.ProbeContext(benchmark="contract", argv=[], env=dict(env), cwd=Path.cwd())
    try:
        check(ctx)
    except probe.ProbeFailure as failure:
        return f"refused: {failure}"
    return "accepted"


def _compare(real: dict[str, str], stand_in: dict[str, str]) -> None:
    verdicts = {name: (real[name].split(":")[0], stand_in[name].split(":")[0]) for name in real}
    assert all(r == s for r, s in verdicts.values()), "\n".join(f"{name}: real {real[name]!r}, stand-in {stand_in[name]!r}" for name in real)


def test_llama31_s_torchrun_world_is_refused_where_lightning_refuses_it(monkeypatch):
    real = _real(TORCHRUN_SCENARIOS)
    stand_in = {}
    for name, (devices, nodes, env) in TORCHRUN_SCENARIOS.items():
        stand_in[name] = _stand_in(lambda ctx, devices=devices, nodes=nodes: _llama31.world(ctx, nodes, devices), env, monkeypatch)
    _compare(real, stand_in)
    assert real["the-plan-s-geometry"] == "accepted: TorchElasticEnvironment world 4", real
