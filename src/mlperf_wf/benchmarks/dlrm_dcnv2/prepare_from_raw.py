"""dlrm_dcnv2's preparation from the raw Criteo 1TB click logs (``--config 'preparation={dlrm_dcnv2: from_raw}'``).

The reference's whole preparation (README.MD "Appendix": ``process_Criteo_1TB_Click_Logs_dataset.sh``, 700 GB of
RAM and 1-2 days, then ``materialize_synthetic_multihot_dataset.py``, 3.8 TB) as shards that each hold one chunk,
one feature's vocabulary, or one index per row, each resuming after a kill (``click_logs.py``, ``multihot.py``):

=====================  =====  ==================================================================================
shard                  count  what it does (reads)
=====================  =====  ==================================================================================
``raw_day_<d>``        24     step 1, one day's lines to labels, dense log(x + 3), one file per feature (raw logs)
``contiguous_<k>``     26     step 2, feature k's values renumbered by first appearance over days 0..23 (raw days)
``shuffle_order``      1      step 3, where numpy's seeded shuffle moves each training row (raw days 0-22 counts)
``scatter_day_<d>``    23     step 3, training day d's rows into one bucket per destination day
``one_hot_day_<d>``    24     step 3's output day: torchrec's ``day_<d>_{dense,sparse,labels}.npy`` (buckets; day
                              23 unshuffled from its raw day and contiguous ids)
``multihot_tables``    1      the reference's one-hot -> multi-hot tables (``multi_hot.py``, numpy seed 0)
``multihot_day_<d>``   24     the materialized ``day_<d>_sparse_multi_hot.npz`` + dense + labels, checked as the
                              published files are (one-hot day, tables)
``tables``             1      ``num_embeddings_per_feature`` the runs use
=====================  =====  ==================================================================================

The runs read the same tree as with the published dataset (``layout``), so nothing after preparation changes.
The count of training rows is checked before the shuffle: the MLPerf dataset has 4,195,197,692 (torchrec's
``TOTAL_TRAINING_SAMPLES``); click logs with another count (the Hugging Face copy is reported to be subsampled)
stop there with what to do instead.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from mlperf_wf.acquire.prepare import Checkpoint, link_or_copy, scratch_for, source_identity
from mlperf_wf.benchmarks.dlrm_dcnv2 import click_logs, criteo, multihot
from mlperf_wf.benchmarks.dlrm_dcnv2 import prepare as published
from mlperf_wf.errors import UserError

SHUFFLE_SEED = 0
"""process_Criteo_1TB_Click_Logs_dataset.sh:62: ``shuffle_preproc_criteo --random_seed 0``."""
TRAINING_ROWS_FULL = 4_195_197_692
"""Rows of days 0-22 (torchrec criteo.py ``TOTAL_TRAINING_SAMPLES``; README.MD's TOTAL_TRAINING_SAMPLES)."""
TRAINING_DAYS = criteo.DAYS - 1
"""Days 0-22 train and are shuffled together; day 23 validates and tests, unshuffled."""
RAW_ROLE = "click_logs"
"""The input role of the raw logs (benchmark.yaml ``preparations.from_raw.inputs``)."""


def training_rows(scale: str) -> int:
    """Rows days 0-22 must hold: the MLPerf dataset's, or the tiny generator's."""
    shape = criteo.ClickLogShape()
    return TRAINING_ROWS_FULL if scale == "full" else TRAINING_DAYS * shape.rows_per_train_day


def multi_hot_sizes(scale: str) -> list[int]:
    """Ids per row and feature of the materialization (README.MD's ``--multi_hot_sizes``, or the tiny tier's)."""
    return published.MULTI_HOT_SIZES_FULL if scale == "full" else list(criteo.ClickLogShape().multi_hot_sizes)


def shards(scale: str) -> list[str]:
    """Every shard, each after the shards it reads."""
    names = [f"raw_day_{d}" for d in range(criteo.DAYS)]
    names += [f"contiguous_{k}" for k in range(criteo.SPARSE_FEATURES)]
    names += ["shuffle_order"] + [f"scatter_day_{d}" for d in range(TRAINING_DAYS)]
    names += [f"one_hot_day_{d}" for d in range(criteo.DAYS)]
    names += ["multihot_tables"] + [f"multihot_day_{d}" for d in range(criteo.DAYS)]
    return [*names, "tables"]


def _kind(shard: str) -> tuple[str, int]:
    """(``raw_day``, 3) for ``raw_day_3``; (``tables``, -1) for a shard without a number."""
    stem, _, number = shard.rpartition("_")
    return (stem, int(number)) if number.isdigit() else (shard, -1)


def shard_inputs(shard: str, scale: str) -> list[str]:
    """The earlier shards a shard reads."""
    kind, number = _kind(shard)
    raw_days = [f"raw_day_{d}" for d in range(criteo.DAYS)]
    contiguous = [f"contiguous_{k}" for k in range(criteo.SPARSE_FEATURES)]
    if kind == "contiguous":
        return raw_days
    if kind == "shuffle_order":
        return raw_days[:TRAINING_DAYS]
    if kind == "scatter_day":
        return [f"raw_day_{number}", *contiguous, "shuffle_order"]
    if kind == "one_hot_day":
        if number == TRAINING_DAYS:
            return [f"raw_day_{number}", *contiguous]
        return ["shuffle_order", *(f"scatter_day_{d}" for d in range(TRAINING_DAYS))]
    if kind == "multihot_day":
        return [f"one_hot_day_{number}", "multihot_tables"]
    return []


def layout(scale: str) -> dict[str, str]:
    """The same flat folder as the published path's, from the materialized days."""
    tree = {name: f"multihot_day_{day}/{name}" for day in range(criteo.DAYS) for name in criteo.day_files(day).values()}
    tree["tables.json"] = "tables/tables.json"
    return tree


FULL_RESOURCES = {
    "raw_day": {"mem_mb": 8000, "runtime": 480},  # a 50 GB day of text parsed in 64 MB blocks
    "contiguous": {"mem_mb": 16000, "runtime": 720},  # the largest vocabulary: about 300 M values x (value, id)
    "shuffle_order": {"mem_mb": 48000, "runtime": 360},  # two 17 GB index files, shuffled and inverted in place
    "scatter_day": {"mem_mb": 16000, "runtime": 240},
    "one_hot_day": {"mem_mb": 40000, "runtime": 360},  # a 30 GB day written at random rows
    "multihot_tables": {"mem_mb": 8000, "runtime": 240},
    "multihot_day": {"mem_mb": 24000, "runtime": 480},  # feature 20's 16 GB table looked up at random
    "tables": {"mem_mb": 1000, "runtime": 10},
}
"""Scheduler resources of each kind of shard at full scale (this workflow's estimates; the reference runs all in one
700 GB process)."""


def resources(shard: str, scale: str) -> dict[str, int]:
    if scale == "tiny":
        return {"mem_mb": 2000, "runtime": 10}
    return FULL_RESOURCES[_kind(shard)[0]]


# ---- the shards ----


def _move_into(files: list[Path], out_dir: Path) -> None:
    for file in files:
        os.replace(file, out_dir / file.name)


def _rows_per_day(shards_dir: Path, days: range) -> list[int]:
    return [int(np.load(shards_dir / f"raw_day_{d}" / "labels.npy", mmap_mode="r").shape[0]) for d in days]


def _raw_day(day: int, raw: Path, out_dir: Path) -> dict:
    source = click_logs.raw_day_file(raw, day)
    scratch = Checkpoint(scratch_for(out_dir), source_identity(source))
    summary = click_logs.read_day(source, scratch.folder, scratch)
    _move_into(list(click_logs.day_part_files(scratch.folder).values()), out_dir)
    scratch.done()
    return {"source": source.name, **summary}


def _contiguous(feature: int, shards_dir: Path, out_dir: Path) -> dict:
    days = [shards_dir / f"raw_day_{d}" / f"sparse_{feature}.npy" for d in range(criteo.DAYS)]
    scratch = Checkpoint(scratch_for(out_dir), source_identity(*days))
    outputs = [scratch.folder / f"day_{d}.npy" for d in range(criteo.DAYS)]
    summary = click_logs.contiguous_ids(days, outputs, scratch)
    _move_into(outputs, out_dir)
    scratch.done()
    return {"feature": feature, **summary}


def _shuffle_order(shards_dir: Path, out_dir: Path, scale: str) -> dict:
    rows = _rows_per_day(shards_dir, range(TRAINING_DAYS))
    expected = training_rows(scale)
    if sum(rows) != expected:
        raise UserError(
            f"{shards_dir}: raw days 0-{TRAINING_DAYS - 1} hold {sum(rows):,} rows; the MLPerf Criteo 1TB training set has {expected:,} "
            "(these click logs are another copy, e.g. a subsampled one): use the default preparation (the published dataset)"
        )
    sources = [shards_dir / f"raw_day_{d}" / "labels.npy" for d in range(TRAINING_DAYS)]
    scratch = Checkpoint(scratch_for(out_dir), source_identity(*sources))
    target = scratch.folder / "destination.npy"
    click_logs.shuffle_destinations(rows, SHUFFLE_SEED, target, scratch)
    (scratch.folder / "rows.json").write_text(json.dumps({"rows_per_day": rows}) + "\n")
    _move_into([target, scratch.folder / "rows.json"], out_dir)
    scratch.done()
    return {"training_rows": sum(rows), "seed": SHUFFLE_SEED}


def _training_rows_per_day(shards_dir: Path) -> list[int]:
    return json.loads((shards_dir / "shuffle_order" / "rows.json").read_text())["rows_per_day"]


def _day_arrays(shards_dir: Path, day: int) -> dict[str, np.ndarray]:
    raw = shards_dir / f"raw_day_{day}"
    part = {"dense": np.load(raw / "dense.npy", mmap_mode="r"), "labels": np.load(raw / "labels.npy", mmap_mode="r")}
    for k in range(criteo.SPARSE_FEATURES):
        part[f"sparse_{k}"] = np.load(shards_dir / f"contiguous_{k}" / f"day_{day}.npy", mmap_mode="r")
    return part


def _scatter_day(day: int, shards_dir: Path, out_dir: Path) -> dict:
    rows = _training_rows_per_day(shards_dir)
    destination = shards_dir / "shuffle_order" / "destination.npy"
    part = _day_arrays(shards_dir, day)
    sources = [
        destination,
        shards_dir / f"raw_day_{day}" / "dense.npy",
        *(shards_dir / f"contiguous_{k}" / f"day_{day}.npy" for k in range(criteo.SPARSE_FEATURES)),
    ]
    scratch = Checkpoint(scratch_for(out_dir), source_identity(*sources))
    buckets = [scratch.folder / f"to_day_{e}.npy" for e in range(TRAINING_DAYS)]
    sizes = click_logs.scatter_day(day, rows, np.load(destination, mmap_mode="r"), part, buckets, scratch)
    _move_into(buckets, out_dir)
    scratch.done()
    return {"day": day, "rows_to_each_day": sizes}


def one_hot_files(folder: Path, day: int) -> dict[str, Path]:
    """torchrec's step-3 files of one day (what ``materialize_synthetic_multihot_dataset.py`` reads)."""
    return {part: folder / f"day_{day}_{part}.npy" for part in ("dense", "sparse", "labels")}


def _one_hot_day(day: int, shards_dir: Path, out_dir: Path) -> dict:
    if day == TRAINING_DAYS:  # copied unchanged by the reference: the raw day's dense and labels, contiguous ids
        part = _day_arrays(shards_dir, day)
        files = one_hot_files(out_dir, day)
        link_or_copy(shards_dir / f"raw_day_{day}" / "dense.npy", files["dense"])
        link_or_copy(shards_dir / f"raw_day_{day}" / "labels.npy", files["labels"])
        rows = len(part["labels"])
        sparse = np.lib.format.open_memmap(files["sparse"], mode="w+", dtype=np.int32, shape=(rows, criteo.SPARSE_FEATURES))
        for start in range(0, rows, click_logs.CHUNK_ROWS):
            for k in range(criteo.SPARSE_FEATURES):
                sparse[start : start + click_logs.CHUNK_ROWS, k] = part[f"sparse_{k}"][start : start + click_logs.CHUNK_ROWS]
        sparse.flush()
        return {"day": day, "rows": rows, "shuffled": False}
    rows = _training_rows_per_day(shards_dir)[day]
    buckets = [shards_dir / f"scatter_day_{d}" / f"to_day_{day}.npy" for d in range(TRAINING_DAYS)]
    scratch = Checkpoint(scratch_for(out_dir), source_identity(*buckets))
    files = one_hot_files(scratch.folder, day)
    click_logs.gather_day(rows, buckets, files, scratch)
    _move_into(list(files.values()), out_dir)
    scratch.done()
    return {"day": day, "rows": rows, "shuffled": True}


def _multihot_tables(out_dir: Path, scale: str) -> dict:
    sizes, hot = published.num_embeddings(scale), multi_hot_sizes(scale)
    scratch = Checkpoint(scratch_for(out_dir), {"num_embeddings": sizes, "multi_hot_sizes": hot, "seed": multihot.SEED})
    paths = multihot.write_tables(scratch.folder, sizes, hot, scratch)
    _move_into(paths, out_dir)
    scratch.done()
    return {"num_embeddings_per_feature": sizes, "multi_hot_sizes": hot}


def _multihot_day(day: int, shards_dir: Path, out_dir: Path, scale: str) -> dict:
    one_hot = one_hot_files(shards_dir / f"one_hot_day_{day}", day)
    tables_dir = shards_dir / "multihot_tables"
    sizes = published.num_embeddings(scale)
    sparse = np.load(one_hot["sparse"], mmap_mode="r")
    scratch_root = scratch_for(out_dir)
    features = []
    for k in range(criteo.SPARSE_FEATURES):
        table = np.load(multihot.table_file(tables_dir, k), mmap_mode="r")
        scratch = Checkpoint(scratch_root / f"feature_{k}", source_identity(one_hot["sparse"], multihot.table_file(tables_dir, k)))
        target = scratch.folder / f"{k}.npy"
        if not scratch.get("finished"):
            multihot.materialize_feature(sparse, k, sizes[k], table, target, scratch)
            scratch.save(finished=1)
        features.append(target)
    names = criteo.day_files(day)
    multihot.pack_day(features, out_dir / names["sparse"])
    link_or_copy(one_hot["dense"], out_dir / names["dense"])
    link_or_copy(one_hot["labels"], out_dir / names["labels"])
    summary = published.check_day(out_dir, day, sizes)
    shutil.rmtree(scratch_root, ignore_errors=True)
    return summary


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Write one shard into ``out_dir`` from the raw click logs (``inputs['click_logs']``) and the earlier shards
    (``inputs['shards']``)."""
    if shard not in shards(scale):
        raise UserError(f"dlrm_dcnv2 (from_raw): unknown shard {shard!r}; known: {', '.join(shards(scale))}")
    out_dir.mkdir(parents=True, exist_ok=True)
    kind, number = _kind(shard)
    shards_dir = inputs.get("shards", out_dir.parent)
    if kind == "raw_day":
        summary = _raw_day(number, inputs[RAW_ROLE], out_dir)
    elif kind == "contiguous":
        summary = _contiguous(number, shards_dir, out_dir)
    elif kind == "shuffle_order":
        summary = _shuffle_order(shards_dir, out_dir, scale)
    elif kind == "scatter_day":
        summary = _scatter_day(number, shards_dir, out_dir)
    elif kind == "one_hot_day":
        summary = _one_hot_day(number, shards_dir, out_dir)
    elif kind == "multihot_tables":
        summary = _multihot_tables(out_dir, scale)
    elif kind == "multihot_day":
        summary = _multihot_day(number, shards_dir, out_dir, scale)
    else:
        return published.prepare_shard("tables", inputs, out_dir, scale)
    summary = {"shard": shard, "scale": scale, "preparation": "from_raw", **summary}
    (out_dir / "shard.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
