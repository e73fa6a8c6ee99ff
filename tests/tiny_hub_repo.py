"""A small seeded hub repository for the download tests: parquet and JSON-lines rows, a README, optionally a large binary."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

TRAIN_ROWS = 40
VALIDATION_ROWS = 12


def generate(out_dir: Path, seed: int, big_bytes: int = 0) -> list[Path]:
    """Write the repository's files under ``out_dir``; ``big_bytes`` > 0 adds ``weights/model.bin`` of that size."""
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "data").mkdir(exist_ok=True)
    train = out_dir / "data" / "train-00000-of-00001.parquet"
    ids = [f"task-{rng.randrange(10**6):06d}" for _ in range(TRAIN_ROWS)]
    pq.write_table(pa.table({"instance_id": ids, "difficulty": [rng.random() for _ in ids]}), train)
    validation = out_dir / "data" / "validation.jsonl"
    validation.write_text("".join(json.dumps({"instance_id": f"val-{i}", "seed": rng.randrange(100)}) + "\n" for i in range(VALIDATION_ROWS)))
    readme = out_dir / "README.md"
    readme.write_text(f"# tiny hub repository (seed {seed})\n")
    files = [train, validation, readme]
    if big_bytes:
        (out_dir / "weights").mkdir(exist_ok=True)
        big = out_dir / "weights" / "model.bin"
        big.write_bytes(rng.randbytes(big_bytes))
        files.append(big)
    return files
