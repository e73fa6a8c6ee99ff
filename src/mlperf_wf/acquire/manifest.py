"""The R2 ``.md5`` list: ``md5  relative/path`` lines, as md5sum writes them.

Kept free of network imports so that ``mlperf-wf verify`` starts fast.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mlperf_wf.errors import DownloadError

CHUNK = 1 << 20
"""Read and hash size (1 MiB)."""
MANIFEST_NAME = "manifest.md5"
"""The md5 list kept beside a downloaded dataset's files."""


@dataclass(frozen=True)
class ManifestEntry:
    """One ``md5  path`` line of an R2 ``.md5`` list."""

    md5: str | None
    """None where the published list gives a path without a checksum (it happens: Criteo's train_data.bin)."""
    path: str


def parse_manifest(text: str, source: str) -> list[ManifestEntry]:
    """Parse ``md5  path`` lines (md5sum format); reject anything else by line number."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split(None, 1)
        digest, path = (fields[0], fields[1]) if len(fields) == 2 else (None, fields[0])
        path = path.strip().lstrip("*").removeprefix("./")
        if digest is not None and (len(digest) != 32 or any(c not in "0123456789abcdef" for c in digest.lower())):
            raise DownloadError(f"{source}:{number}: not an 'md5  path' line: {line!r}")
        if digest is None and not line[:1].isspace():
            raise DownloadError(f"{source}:{number}: not an 'md5  path' line: {line!r}")
        if path.startswith("/") or ".." in Path(path).parts:
            raise DownloadError(f"{source}:{number}: path {path!r} leaves the dataset folder")
        entries.append(ManifestEntry(md5=digest.lower() if digest else None, path=path))
    return entries


def manifest_text(digests: Mapping[str, str]) -> str:
    """Relative path -> md5 as an md5 list (``md5  path`` lines, md5sum's format, what :func:`parse_manifest` reads)."""
    return "".join(f"{md5}  {path}\n" for path, md5 in digests.items())


def first_change(recorded: Mapping[str, str], now: Mapping[str, str], since: str) -> str | None:
    """The first file of ``recorded`` (name -> digest) removed or changed in ``now``, else the first added to it, as
    ``NAME: removed since SINCE`` (``changed``, ``added``); None where they are the same."""
    for name, digest in recorded.items():
        if name not in now:
            return f"{name}: removed since {since}"
        if now[name] != digest:
            return f"{name}: changed since {since}"
    added = sorted(set(now) - set(recorded))
    return f"{added[0]}: added since {since}" if added else None
