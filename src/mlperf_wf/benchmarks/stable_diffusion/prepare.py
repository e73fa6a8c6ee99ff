"""Data preparation for stable_diffusion: check the published files and link them into the tree the reference mounts.

The reference trains on the published moments as they are (configs/train_32x08x08.yaml: ``urls:
/datasets/laion-400m/webdataset-moments-filtered/{00000..00831}.tar``, ``first_stage_type: moments``) and
validates on ``/datasets/coco2014/val2014_30k.tsv`` with the FID statistics ``/datasets/coco2014/val2014_30k_stats.npz``
(README "Downloading the dataset"); it computes nothing from them beforehand. So preparation opens every tar
(each ``<key>.npy`` must be float32 moments of shape (1, 2 x 4, h, w) with a ``<key>.txt`` caption beside it),
the TSV (columns image_id, id, caption) and the statistics (``mu``, ``sigma`` of one width), and hard-links them
into ``laion-400m/...`` and ``coco2014/...``. The moments are checked in shards of ``TARS_PER_SHARD`` tars:
a killed preparation redoes only the shards it had not finished.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np

from mlperf_wf.acquire.prepare import link_or_copy
from mlperf_wf.errors import UserError

MOMENTS_DIR = "laion-400m/webdataset-moments-filtered"
COCO_DIR = "coco2014"
TSV = "val2014_30k.tsv"
STATS = "val2014_30k_stats.npz"
TAR_COUNT = {"tiny": 4, "full": 832}
"""Tars of the moments dataset (full: 00000..00831, the config's urls)."""
TARS_PER_SHARD = 64


def _tars(scale: str) -> list[str]:
    return [f"{i:05d}.tar" for i in range(TAR_COUNT[scale])]


def _moment_shards(scale: str) -> dict[str, list[str]]:
    tars = _tars(scale)
    return {f"moments_{i // TARS_PER_SHARD:02d}": tars[i : i + TARS_PER_SHARD] for i in range(0, len(tars), TARS_PER_SHARD)}


def shards(scale: str) -> list[str]:
    return [*_moment_shards(scale), "validation"]


def layout(scale: str) -> dict[str, str]:
    files = {f"{MOMENTS_DIR}/{tar}": f"{shard}/{tar}" for shard, tars in _moment_shards(scale).items() for tar in tars}
    files.update({f"{COCO_DIR}/{TSV}": f"validation/{TSV}", f"{COCO_DIR}/{STATS}": f"validation/{STATS}"})
    return files


def check_moments_tar(path: Path) -> int:
    """Samples in one webdataset tar of moments; a clear error for a member the reference's loader would choke on."""
    keys: dict[str, set[str]] = {}
    try:
        with tarfile.open(path) as tar:
            for member in tar:
                if not member.isfile():
                    continue
                key, _, extension = member.name.rpartition(".")
                keys.setdefault(key, set()).add(extension)
                if extension == "npy":
                    array = np.load(io.BytesIO(tar.extractfile(member).read()), allow_pickle=False)
                    if array.dtype != np.float32 or array.ndim != 4 or array.shape[0] != 1 or array.shape[1] % 2:
                        raise UserError(f"{path}:{member.name}: moments of dtype {array.dtype} shape {array.shape}; expected float32 (1, 2 x channels, h, w)")
    except (tarfile.TarError, OSError, ValueError) as err:
        raise UserError(f"{path}: not a readable webdataset tar ({err})") from None
    incomplete = sorted(key for key, extensions in keys.items() if not {"npy", "txt"} <= extensions)
    if incomplete:
        raise UserError(f"{path}: sample {incomplete[0]} lacks its .npy moments or .txt caption ({len(incomplete)} such samples)")
    return len(keys)


def check_validation(prompts: Path, stats: Path) -> tuple[int, int]:
    """(prompts, feature width) of the validation files."""
    import pandas as pd

    frame = pd.read_csv(prompts, sep="\t", header=0)
    missing = {"image_id", "id", "caption"} - set(frame.columns)
    if missing:
        raise UserError(f"{prompts}: no column {sorted(missing)[0]}; ldm/data/tsv.py reads image_id, id, caption")
    with np.load(stats) as npz:
        if "mu" not in npz or "sigma" not in npz:
            raise UserError(f"{stats}: no mu/sigma arrays (has {', '.join(npz.files)})")
        width = npz["mu"].shape[0]
        if npz["sigma"].shape != (width, width):
            raise UserError(f"{stats}: sigma has shape {npz['sigma'].shape}, mu has {width} values")
    return len(frame), width


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Check and link one shard (a group of moment tars, or the validation files)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if shard == "validation":
        prompts, stats = inputs["prompts"] / TSV, inputs["stats"] / STATS
        count, width = check_validation(prompts, stats)
        link_or_copy(prompts, out_dir / TSV)
        link_or_copy(stats, out_dir / STATS)
        summary = {"prompts": count, "feature_width": width}
    else:
        groups = _moment_shards(scale)
        if shard not in groups:
            raise UserError(f"stable_diffusion: unknown shard {shard!r}; known: {', '.join(shards(scale))}")
        samples = 0
        for tar in groups[shard]:
            source = inputs["data"] / tar
            if not source.is_file():
                raise UserError(f"{source}: missing; the moments dataset has {TAR_COUNT[scale]} tars at scale {scale}")
            samples += check_moments_tar(source)
            link_or_copy(source, out_dir / tar)
        summary = {"tars": len(groups[shard]), "samples": samples}
    (out_dir / "prepared.json").write_text(json.dumps(summary) + "\n")
    return summary
