"""Data preparation for retinanet (OpenImages MLPerf subset): the reference reads the fetched tree as it is.

``ssd/coco_utils.py:get_openimages`` opens ``<data-path>/train`` and ``<data-path>/validation``, each
``data/<image>.jpg`` and ``labels/openimages-mlperf.json`` (the COCO export of
``scripts/fiftyone_openimages.py``, with ``iscrowd`` added from ``IsGroupOf``); nothing is converted
beforehand. Preparation therefore checks each split the way the reader will use it (pycocotools
opens the labels file, every image it lists is in ``data/``, every annotation has ``iscrowd``) and
hard-links the images and the labels file into one shard per split (a symlink would dangle in a
container that mounts only the prepared folder). The same at both scales: the tiny mirror is written
in the same layout. A killed shard is redone from its start; linking costs no copy.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from mlperf_wf.acquire.prepare import link_or_copy
from mlperf_wf.benchmarks.retinanet.openimages import LABELS_FILE
from mlperf_wf.errors import UserError

SPLITS = ("train", "validation")
"""The folders the reader opens (image_set train and val)."""


def shards(scale: str) -> list[str]:
    """One shard per split."""
    return list(SPLITS)


def layout(scale: str) -> dict[str, str]:
    """The tree ``--data-path`` points at: ``<split>/data`` and ``<split>/labels/openimages-mlperf.json``."""
    tree = {}
    for split in SPLITS:
        tree[f"{split}/data"] = f"{split}/data"
        tree[f"{split}/labels/{LABELS_FILE}"] = f"{split}/labels/{LABELS_FILE}"
    return tree


def resources(shard: str, scale: str) -> dict[str, int]:
    """Linking needs little memory; the train split's labels file is about 0.5 GB of JSON at full scale."""
    return {"mem_mb": 8000 if scale == "full" else 2000, "runtime": 240}


def check_split(split_dir: Path) -> list[str]:
    """The image files the split's COCO labels list; fails in one line on a file the reader could not use."""
    from pycocotools.coco import COCO

    labels = split_dir / "labels" / LABELS_FILE
    if not labels.is_file():
        raise UserError(f"{labels}: missing; the reference reads {split_dir.name}/labels/{LABELS_FILE}")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            coco = COCO(str(labels))
    except (ValueError, KeyError, TypeError, AssertionError) as err:
        raise UserError(f"{labels}: pycocotools cannot read it as COCO detections ({type(err).__name__}: {err})") from None
    missing_crowd = [a["id"] for a in coco.dataset.get("annotations", []) if "iscrowd" not in a]
    if missing_crowd:
        raise UserError(f"{labels}: annotation {missing_crowd[0]} has no iscrowd ({len(missing_crowd)} such); fiftyone_openimages.py adds it from IsGroupOf")
    names = [image["file_name"] for image in coco.dataset["images"]]
    absent = [name for name in names if not (split_dir / "data" / name).is_file()]
    if absent:
        raise UserError(f"{split_dir / 'data'}: lacks {absent[0]} ({len(absent)} of the {len(names)} images {labels.name} lists)")
    return names


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Check one split as the reader will open it and link its images and labels file into ``out_dir``."""
    if shard not in SPLITS:
        raise UserError(f"retinanet: unknown shard {shard!r}; known: {', '.join(SPLITS)}")
    source = inputs["data"] / shard
    names = check_split(source)
    (out_dir / "data").mkdir(parents=True, exist_ok=True)
    (out_dir / "labels").mkdir(parents=True, exist_ok=True)
    for name in names:
        link_or_copy(source / "data" / name, out_dir / "data" / name)
    link_or_copy(source / "labels" / LABELS_FILE, out_dir / "labels" / LABELS_FILE)
    return {"split": shard, "images": len(names)}
