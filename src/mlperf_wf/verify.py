"""Checks a dataset folder against its md5 list and writes a verification record."""

from __future__ import annotations

import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from mlperf_wf.download import CHUNK, MANIFEST_NAME, parse_manifest
from mlperf_wf.errors import ChecksumError


@dataclass
class VerifiedFile:
    """One file as verified."""

    path: str
    size: int
    md5: str


@dataclass
class VerificationRecord:
    """The record the ``verify`` stage writes; training depends on it."""

    dataset: str
    manifest: str
    files: list[VerifiedFile]
    total_bytes: int
    seconds: float


def md5_file(path: Path) -> str:
    """md5 of a file, read in 1 MiB chunks (hashlib releases the GIL, so threads scale)."""
    digest = hashlib.md5()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_dataset(folder: Path, manifest: Path | None = None, jobs: int = 4) -> VerificationRecord:
    """Hash every listed file; raise naming the first bad file, its expected and actual md5."""
    started = time.time()
    manifest = manifest or folder / MANIFEST_NAME
    if not manifest.is_file():
        raise ChecksumError(f"{manifest}: md5 list not found; download the dataset first")
    entries = parse_manifest(manifest.read_text(), str(manifest))
    missing = [e.path for e in entries if not (folder / e.path).is_file()]
    if missing:
        raise ChecksumError(f"{folder.name}/{missing[0]}: listed in {manifest.name} but missing ({len(missing)} missing in all)")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        actual = list(pool.map(lambda e: md5_file(folder / e.path), entries))
    for entry, digest in zip(entries, actual, strict=True):
        if digest != entry.md5:
            raise ChecksumError(f"{folder.name}/{entry.path}: md5 mismatch: expected {entry.md5}, actual {digest}")
    files = [VerifiedFile(e.path, (folder / e.path).stat().st_size, d) for e, d in zip(entries, actual, strict=True)]
    return VerificationRecord(
        dataset=folder.name,
        manifest=str(manifest),
        files=files,
        total_bytes=sum(f.size for f in files),
        seconds=round(time.time() - started, 3),
    )


def write_record(record: VerificationRecord, out: Path) -> None:
    """Write the verification record as JSON."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(asdict(record), indent=2))
