"""Data preparation for flux1: check the three published encoding sets as the reference opens them, and lay them out
where it reads them.

The reference trains from the preprocessed encodings as MLCommons publishes them (README "Preprocessing"; the
encoders never run): ``--training.dataset=cc12m_preprocessed`` and ``--eval.dataset=coco_preprocessed`` at their
default paths ``/dataset/cc12m_preprocessed`` and ``/dataset/coco_preprocessed``, and
``encoder.empty_encodings_path=/dataset/empty_encodings`` (``encodings.py`` cites the lines). So each shard opens one
verified download the way the reference does (``datasets.load_from_disk``; ``np.load`` for the empty encodings),
checks its schema, the shapes of its arrays and its sample count (1,099,776 and 29,696 at full scale, the
``train_samples``/``eval_samples`` the reference logs), and that every validation timestep 0-7 has the same number of
samples (the reference's loss is then the mean over the grid), then hard-links the files into the shard (a symlink
would dangle in a container that mounts only the prepared folder). ``layout`` puts the three folders side by side;
the prepared tree is mounted at ``/dataset``. A killed preparation redoes only the shards that had not finished,
and hard links cost seconds even for the 2.4 TB training set.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from mlperf_wf.acquire import prepare
from mlperf_wf.benchmarks.flux1 import encodings, tiny_world
from mlperf_wf.errors import UserError

SHARDS = {
    "train": ("data", encodings.TRAIN_FOLDER),
    "validation": ("validation", encodings.VALIDATION_FOLDER),
    "empty": ("empty_encodings", encodings.EMPTY_FOLDER),
}
"""Shard -> (input role it reads, folder the reference reads it from)."""
EXPECTED_ROWS = {
    "full": {"train": 1_099_776, "validation": 29_696},
    "tiny": {"train": tiny_world.CC12M_SAMPLES, "validation": tiny_world.COCO_SAMPLES},
}
"""Samples per split: at full scale the reference's TRAIN_SAMPLES/EVAL_SAMPLES (T:mlperf_logging.py:58-59) and README §3."""


def shards(scale: str) -> list[str]:
    del scale
    return list(SHARDS)


def layout(scale: str) -> dict[str, str]:
    """``cc12m_preprocessed``, ``coco_preprocessed`` and ``empty_encodings`` folders, as under the reference's ``/dataset``."""
    del scale
    return {folder: f"{shard}/{folder}" for shard, (_, folder) in SHARDS.items()}


def resources(shard: str, scale: str) -> dict[str, int]:
    del shard
    return {"mem_mb": 2000, "runtime": 10} if scale == "tiny" else {"mem_mb": 16000, "runtime": 120}


def _array_shapes(table, row: int) -> dict[str, tuple[int, ...]]:
    cells = table[row]
    return {name: tuple(encodings.deserialize(cells[name], name).shape) for name in encodings.ARRAY_COLUMNS}


def check_split(folder: Path, split: str, scale: str) -> dict:
    """Open one preprocessed folder as the reference does and check what the run relies on; return its summary."""
    table = encodings.load_folder(folder)
    expected = EXPECTED_ROWS[scale][split]
    if len(table) != expected:
        raise UserError(f"{folder}: {len(table)} samples; the {scale} {split} set has {expected}")
    shapes = _array_shapes(table, 0)
    if _array_shapes(table, len(table) - 1) != shapes:
        raise UserError(f"{folder}: the last sample's arrays {_array_shapes(table, len(table) - 1)} differ from the first's {shapes}")
    if len(shapes["t5_encodings"]) != 2 or len(shapes["clip_encodings"]) != 1 or len(shapes["mean"]) != 3 or shapes["mean"] != shapes["logvar"]:
        raise UserError(f"{folder}: array shapes {shapes}; expected T5 (tokens, width), CLIP (width,), mean = logvar (channels, h, w)")
    summary: dict = {"samples": len(table), "shapes": {k: list(v) for k, v in shapes.items()}}
    if split == "validation":
        counts = Counter(table["timestep"])
        grid = set(range(encodings.TIMESTEPS))
        if set(counts) != grid or len(set(counts.values())) != 1:
            raise UserError(f"{folder}: timestep counts {dict(sorted(counts.items()))}; the validation grid needs the same count for each of 0-7")
        summary["per_timestep"] = counts[0]
    return summary


def check_empty(folder: Path, train_shapes: dict) -> dict:
    """The empty encodings must replace a dropped caption's: the same shapes as the training set's T5 and CLIP cells."""
    t5, clip = encodings.load_empty(folder)
    if list(t5.shape) != train_shapes["t5_encodings"] or list(clip.shape) != train_shapes["clip_encodings"]:
        raise UserError(
            f"{folder}: empty encodings {t5.shape} and {clip.shape}; "
            f"the training captions' are {train_shapes['t5_encodings']} and {train_shapes['clip_encodings']}"
        )
    return {"t5": list(t5.shape), "clip": list(clip.shape)}


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Check the input of ``shard`` and hard-link its files into ``out_dir/<folder>``."""
    if shard not in SHARDS:
        raise UserError(f"flux1: unknown shard {shard!r}; known: {', '.join(SHARDS)}")
    role, folder = SHARDS[shard]
    source = inputs[role]
    if shard == "empty":
        summary = check_empty(source, _array_shapes_of(inputs["data"]))
    else:
        summary = check_split(source, shard, scale)
    target = out_dir / folder
    target.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in source.rglob("*") if p.is_file() and not p.name.startswith("."))
    for path in files:
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        prepare.link_or_copy(path, destination)
    summary = {"shard": shard, "scale": scale, "folder": folder, "files": len(files), **summary}
    (out_dir / "shard.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _array_shapes_of(folder: Path) -> dict:
    return {k: list(v) for k, v in _array_shapes(encodings.load_folder(folder), 0).items()}
