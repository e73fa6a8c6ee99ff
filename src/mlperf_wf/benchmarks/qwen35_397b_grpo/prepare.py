"""Data preparation for qwen35_397b_grpo: R2E-Gym-Subset -> the two qualified JSON-lines files, verified.

Full scale follows training:llm_post_training/download_dataset.sh:113-157: the NeMo-RL submodule's converter
``tools/create_r2e_gym_easy_subset_jsonl.py`` (pinned commit 3fca04c9...; not in our reference copy) reads the
downloaded repository and the qualified ID lists ``tools/{train,val}-instance-ids.txt`` and writes
``benchmark_r2e_gym_easy_{train,val}.jsonl``; they are renamed to the names ``verify_dataset.sh`` expects and
checked there by sha256, line count and byte count (verify_dataset.sh:19-27,54-77). Preparation runs that
converter from a NeMo-RL checkout at the pinned commit (``MLPERF_WF_NEMO_RL_DIR``; refused at any other
commit) and checks the reference's constants.

Tiny scale: the converter is the reference's own only in its outputs: this module selects the validation and
training tasks by the tiny task split (all 251 validation tasks, the first 685 training tasks: the reference's
counts, 256 validation tasks trimmed to the 251 the rules log) into ID lists (written beside the outputs, as the reference ships its
lists), writes one JSON object per task in repository order, renames and verifies the files the same way,
against the tiny generator's own sha256/rows/bytes pinned in ``EXPECTED`` (a test checks the generator still
produces them). One shard: a killed preparation redoes it whole (seconds at tiny scale; the full-scale
converter caches in ``cache/``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mlperf_wf.acquire.verify import NewlineCount, hash_file
from mlperf_wf.benchmarks.qwen35_397b_grpo.arithmetic import parse_prompt, split
from mlperf_wf.errors import UserError

TRAIN_FILENAME = "benchmark_r2e_gym_easy_train.filtered.curriculum-v2-classic-cycles2-seed20260710.jsonl"
"""verify_dataset.sh:19 (download_dataset.sh renames the converter's ``benchmark_r2e_gym_easy_train.jsonl`` to it)."""
VALIDATION_FILENAME = "benchmark_r2e_gym_easy_val.jsonl"
"""verify_dataset.sh:24."""
METRICS_FILENAME = "r2e_gym_subset_full_conversion_metrics.json"
"""The converter's metrics file (download_dataset.sh:150-152)."""
NEMO_RL_COMMIT = "3fca04c9b313d313302923a5bb6b0c8dc0340ed6"
"""The llm_moe_grpo/RL submodule commit (training:llm_post_training/README.md:36-41)."""
CONTAINER_IMAGE_DIR = "/inputs/nemo_gym/sif"
"""The converter's default ``--container-image-dir`` (where the runs mount the task SIF images)."""
SHARD = "r2e_gym_easy"
TRAIN_TASKS = 685
"""Training tasks the tiny lists qualify: the first 685 training tasks in repository order (the reference's count)."""


@dataclass(frozen=True)
class Expected:
    """What ``verify_dataset.sh`` checks of one file."""

    sha256: str
    """sha256 of the file."""
    rows: int
    """Lines (``wc -l``)."""
    bytes: int
    """Size (``wc -c``)."""


EXPECTED: dict[str, dict[str, Expected]] = {
    "full": {
        TRAIN_FILENAME: Expected("c07bcd64ed1c558e28d091239104e38295a5e696c1d21bb0b61f0346c7eaa0f7", 685, 444_421_669),  # verify_dataset.sh:20-22
        VALIDATION_FILENAME: Expected("452d0e6b3c1973669334062dc24931355de51749df1ab51fc9bb71a129f7bb5c", 256, 173_801_096),  # :25-27
    },
    "tiny": {
        TRAIN_FILENAME: Expected("2642471ee641a006a0f56ee82f506445076c3114a0b27e87572fd1983e9bc044", 685, 234_270),
        VALIDATION_FILENAME: Expected("b11e7d2d0b6cc2c632edec6c6830b5b0b8c701dcd4ed88104d8496ef438d8421", 251, 85_842),
    },
}
"""Per scale, file -> the values its verification checks (tiny: what the tiny generators write with the catalog's
seeds, r2e_gym_subset 5200; tests/benchmarks/qwen35_397b_grpo/test_qwen35_397b_grpo.py checks they still do)."""


def verify(path: Path, expected: Expected) -> None:
    """verify_dataset.sh's checks of one file (sha256, ``wc -l``, ``wc -c``); one clear error naming the first mismatch."""
    if not path.is_file():
        raise UserError(f"missing dataset file: {path}")
    sums = hash_file(path, {"sha256": hashlib.sha256(), "lines": NewlineCount()})
    digest, lines = sums["sha256"], sums["lines"].lines
    size = path.stat().st_size
    if digest.hexdigest() != expected.sha256:
        raise UserError(f"{path}: SHA-256 {digest.hexdigest()}, expected {expected.sha256}")
    if lines != expected.rows:
        raise UserError(f"{path}: {lines} rows, expected {expected.rows}")
    if size != expected.bytes:
        raise UserError(f"{path}: {size} bytes, expected {expected.bytes}")


def shards(scale: str) -> list[str]:
    """One shard: the conversion reads the whole repository."""
    return [SHARD]


def layout(scale: str) -> dict[str, str]:
    """The folder the runs read (``QWEN35_CURRICULUM_DATA_PATH`` and ``NEMO_GYM_SWE_VALIDATION_DATA_PATH`` point into it)."""
    return {name: f"{SHARD}/{name}" for name in (TRAIN_FILENAME, VALIDATION_FILENAME, METRICS_FILENAME, "prepared.json")}


def jsonl_row(row: dict, container_image_dir: str) -> str:
    """One task of the tiny converter's output: its id, prompt, expected answer and container image."""
    image = row["docker_image"]
    sif = f"{container_image_dir}/{image.replace('/', '_').replace(':', '_')}.sif"
    instance_id = parse_prompt(row["problem_statement"]).instance_id
    record = {
        "instance_id": instance_id,
        "repo_name": row["repo_name"],
        "docker_image": image,
        "container_image": sif,
        "problem_statement": row["problem_statement"],
        "expected_output_json": row["expected_output_json"],
    }
    return json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"


def convert_tiny(dataset_dir: Path, out_dir: Path) -> dict[str, int]:
    """The tiny converter: select validation and training tasks by the split's ID lists; returns rows per file."""
    files = sorted(dataset_dir.glob("data/train-*.parquet"))
    if not files:
        raise UserError(f"{dataset_dir}: no data/train-*.parquet (an R2E-Gym-Subset repository holds its train split there)")
    import pandas as pd  # where a conversion runs, not on every parse that lists the shards

    frame = pd.concat([pd.read_parquet(path) for path in files], ignore_index=True)
    validation = {task.prompt for task in split()["validation"]}
    training = {task.prompt for task in split()["train"]}
    out: dict[str, list[str]] = {VALIDATION_FILENAME: [], TRAIN_FILENAME: []}
    ids: dict[str, list[str]] = {"val-instance-ids.txt": [], "train-instance-ids.txt": []}
    for row in frame.to_dict(orient="records"):
        line = jsonl_row(row, CONTAINER_IMAGE_DIR)
        if row["problem_statement"] in validation:
            out[VALIDATION_FILENAME].append(line)
            ids["val-instance-ids.txt"].append(json.loads(line)["instance_id"])
        elif row["problem_statement"] in training and len(out[TRAIN_FILENAME]) < TRAIN_TASKS:
            out[TRAIN_FILENAME].append(line)
            ids["train-instance-ids.txt"].append(json.loads(line)["instance_id"])
    staging = out_dir / ".staging"
    staging.mkdir(parents=True, exist_ok=True)
    for name, lines in {**out, **{k: [f"{i}\n" for i in v] for k, v in ids.items()}}.items():
        (staging / name).write_text("".join(lines))
    metrics = {"repository_rows": len(frame), "train_rows": len(out[TRAIN_FILENAME]), "validation_rows": len(out[VALIDATION_FILENAME])}
    (staging / METRICS_FILENAME).write_text(json.dumps(metrics, indent=2) + "\n")
    for path in staging.iterdir():
        path.replace(out_dir / path.name)
    staging.rmdir()
    return {name: len(lines) for name, lines in out.items()}


def nemo_rl_checkout() -> Path:
    """The NeMo-RL checkout at the pinned commit that holds the reference's converter (``MLPERF_WF_NEMO_RL_DIR``)."""
    value = os.environ.get("MLPERF_WF_NEMO_RL_DIR")
    if not value:
        raise UserError(
            f"MLPERF_WF_NEMO_RL_DIR is not set: the full-scale conversion runs NeMo-RL's tools/create_r2e_gym_easy_subset_jsonl.py; "
            f"clone https://github.com/NVIDIA-NeMo/RL at {NEMO_RL_COMMIT} and point MLPERF_WF_NEMO_RL_DIR at it"
        )
    checkout = Path(value)
    try:
        head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as err:
        raise UserError(f"MLPERF_WF_NEMO_RL_DIR={checkout}: not a git checkout ({err})") from None
    if head != NEMO_RL_COMMIT:
        raise UserError(f"MLPERF_WF_NEMO_RL_DIR={checkout}: at commit {head}; the reference pins {NEMO_RL_COMMIT}")
    return checkout


def convert_full(dataset_dir: Path, out_dir: Path) -> None:
    """download_dataset.sh:126-153: the reference's converter into a staging folder, then the reference's renames."""
    checkout = nemo_rl_checkout()
    staging = out_dir / ".staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    command = [
        *("uv", "run", "--with", "pyarrow==23.0.1", "python", "tools/create_r2e_gym_easy_subset_jsonl.py"),
        *("--dataset-dir", str(dataset_dir), "--output-dir", str(staging), "--cache-dir", str(out_dir / "cache")),
        *("--container-image-dir", CONTAINER_IMAGE_DIR),
        *("--train-ids", "tools/train-instance-ids.txt", "--val-ids", "tools/val-instance-ids.txt"),
    ]
    subprocess.run(command, cwd=checkout, check=True)
    (staging / "benchmark_r2e_gym_easy_train.jsonl").replace(out_dir / TRAIN_FILENAME)
    (staging / "benchmark_r2e_gym_easy_val.jsonl").replace(out_dir / VALIDATION_FILENAME)
    (staging / METRICS_FILENAME).replace(out_dir / METRICS_FILENAME)
    shutil.rmtree(staging)


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Convert ``inputs['data']`` (the downloaded repository) and verify both files."""
    if shard != SHARD:
        raise UserError(f"qwen35_397b_grpo: unknown shard {shard!r}; known: {SHARD}")
    out_dir.mkdir(parents=True, exist_ok=True)
    if scale == "full":
        convert_full(inputs["data"], out_dir)
    else:
        convert_tiny(inputs["data"], out_dir)
    expected = EXPECTED["full" if scale == "full" else "tiny"]
    for name, values in expected.items():
        verify(out_dir / name, values)
    summary = {"scale": scale, "files": {name: {"sha256": e.sha256, "rows": e.rows, "bytes": e.bytes} for name, e in expected.items()}}
    (out_dir / "prepared.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
