"""Datasets a one-off job of a benchmark's image makes (catalog protocol ``made_in_image``), sealed when it ends.

Nobody publishes such a dataset (a checkpoint the reference converts on first use), so there is no published md5
list to check it against. When the job has ended, :func:`seal` checks that it left every file the catalog lists
(``files``: what every good output holds), then records what it left by digest: the md5 list the verify stage checks
(``manifest.md5``) and the stamps that let it skip re-reading what was just hashed, as the downloader leaves a
downloaded dataset. A job that left a listed file out fails, naming it, and nothing is sealed.
"""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.acquire.manifest import MANIFEST_NAME, manifest_text
from mlperf_wf.acquire.verify import STAMPS_NAME, md5_files, write_stamps
from mlperf_wf.config import registry
from mlperf_wf.errors import ChecksumError, ConfigError


def seal(dataset_id: str, folder: Path, jobs: int = 4) -> dict[str, str]:
    """Check ``folder`` (made for ``dataset_id``) holds the catalog's files, write its md5 list and stamps; returns
    relative path -> md5 of every file."""
    entry = registry.load_dataset(dataset_id)
    if entry.source.protocol != "made_in_image":
        raise ConfigError(f"seal: {dataset_id} is protocol {entry.source.protocol}; only a made_in_image dataset is sealed by the job that made it")
    missing = [item.path for item in entry.files if not (folder / item.path).is_file()]
    if missing:
        raise ChecksumError(
            f"{folder / missing[0]}: the job of {entry.source.made_by}'s image did not leave it ({len(missing)} of the "
            f"{len(entry.files)} files {registry.dataset_where(dataset_id)} lists are missing); nothing is sealed, the job fails"
        )
    paths = sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file() and path.name not in (MANIFEST_NAME, STAMPS_NAME))
    digests = md5_files(folder, paths, jobs)
    write_stamps(folder, digests)
    (folder / MANIFEST_NAME).write_text(manifest_text(digests))
    return digests
