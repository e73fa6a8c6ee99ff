"""The ``fiftyone`` protocol: datasets a reference fetches with FiftyOne's dataset zoo, received and verified here.

OpenImages (retinanet) is not on MLCommons R2: the reference's own script
(``scripts/download_openimages_mlperf.sh`` -> ``fiftyone_openimages.py``) has FiftyOne download
the chosen classes of ``open-images-v6`` from Google's public bucket and export each split's
labels as COCO. FiftyOne writes its zoo layout::

    <dataset_dir>/info.json
    <dataset_dir>/<split>/data/<image id>.jpg
    <dataset_dir>/<split>/metadata/{classes.csv,hierarchy.json,image_ids.csv}
    <dataset_dir>/<split>/labels/{detections.csv,<labels file>}

and resumes by itself (a rerun skips the images already on disk). The user runs that script
(the catalog's ``instructions``, inside the reference container) into the fetch folder; the
download stage then *receives* the folder: before a byte is copied, every split's labels file
is read and its images counted (``images`` in the COCO file and files in ``data/``, each equal to
the catalog's count) and every pinned file's checksum compared; then the files go through the
staged, resumable, checked transfer of the other protocols (``download.fetch_files``: a killed
receive keeps every file it finished and resumes a partial one), the counts are checked once more
on the staged copy, and the folder is placed with its md5 list, record and stamps, so the verify
stage treats it like any other. A bad count or checksum fails in one line naming the file, the
value and what is allowed; the fetch folder and the staged files are left as they are.

At tiny scale the mirror is a folder in the same layout, written by the dataset's generator, and
received through this same code.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from mlperf_wf.acquire.download import (
    DownloadRecord,
    Expected,
    RemoteFile,
    Transport,
    _file_url_path,
    _is_file_url,
    fetch_files,
    place_dataset,
    staging_dir_for,
)
from mlperf_wf.acquire.verify import hash_file
from mlperf_wf.config.registry import DatasetFile
from mlperf_wf.errors import ChecksumError, DownloadError, UserError

DATA_FOLDER = "data"
"""Where FiftyOne puts a split's media."""
LABELS_FOLDER = "labels"
"""Where FiftyOne puts a split's labels (and where fiftyone_openimages.py writes the COCO export)."""
SKIPPED_SUFFIXES = (".part", ".tmp")
"""Files a FiftyOne download still in progress leaves behind; never received."""


@dataclass(frozen=True)
class ZooExpectations:
    """What a complete fetch must hold: images per split and the checksums of pinned files (the labels files)."""

    splits: dict[str, int]
    """Split folder -> number of images (COCO ``images`` in the labels file, and files in ``<split>/data``)."""
    labels_file: str
    """Name of each split's COCO labels file under ``<split>/labels/`` (the script's ``--output-labels``)."""
    pinned: tuple[DatasetFile, ...] = ()
    """Files whose sha256/md5/size are known ahead (``<split>/labels/<labels file>``)."""
    where: str = "catalog"
    """Where these values come from, named in errors (``<catalog entry> source.splits`` ...)."""


def source_folder(url: str) -> Path:
    """The fetch folder of a ``file:`` source (FiftyOne writes to a local folder; there is no remote listing to read)."""
    if not _is_file_url(url):
        raise UserError(f"--source {url}: the fiftyone protocol receives a local folder FiftyOne wrote; give file:FOLDER")
    return _file_url_path(url)


def zoo_files(root: Path) -> list[str]:
    """Every file of a FiftyOne dataset folder (relative POSIX paths, sorted), without a download's leftovers."""
    files = []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            if not name.endswith(SKIPPED_SUFFIXES):
                files.append((Path(folder) / name).relative_to(root).as_posix())
    return sorted(files)


