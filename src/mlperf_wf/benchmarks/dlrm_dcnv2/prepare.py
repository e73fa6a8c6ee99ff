"""Data preparation for dlrm_dcnv2: the published materialized multi-hot day files, checked and linked per day.

MLCommons publishes the output of the reference's whole preparation
(``scripts/process_Criteo_1TB_Click_Logs_dataset.sh`` then
``scripts/materialize_synthetic_multihot_dataset.py``, README.MD "Appendix") as
``criteo_1tb_multihot_reference``: for each of the 24 days ``day_<d>_dense.npy``,
``day_<d>_labels.npy`` and ``day_<d>_sparse_multi_hot.npz``, the files
``dlrm_main.py --synthetic_multi_hot_criteo_path`` opens (data/dlrm_dataloader.py:77-95).
This download-only path is the default. Preparation is one shard per day: it checks the
three files against what the reference's loader asserts and assumes (dense float32 rows x 13,
labels int32 rows x 1, 26 uncompressed int32 members of rows x multi-hot size, equal row
counts, every id inside its table), reading the ids in row chunks so memory stays bounded
at 160 GB a day, and hard-links the files into the shard. A ``tables`` shard records the
``num_embeddings_per_feature`` the runs use. A killed preparation redoes only the days it
had not finished.

The other preparation, from the raw Criteo 1TB click logs through the reference's three
torchrec steps and the materialization (700 GB of RAM and 1-2 days as the reference runs it),
is ``prepare_from_raw.py``, chosen with ``preparation: {dlrm_dcnv2: from_raw}``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mlperf_wf.acquire.prepare import link_or_copy
from mlperf_wf.benchmarks.dlrm_dcnv2 import criteo
from mlperf_wf.errors import UserError

NUM_EMBEDDINGS_FULL = [
    40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10,
    2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36,
]  # fmt: skip
"""README.MD's MLPerf command --num_embeddings_per_feature (the tables the published ids were hashed into)."""
MULTI_HOT_SIZES_FULL = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]
"""README.MD's materialization --multi_hot_sizes: ids per row and feature in the published npz files."""
CHUNK_ROWS = 1 << 20
"""Rows per chunk when the ids of a day are range-checked."""


def num_embeddings(scale: str) -> list[int]:
    """Embedding rows per feature at ``scale``."""
    return NUM_EMBEDDINGS_FULL if scale == "full" else criteo.table_sizes()


def shards(scale: str) -> list[str]:
    """One shard per day file triple, and the table sizes."""
    return [f"day_{day}" for day in range(criteo.DAYS)] + ["tables"]


def layout(scale: str) -> dict[str, str]:
    """The flat folder ``--synthetic_multi_hot_criteo_path`` reads: file -> shard file."""
    tree = {name: f"day_{day}/{name}" for day in range(criteo.DAYS) for name in criteo.day_files(day).values()}
    tree["tables.json"] = "tables/tables.json"
    return tree


def resources(shard: str, scale: str) -> dict[str, int]:
    """Scheduler resources of one shard: a day is checked in row chunks."""
    if scale == "tiny":
        return {"mem_mb": 2000, "runtime": 10}
    return {"mem_mb": 8000, "runtime": 360}


def check_day(data: Path, day: int, tables: list[int]) -> dict:
    """Check one day's three files as the reference's loader reads them; return their row count and shapes."""
    names = criteo.day_files(day)
    for name in names.values():
        if not (data / name).is_file():
            raise UserError(f"{data / name}: missing; the verified multi-hot dataset should contain it")
    dense = np.load(data / names["dense"], mmap_mode="r")
    labels = np.load(data / names["labels"], mmap_mode="r")
    rows = dense.shape[0]
    if dense.dtype != np.float32 or dense.shape != (rows, criteo.DENSE_FEATURES):
        raise UserError(f"{data / names['dense']}: {dense.dtype} {dense.shape}; the reference reads float32 (rows, {criteo.DENSE_FEATURES})")
    if labels.dtype != np.int32 or labels.shape != (rows, 1):
        raise UserError(f"{data / names['labels']}: {labels.dtype} {labels.shape}; the reference reads int32 ({rows}, 1)")
    hot = []
    for feature in range(criteo.SPARSE_FEATURES):
        try:
            ids = criteo.load_multi_hot(data / names["sparse"], feature)
        except ValueError as err:
            raise UserError(str(err)) from None
        if ids.ndim != 2 or ids.shape[0] != rows:
            raise UserError(f"{data / names['sparse']}: member {feature}.npy has shape {ids.shape}; expected ({rows}, hot)")
        for start in range(0, rows, CHUNK_ROWS):
            chunk = np.asarray(ids[start : start + CHUNK_ROWS])
            if chunk.size and (chunk.min() < 0 or chunk.max() >= tables[feature]):
                raise UserError(
                    f"{data / names['sparse']}: member {feature}.npy has ids in [{chunk.min()}, {chunk.max()}]; table {feature} has {tables[feature]} rows"
                )
        hot.append(int(ids.shape[1]))
    return {"rows": int(rows), "multi_hot_sizes": hot}


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Write one shard into ``out_dir`` from the verified multi-hot dataset ``inputs['data']``."""
    if shard not in shards(scale):
        raise UserError(f"dlrm_dcnv2: unknown shard {shard!r}; known: {', '.join(shards(scale))}")
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = num_embeddings(scale)
    if shard == "tables":
        summary: dict = {"num_embeddings_per_feature": tables}
        (out_dir / "tables.json").write_text(json.dumps(summary) + "\n")
    else:
        day = int(shard.removeprefix("day_"))
        summary = check_day(inputs["data"], day, tables)
        for name in criteo.day_files(day).values():
            link_or_copy(inputs["data"] / name, out_dir / name)
    summary = {"shard": shard, "scale": scale, **summary}
    (out_dir / "shard.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
