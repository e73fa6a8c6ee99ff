"""The tiny stand-in of the OpenImages MLPerf subset, in the layout FiftyOne writes it.

``scripts/download_openimages_mlperf.sh`` (reference, retired_benchmarks/retinanet) runs
``fiftyone_openimages.py``: ``foz.load_zoo_dataset("open-images-v6", ...)`` downloads each
split into ``<dir>/<split>/{data,labels,metadata}``, then the script exports every split as
a COCO detection file ``<split>/labels/openimages-mlperf.json`` and adds ``iscrowd`` from
``IsGroupOf``. The reference's reader (``ssd/coco_utils.py:get_openimages``) opens
``<root>/{train,validation}/data`` and ``labels/openimages-mlperf.json`` with pycocotools.

The generator writes the same tree: JPEG images named by a 16-hex OpenImages-style id,
FiftyOne's ``metadata/{classes.csv,image_ids.csv,hierarchy.json}``, ``labels/detections.csv``
(OpenImages' CSV header) and the COCO JSON the reader opens, plus ``info.json``. The images
hold 1-4 non-overlapping shapes (filled rectangle, ellipse, upward triangle) of 8-30 px in a
random colour on a noisy gradient background; each box is the tight box of the drawn mask.
The splits use disjoint random streams, so the validation images are held out.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

IMAGE_SIZE = 64
"""Width and height of every tiny image (the reference resizes to 800x800)."""
CLASSES = ("Rectangle", "Ellipse", "Triangle")
"""The tiny label set (the MLPerf subset has 264 classes)."""
SPLIT_IMAGES = {"train": 3000, "validation": 400}
"""Images per split."""
LABELS_FILE = "openimages-mlperf.json"
"""``--output-labels`` of download_openimages_mlperf.sh; the reader's ``{name}.json`` for --dataset openimages-mlperf."""
SPLIT_STREAM = {"train": 0, "validation": 1}
"""Offset of each split's random stream, so the splits never share an image."""
DETECTIONS_HEADER = (
    "ImageID",
    "Source",
    "LabelName",
    "Confidence",
    "XMin",
    "XMax",
    "YMin",
    "YMax",
    "IsOccluded",
    "IsTruncated",
    "IsGroupOf",
    "IsDepiction",
    "IsInside",
)
"""OpenImages v6 ``*-annotations-bbox.csv`` columns, which FiftyOne keeps as ``labels/detections.csv``."""


def _shape_mask(kind: int, height: int, width: int) -> np.ndarray:
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    if kind == 0:
        return np.ones((height, width), dtype=bool)
    if kind == 1:
        cy, cx = (height - 1) / 2, (width - 1) / 2
        return ((yy - cy) / (height / 2)) ** 2 + ((xx - cx) / (width / 2)) ** 2 <= 1.0
    # Upward triangle: apex at the top centre, base on the bottom row.
    half = (yy + 1) / height * (width / 2)
    return np.abs(xx - (width - 1) / 2) <= half


def render(rng: np.random.Generator, size: int = IMAGE_SIZE) -> tuple[np.ndarray, list[tuple[int, list[int]]]]:
    """One image (HxWx3 uint8) and its objects as (class index, [x0, y0, x1, y1] inclusive pixel box)."""
    background = rng.uniform(0, 1, 3)
    gradient = rng.uniform(-0.2, 0.2, 3)
    ramp = np.linspace(0, 1, size, dtype=np.float32)[None, :, None]
    image = background[None, None, :] + gradient[None, None, :] * ramp + rng.normal(0, 0.08, (size, size, 3))
    occupied = np.zeros((size, size), dtype=bool)
    objects = []
    for _ in range(int(rng.integers(1, 5))):
        for _attempt in range(20):
            side = rng.uniform(8, 30)
            aspect = rng.uniform(0.7, 1.4)
            height, width = max(6, int(side * aspect**0.5)), max(6, int(side / aspect**0.5))
            if height >= size or width >= size:
                continue
            top, left = int(rng.integers(0, size - height)), int(rng.integers(0, size - width))
            if occupied[max(0, top - 1) : top + height + 1, max(0, left - 1) : left + width + 1].any():
                continue
            kind = int(rng.integers(0, len(CLASSES)))
            colour = rng.uniform(0, 1, 3)
            while np.abs(colour - background).max() < 0.3:
                colour = rng.uniform(0, 1, 3)
            mask = _shape_mask(kind, height, width)
            region = image[top : top + height, left : left + width]
            region[mask] = colour
            occupied[top : top + height, left : left + width] |= mask
            ys, xs = np.nonzero(mask)
            objects.append((kind, [left + int(xs.min()), top + int(ys.min()), left + int(xs.max()), top + int(ys.max())]))
            break
    return (np.clip(image, 0, 1) * 255).round().astype(np.uint8), objects


