"""Data preparation for dlrmv4: check the published cache and hard-link it into the tree the reference reads.

The reference has no preparation step for the published data (its README, "Option A"): MLCommons
publishes ``processed_5b/hstu_cache_L4086/`` -- the flat-event cache that
``DLRMv4YambdaDataset._ensure_cache_built`` (``datasets/yambda.py:385-544`` at a67b8459) would
otherwise build from ``train_sessions.parquet`` with ~190 GB of RAM -- plus ``item_popularity.npy``
and the two item mappings, and the trainer opens them as they are. (Option B, ``download_dataset.sh``
-> ``preprocess_public_data.py`` from Hugging Face, then the cache build on the first run, produces
byte-identical cache files per the reference's ``sha256sums_yambda_5b_cache.txt``; the workflow
downloads Option A.) So each shard checks its files the way the reader would trip over them (``.npy``
header, dtype, one entry per event or per uid, ``_READY`` and ``store_meta.json`` agreeing with the
arrays, the mappings' columns and the popularity length) and hard-links them, a symlink would dangle in
a container that mounts only the prepared folder. Three shards: the event columns (~227 GB at full
scale, so a killed preparation redoes only what had not been linked), the anchor index and the
metadata. The same at both scales: the tiny stand-in is written in the same layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mlperf_wf.acquire.prepare import link_or_copy
from mlperf_wf.benchmarks.dlrmv4 import yambda
from mlperf_wf.errors import UserError

EVENT_DTYPES = {
    "flat_uid": "int64",
    "flat_item_ids": "int64",
    "flat_timestamps": "int64",
    "flat_event_types": "int64",
    "flat_played_ratio": "float32",
    "flat_is_organic": "int8",
    "flat_is_listen_plus": "bool",
    "flat_is_like": "bool",
    "flat_is_skip": "bool",
}
"""One entry per event: the dtypes _ensure_cache_built writes."""
USER_DTYPES = {"user_start": "int64", "user_end": "int64", "unique_uids": "int64"}
ANCHOR_DTYPES = {name: "int64" for name in yambda.ANCHOR_FILES}
SHARDS = {
    "events": [f"{yambda.CACHE}/{name}.npy" for name in EVENT_DTYPES],
    "anchors": [f"{yambda.CACHE}/{name}.npy" for name in (*USER_DTYPES, *ANCHOR_DTYPES)],
    "metadata": [f"{yambda.CACHE}/store_meta.json", f"{yambda.CACHE}/_READY", f"{yambda.PROCESSED}/item_popularity.npy", *yambda.MAPPINGS.values()],
}


def shards(scale: str) -> list[str]:
    """The same three shards at both scales."""
    return list(SHARDS)


def layout(scale: str) -> dict[str, str]:
    """Prepared-tree path -> ``<shard>/<file>``: the DLRM_DATA_PATH tree (``processed_5b/``, ``shared_metadata/``)."""
    return {path: f"{shard}/{path}" for shard, paths in SHARDS.items() for path in paths}


def resources(shard: str, scale: str) -> dict[str, int]:
    """Linking reads only headers (the anchor check reads the uid index, a few MB at full scale)."""
    return {"mem_mb": 2000 if scale == "tiny" else 8000, "runtime": 10 if scale == "tiny" else 120}


def header(path: Path) -> tuple[tuple[int, ...], str]:
    """(shape, dtype) from an ``.npy`` header without reading the data; a clear error for anything else."""
    try:
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: not a readable .npy file ({err})") from None
    return tuple(array.shape), str(array.dtype)


def _expect(path: Path, dtypes: dict[str, str], name: str, length: int | None) -> int:
    shape, dtype = header(path)
    if dtype != dtypes[name] or len(shape) != 1:
        raise UserError(f"{path}: dtype {dtype}, shape {shape}; the reference reads a 1-d {dtypes[name]} array")
    if length is not None and shape[0] != length:
        raise UserError(f"{path}: {shape[0]} entries; expected {length} (one per event of flat_uid.npy)")
    return shape[0]


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Check and hard-link one shard's files from the verified dataset ``inputs['data']``."""
    if shard not in SHARDS:
        raise UserError(f"dlrmv4: unknown shard {shard!r}; known: {', '.join(SHARDS)}")
    data = inputs["data"]
    cache = data / yambda.CACHE
    missing = [path for path in SHARDS[shard] if not (data / path).exists()]
    if missing:
        raise UserError(f"{data}: {missing[0]} is missing ({len(missing)} of shard {shard}'s files); download the dataset again")
    summary: dict[str, object] = {"shard": shard, "scale": scale}
    if shard == "events":
        events = _expect(cache / "flat_uid.npy", EVENT_DTYPES, "flat_uid", None)
        for name in EVENT_DTYPES:
            _expect(cache / f"{name}.npy", EVENT_DTYPES, name, events)
        summary["events"] = events
    elif shard == "anchors":
        users = _expect(cache / "user_start.npy", USER_DTYPES, "user_start", None)
        _expect(cache / "user_end.npy", USER_DTYPES, "user_end", users)
        uids = np.load(cache / "unique_uids.npy", mmap_mode="r")
        if uids.dtype != np.int64 or (len(uids) and int(uids.max()) >= users):
            raise UserError(f"{cache}/unique_uids.npy: uids must be int64 below {users} (user_start's length)")
        anchors = _expect(cache / f"{yambda.ANCHOR_FILES[0]}.npy", ANCHOR_DTYPES, yambda.ANCHOR_FILES[0], None)
        _expect(cache / f"{yambda.ANCHOR_FILES[1]}.npy", ANCHOR_DTYPES, yambda.ANCHOR_FILES[1], anchors)
        summary.update(users=len(uids), anchors=anchors)
    else:
        import pyarrow.parquet as pq

        meta = json.loads((cache / "store_meta.json").read_text())
        if set(meta) != {"num_users", "total_events"}:
            raise UserError(f"{cache}/store_meta.json has keys {sorted(meta)}; the reference reads num_users and total_events")
        for kind, relative in yambda.MAPPINGS.items():
            names = pq.read_schema(data / relative).names
            if not {"item_id", f"{kind}_id"} <= set(names):
                raise UserError(f"{data / relative}: columns {names}; the reference reads item_id and {kind}_id")
        summary.update(meta)
    for path in SHARDS[shard]:
        target = out_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        link_or_copy(data / path, target)
    (out_dir / "shard.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
