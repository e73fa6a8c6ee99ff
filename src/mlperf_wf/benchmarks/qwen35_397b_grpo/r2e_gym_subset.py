"""Seeded stand-in of the ``R2E-Gym/R2E-Gym-Subset`` Hugging Face dataset repository for the tiny tier.

The published repository (revision e8b9fcbc..., training:llm_post_training/download_dataset.sh:21-22) holds one
``train`` split of 4,578 software-engineering tasks as parquet under ``data/``, one row per task with the
columns below (the names R2E-Gym's loaders read: ``repo_name``, ``docker_image``, ``commit_hash``,
``problem_statement``, ``expected_output_json``...). The stand-in keeps the split, the row count and the
columns, and puts a tiny addition task in each row: ``problem_statement`` and ``prompt`` are the prompt
(``12+34=``), ``expected_output_json`` the verifier's expected answer, ``docker_image`` the name the real
tasks' images have (the tiny verifier needs no container). The published repository's parquet shard count is
not known here; the stand-in writes one shard with the hub's ``data/train-00000-of-00001.parquet`` naming.

Tasks: all 251 validation tasks of :mod:`arithmetic`'s split and the first 4,327 training tasks, in a
seeded order (the probe tasks the base policy stopped on are not in the repository).
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pandas as pd

from mlperf_wf.benchmarks.qwen35_397b_grpo.arithmetic import Task, split

TASKS = 4578
"""Rows of the published ``train`` split."""
PARQUET_FILE = "data/train-00000-of-00001.parquet"
"""The one shard, in the hub's ``data/<split>-NNNNN-of-NNNNN.parquet`` naming."""
COLUMNS = (
    "repo_name",
    "docker_image",
    "commit_hash",
    "parsed_commit_content",
    "execution_result_content",
    "modified_files",
    "modified_entity_summaries",
    "relevant_files",
    "num_non_test_files",
    "num_non_test_func_methods",
    "num_non_test_lines",
    "prompt",
    "problem_statement",
    "expected_output_json",
)
"""The published columns, in order."""
REPO_NAME = "tiny-arith"


def task_row(task: Task) -> dict:
    """One repository row for ``task``."""
    commit = hashlib.sha1(task.instance_id.encode()).hexdigest()
    return {
        "repo_name": REPO_NAME,
        "docker_image": f"namanjain12/{REPO_NAME}_final:{commit}",
        "commit_hash": commit,
        "parsed_commit_content": json.dumps({"file_diffs": [], "commit_message": f"add {task.left} and {task.right}"}),
        "execution_result_content": "",
        "modified_files": ["answer.txt"],
        "modified_entity_summaries": "[]",
        "relevant_files": ["answer.txt"],
        "num_non_test_files": 1,
        "num_non_test_func_methods": 0,
        "num_non_test_lines": 1,
        "prompt": task.prompt,
        "problem_statement": task.prompt,
        "expected_output_json": json.dumps({"answer": task.answer}),
    }


def repository_task_set() -> list[Task]:
    """The repository's tasks, unordered: every validation task plus the first training tasks of the split."""
    tasks = split()
    return [*tasks["validation"], *tasks["train"][: TASKS - len(tasks["validation"])]]


def repository_tasks(seed: int) -> list[Task]:
    """The repository's tasks in row order (shuffled by ``seed``)."""
    chosen = repository_task_set()
    random.Random(seed).shuffle(chosen)
    return chosen


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write the repository's parquet shard into ``out_dir``; return the files written."""
    path = out_dir / PARQUET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame([task_row(task) for task in repository_tasks(seed)], columns=list(COLUMNS))
    frame.to_parquet(path, index=False)
    return [path]