def count_images(root: Path, split: str, labels_file: str) -> tuple[int, int]:
    """(images the split's COCO labels list, files in the split's ``data`` folder)."""
    labels = root / split / LABELS_FOLDER / labels_file
    if not labels.is_file():
        raise ChecksumError(f"{labels}: missing; a complete fetch has {split}/{LABELS_FOLDER}/{labels_file} (the reference script's COCO export)")
    try:
        listed = len(json.loads(labels.read_text())["images"])
    except (ValueError, KeyError, TypeError):
        raise ChecksumError(f"{labels}: not a COCO detection file (expected JSON with 'images')") from None
    data = root / split / DATA_FOLDER
    with os.scandir(data) if data.is_dir() else _empty() as entries:
        on_disk = sum(1 for entry in entries if entry.is_file() and not entry.name.endswith(SKIPPED_SUFFIXES))
    return listed, on_disk


class _empty:
    def __enter__(self) -> list:
        return []

    def __exit__(self, *_: object) -> None:
        return None


def check_counts(root: Path, expected: ZooExpectations) -> None:
    """Each split's labels and data folder hold exactly the expected number of images; one line naming the first that does not."""
    for split, wanted in expected.splits.items():
        listed, on_disk = count_images(root, split, expected.labels_file)
        if listed != wanted:
            raise ChecksumError(
                f"{root / split / LABELS_FOLDER / expected.labels_file}: lists {listed} images; {expected.where} allows exactly {wanted} for {split}"
            )
        if on_disk != wanted:
            raise ChecksumError(
                f"{root / split / DATA_FOLDER}: holds {on_disk} image files; {expected.where} allows exactly {wanted} for {split}"
                " (a fetch still running, or one cut short: rerun it)"
            )


def _expected(pin: DatasetFile | None) -> Expected:
    if pin is None:
        return Expected(record_sha256=True)
    return Expected(md5=pin.md5, sha256=pin.sha256, size=pin.size, record_sha256=True)


def check_pins(root: Path, expected: ZooExpectations) -> None:
    """Every pinned file is in the fetch folder with its pinned size and digests, before anything is copied."""
    for pin in expected.pinned:
        path = root / pin.path
        if not path.is_file():
            raise ChecksumError(f"{path}: missing; {expected.where} pins it")
        digests = {name: h.hexdigest() for name, h in hash_file(path, {"md5": hashlib.md5(), "sha256": hashlib.sha256()}).items()}
        failed = _expected(pin).mismatch(path.stat().st_size, digests)
        if failed:
            what, wanted, actual = failed
            raise ChecksumError(f"{path}: {what} {actual}; {expected.where} allows only {wanted}")


def receive_zoo_dataset(source_url: str, dest: Path, expected: ZooExpectations, instructions: str = "", jobs: int = 4) -> DownloadRecord:
    """Check the fetch folder at ``source_url``, copy it into ``dest`` through the resumable staged transfer, check it again, place it."""
    started = time.time()
    root = source_folder(source_url)
    if not root.is_dir():
        raise UserError(f"{root}: no fetch folder yet. {instructions}".strip())
    check_counts(root, expected)
    check_pins(root, expected)
    pins = {pin.path: pin for pin in expected.pinned}
    files = zoo_files(root)
    if not files:
        raise DownloadError(f"{root}: holds no files")
    remote = [RemoteFile(path, (root / path).resolve().as_uri(), _expected(pins.get(path))) for path in files]
    digests, transferred = fetch_files(remote, dest, Transport({}), jobs)
    # The fetch folder may have changed while it was copied (a FiftyOne run still going): count the copy too.
    check_counts(staging_dir_for(dest), ZooExpectations(expected.splits, expected.labels_file, where=expected.where))
    record = DownloadRecord(
        uri=root.resolve().as_uri(),
        base_url=root.resolve().as_uri(),
        files={path: d["md5"] for path, d in digests.items()},
        bytes_transferred=transferred,
        seconds=round(time.time() - started, 3),
        sha256={path: d["sha256"] for path, d in digests.items()},
    )
    place_dataset(staging_dir_for(dest), dest, record)
    return record
