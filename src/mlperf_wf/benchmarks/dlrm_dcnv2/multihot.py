"""The reference's multi-hot materialization (scripts/materialize_synthetic_multihot_dataset.py) in bounded memory.

The reference builds every one-hot -> multi-hot table at once in memory (multi_hot.py:81-112:
``np.random.seed(0)``, then per feature ``randint(0, n, size=(n, hot - 1))`` after the id column; for
feature 20, 40 M x 99 int64 is 32 GB), then for each day maps all 26 features and saves one npz
(materialize_synthetic_multihot_dataset.py:126-150). Here:

- ``write_tables`` draws the same numbers in row chunks (the legacy MT19937 stream does not depend on
  how the draws are split) and writes each table as an int32 ``.npy``, checkpointing after every chunk;
- ``materialize_feature`` maps one feature of one day in row chunks into an int32 ``.npy``,
  checkpointing after every chunk;
- ``pack_day`` writes the 26 feature files into the reference's uncompressed ``day_<d>_sparse_multi_hot.npz``,
  streaming each member.

So memory is one chunk, and a killed job resumes at its last saved chunk. The from-raw preparation's shards
(``prepare_from_raw.py``) call them.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from mlperf_wf.acquire.prepare import Checkpoint

SEED = 0
"""multi_hot.py:87: every rank draws the tables from numpy's global seed 0."""
CHUNK_ROWS = 1 << 20
"""Rows per chunk of a table draw or a day's mapping."""


def table_file(folder: Path, feature: int) -> Path:
    return folder / f"multi_hot_table_{feature}.npy"


def write_tables(folder: Path, num_embeddings: list[int], multi_hot_sizes: list[int], scratch: Checkpoint) -> list[Path]:
    """The reference's uniform multi-hot tables, feature by feature, drawn in chunks; resumes after a kill.

    The random stream is replayed from the seed on resume (drawing is cheap next to the writes); the rows
    already written are not written again.
    """
    rng = np.random.RandomState(SEED)
    done_feature, done_rows = scratch.get("feature"), scratch.get("rows")
    paths = []
    for feature, (rows, hot) in enumerate(zip(num_embeddings, multi_hot_sizes, strict=True)):
        path = table_file(folder, feature)
        paths.append(path)
        if feature < done_feature:
            for start in range(0, rows, CHUNK_ROWS):  # advance the stream past a finished table
                rng.randint(0, rows, size=(min(CHUNK_ROWS, rows - start), hot - 1))
            continue
        resume = done_rows if feature == done_feature and path.is_file() else 0
        table = np.lib.format.open_memmap(path, mode="r+" if resume else "w+", dtype=np.int32, shape=(rows, hot))
        for start in range(0, rows, CHUNK_ROWS):
            stop = min(start + CHUNK_ROWS, rows)
            draws = rng.randint(0, rows, size=(stop - start, hot - 1))
            if start < resume:
                continue
            table[start:stop, 0] = np.arange(start, stop, dtype=np.int32)
            table[start:stop, 1:] = draws
            table.flush()
            scratch.save(feature=feature, rows=stop)
        del table
        scratch.save(feature=feature + 1, rows=0)
    return paths


def materialize_feature(one_hot: np.ndarray, feature: int, num_embeddings: int, table: np.ndarray, target: Path, scratch: Checkpoint) -> None:
    """Column ``feature`` of a day's one-hot ``(rows, 26)`` ids, modulo the table size, through the table, into
    ``target`` (int32 rows x hot), as materialize_synthetic_multihot_dataset.py:133-137; resumes after a kill."""
    rows, hot = one_hot.shape[0], table.shape[1]
    resume = scratch.get("rows") if target.is_file() else 0
    out = np.lib.format.open_memmap(target, mode="r+" if resume else "w+", dtype=np.int32, shape=(rows, hot))
    for start in range(resume, rows, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, rows)
        ids = np.asarray(one_hot[start:stop, feature]).astype(np.int64) % num_embeddings
        out[start:stop] = table[ids]
        out.flush()
        scratch.save(rows=stop)
    del out


def pack_day(feature_files: list[Path], target: Path) -> None:
    """The features' ``.npy`` files as the reference's uncompressed npz (members ``"0.npy"``...), streamed."""
    partial = target.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for feature, path in enumerate(feature_files):
            array = np.load(path, mmap_mode="r")
            with archive.open(f"{feature}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array_header_1_0(member, np.lib.format.header_data_from_array_1_0(array))
                for start in range(0, array.shape[0], CHUNK_ROWS):
                    member.write(np.ascontiguousarray(array[start : start + CHUNK_ROWS]).tobytes())
    partial.replace(target)
