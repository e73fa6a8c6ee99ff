"""Seeded stand-in of the per-task R2E-Gym environments (the reference's SIF images) for the tiny tier.

At full scale every training and validation task runs in its own Apptainer image, built by the NeMo-RL
submodule's ``docker/mlperf/data_scripts/build_r2e_gym_sif.sh`` (a 977-image superset of the 941 the qualified
lists use) into ``NEMO_GYM_SWE_SIF_DIR``, as ``r2egym/<instance_id>.sif`` (training:llm_post_training/README.md:
264-290); the verifier applies the agent's patch there and runs the task's tests. The tiny environment of a
task is ``r2egym/<instance_id>.json``: the task's test (the addends whose sum the answer must spell), which
the tiny verifier runs on a completion (:func:`run_test`). One environment per task of the tiny repository
(a superset of the qualified lists, as the reference's builder makes).
"""

from __future__ import annotations

import json
from pathlib import Path

from mlperf_wf.benchmarks.qwen35_397b_grpo.arithmetic import ANSWER_DIGITS, Task
from mlperf_wf.benchmarks.qwen35_397b_grpo.r2e_gym_subset import repository_task_set

SUBDIR = "r2egym"
"""The layout's subfolder (the recipe accepts ``<dir>/r2egym/<id>.sif`` or ``<dir>/<id>.sif``)."""


def environment(task: Task) -> dict:
    """The tiny environment of ``task``: its id and its test."""
    return {"instance_id": task.instance_id, "test": {"kind": "sum", "addends": [task.left, task.right], "digits": ANSWER_DIGITS}}


def run_test(env: dict, completion: str) -> float:
    """The task's test on a completion: 1.0 when it spells the sum with the required digits, else 0.0."""
    test = env["test"]
    if test.get("kind") != "sum":
        raise ValueError(f"{env.get('instance_id')}: unknown tiny test kind {test.get('kind')!r} (known: sum)")
    return 1.0 if completion == f"{sum(test['addends']):0{test['digits']}d}" else 0.0


def load(folder: Path, instance_id: str) -> dict:
    """The environment of ``instance_id`` under ``folder`` (either accepted layout); a clear error when missing."""
    for path in (folder / SUBDIR / f"{instance_id}.json", folder / f"{instance_id}.json"):
        if path.is_file():
            return json.loads(path.read_text())
    raise FileNotFoundError(f"{folder}: no task environment for {instance_id} (looked for {SUBDIR}/{instance_id}.json and {instance_id}.json)")


def generate(out_dir: Path, seed: int) -> list[Path]:
    """One environment per task of the tiny repository (``seed`` is unused: an environment is its task's)."""
    folder = out_dir / SUBDIR
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for task in sorted(repository_task_set(), key=lambda t: t.instance_id):
        path = folder / f"{task.instance_id}.json"
        path.write_text(json.dumps(environment(task), sort_keys=True) + "\n")
        paths.append(path)
    return paths