def _write_split(root: Path, split: str, seed: int, count: int) -> list[Path]:
    from PIL import Image

    rng = np.random.default_rng([seed, SPLIT_STREAM[split]])
    folder = root / split
    for sub in ("data", "labels", "metadata"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    images, annotations, detections = [], [], []
    for index in range(count):
        image_id = f"{int(rng.integers(0, 2**63)):016x}"
        pixels, objects = render(rng)
        name = f"{image_id}.jpg"
        Image.fromarray(pixels).save(folder / "data" / name, quality=95)
        images.append({"id": index + 1, "file_name": name, "height": IMAGE_SIZE, "width": IMAGE_SIZE, "license": None, "coco_url": None})
        for kind, (x0, y0, x1, y1) in objects:
            width, height = x1 - x0 + 1, y1 - y0 + 1
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": index + 1,
                    "category_id": kind,
                    "bbox": [x0, y0, width, height],
                    "area": width * height,
                    "segmentation": None,
                    "IsOccluded": False,
                    "IsTruncated": False,
                    "IsGroupOf": False,
                    "IsDepiction": False,
                    "IsInside": False,
                    "iscrowd": 0,
                }
            )
            detections.append(
                (image_id, "xclick", f"/m/tiny{kind}", 1, x0 / IMAGE_SIZE, (x1 + 1) / IMAGE_SIZE, y0 / IMAGE_SIZE, (y1 + 1) / IMAGE_SIZE, 0, 0, 0, 0, 0)
            )
    categories = [{"id": i, "name": name, "supercategory": None} for i, name in enumerate(CLASSES)]
    labels = {"info": {}, "licenses": [], "categories": categories, "images": images, "annotations": annotations}
    (folder / "labels" / LABELS_FILE).write_text(json.dumps(labels))
    with (folder / "labels" / "detections.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(DETECTIONS_HEADER)
        writer.writerows(detections)
    with (folder / "metadata" / "classes.csv").open("w", newline="") as out:
        csv.writer(out).writerows((f"/m/tiny{i}", name) for i, name in enumerate(CLASSES))
    with (folder / "metadata" / "image_ids.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(
            (
                "ImageID",
                "Subset",
                "OriginalURL",
                "OriginalLandingURL",
                "License",
                "AuthorProfileURL",
                "Author",
                "Title",
                "OriginalSize",
                "OriginalMD5",
                "Thumbnail300KURL",
                "Rotation",
            )
        )
        writer.writerows((image["file_name"][:-4], split, "", "", "", "", "", "", "", "", "", 0) for image in images)
    hierarchy = {"LabelName": "/m/0bl9f", "Subcategory": [{"LabelName": f"/m/tiny{i}"} for i in range(len(CLASSES))]}
    (folder / "metadata" / "hierarchy.json").write_text(json.dumps(hierarchy))
    return sorted(p for p in folder.rglob("*") if p.is_file())


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write both splits and FiftyOne's ``info.json`` into ``out_dir``; return the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for split, count in SPLIT_IMAGES.items():
        written += _write_split(out_dir, split, seed, count)
    info = {
        "name": "open-images-v6",
        "zoo_dataset": "fiftyone.zoo.datasets.base.OpenImagesV6Dataset",
        "dataset_type": "fiftyone.types.dataset_types.OpenImagesV6Dataset",
        "num_samples": sum(SPLIT_IMAGES.values()),
        "classes": list(CLASSES),
    }
    (out_dir / "info.json").write_text(json.dumps(info, indent=1))
    return [*written, out_dir / "info.json"]
