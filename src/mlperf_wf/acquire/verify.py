"""Checks a dataset folder against its md5 list, re-reading only files that changed.

Every verified file gets a *stamp* (path, size, mtime_ns, ctime_ns, inode, md5)
in a stamps file. Verifying again stats each file and re-hashes only those whose
stamp no longer matches, so re-checking an unchanged multi-terabyte dataset takes
seconds instead of a full read. ``ctime`` is part of the stamp because it cannot
be set back by a user: a file rewritten and then given its old mtime is still
re-hashed. A file whose md5 differs is moved to a quarantine folder beside the
dataset (never deleted, never left in place), and verification fails naming the
file, the expected and the actual md5. A file restored from Snakemake's output
cache is only copied there: its whole cache entry is set aside and made again,
never broken up (:func:`refuse_cached`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NoReturn, Protocol, TypeVar

from mlperf_wf.acquire.manifest import CHUNK, MANIFEST_NAME, parse_manifest
from mlperf_wf.errors import ChecksumError

STAMPS_NAME = ".mlperf-wf-stamps.json"


@dataclass
class Stamp:
    """What a file looked like when its md5 was last computed."""

    path: str
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    md5: str

    def matches(self, st: os.stat_result) -> bool:
        return (self.size, self.mtime_ns, self.ctime_ns, self.inode) == (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)

    def written_since(self, st: os.stat_result) -> bool:
        """Whether the file was written since (its size or mtime differ); a new link alone changes neither."""
        return (self.size, self.mtime_ns) != (st.st_size, st.st_mtime_ns)


@dataclass
class VerifiedFile:
    """One file as verified."""

    path: str
    size: int
    md5: str
    rehashed: bool


@dataclass
class VerificationRecord:
    """The record the ``verify`` stage writes; training depends on it."""

    dataset: str
    manifest: str
    files: list[VerifiedFile]
    total_bytes: int
    bytes_hashed: int
    seconds: float


class NewlineCount:
    """A sink ``hash_file`` feeds like a digest, counting newlines (``wc -l``) in the same pass over the file."""

    def __init__(self) -> None:
        self.lines = 0

    def update(self, chunk: bytes) -> None:
        self.lines += chunk.count(b"\n")


class Digest(Protocol):
    """What ``hash_file`` feeds: a hashlib digest or a ``NewlineCount``."""

    def update(self, chunk: bytes, /) -> None: ...


HashT = TypeVar("HashT", bound=Digest)


def hash_file(path: Path, hashes: dict[str, HashT]) -> dict[str, HashT]:
    """Feed a file's bytes to ``hashes`` (digests, or a ``NewlineCount``), in 1 MiB chunks: hashlib releases the GIL,
    so threads scale."""
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            for digest in hashes.values():
                digest.update(chunk)
    return hashes


def git_blob_hash(size: int) -> hashlib._Hash:
    """sha1 seeded with git's blob header: fed the content, it gives the id git (and the hub) names the file by."""
    return hashlib.sha1(f"blob {size}\0".encode())


def md5_file(path: Path) -> str:
    """md5 of a file."""
    return hash_file(path, {"md5": hashlib.md5()})["md5"].hexdigest()


def md5_files(folder: Path, paths: list[str], jobs: int) -> dict[str, str]:
    """Relative path -> md5 of each of ``paths`` under ``folder``, ``jobs`` files hashed at once."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(zip(paths, pool.map(lambda path: md5_file(folder / path), paths), strict=True))


def count_rows(path: Path) -> int:
    """Rows of a data file as publishers count them: a JSON-lines file's lines (``wc -l``), a parquet file's rows (from its footer)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet  # only here: verify starts without it

        return pyarrow.parquet.ParquetFile(path).metadata.num_rows
    if path.suffix == ".jsonl":
        return hash_file(path, {"lines": NewlineCount()})["lines"].lines
    raise ValueError(f"{path.name}: rows are counted for .jsonl and .parquet files only")


def quarantine_dir_for(folder: Path) -> Path:
    """Where files that failed verification are moved (outside the dataset folder)."""
    return folder.parent / ".quarantine" / folder.name


def quarantine_file(dataset_dir: Path, path: str, source: Path) -> Path:
    """Move a file that failed its checks to the dataset's quarantine folder (never deleted, never left in the dataset)."""
    target = quarantine_dir_for(dataset_dir) / path
    target.parent.mkdir(parents=True, exist_ok=True)
    source.replace(target)
    return target


# ---- files that are not the folder's own ----
# Snakemake's output cache ($SNAKEMAKE_OUTPUT_CACHE) keeps one entry per job, shared by every checkout: the checkout that
# made it keeps its output folder as a symbolic link to the entry, the others a folder of links into it. Moving a file
# out of an entry would break it for every checkout (each then finds the file missing, and deleting its folder only
# fetches the broken entry again), so a bad entry is set aside whole inside the cache and made again by the next run.

CORRUPT_ENTRIES = ".corrupt"
"""Where, inside the output cache, an entry found corrupted is set aside (whole, never used again)."""


def output_cache() -> Path | None:
    """The Snakemake output cache this job was started with (``$SNAKEMAKE_OUTPUT_CACHE``), resolved; None without one."""
    folder = os.environ.get("SNAKEMAKE_OUTPUT_CACHE")
    return Path(folder).resolve() if folder else None


def cache_entry_of(path: Path) -> Path | None:
    """The output cache entry (``$SNAKEMAKE_OUTPUT_CACHE/<hash>``) that ``path`` resolves into; None when it is not in one."""
    root = output_cache()
    if root is None:
        return None
    try:
        parts = path.resolve().relative_to(root).parts
    except ValueError:
        return None
    return root / parts[0] if parts and not parts[0].startswith(".") else None


def reached_through_link(folder: Path, path: str) -> Path | None:
    """Where ``folder/path`` really is when a symbolic link on its way (``folder`` itself included) leads out of
    ``folder``'s own tree; None when it is the folder's own file."""
    own = Path(os.path.realpath(folder.parent)) / folder.name / path
    real = (folder / path).resolve()
    return real if real != own else None


def _remove_output(folder: Path) -> None:
    """Remove a job's output folder (a link to a cache entry, or a folder of links into it); never what it links to."""
    if folder.is_symlink():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)


def set_aside(entry: Path) -> Path | None:
    """Set a corrupted cache entry aside whole (a rename inside the cache): the next run finds no entry and makes it
    again. None when another checkout set it aside first."""
    target = entry.parent / CORRUPT_ENTRIES / str(time.time_ns()) / entry.name
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        entry.replace(target)
    except FileNotFoundError:
        target.parent.rmdir()
        return None
    return target


def refuse_cached(folder: Path, entry: Path, problem: str) -> NoReturn:
    """``folder`` (a job's output restored from the output cache entry ``entry``) failed its checks: set the entry aside
    whole, remove the output and fail in one line saying that a rerun makes it again."""
    aside = set_aside(entry)
    _remove_output(folder)
    where = f"set aside whole as {aside}" if aside else "already set aside whole by another checkout"
    raise ChecksumError(
        f"{problem}; it is in the output cache entry {entry}, which is {where} (never used again) and {folder} removed: rerun and it is made again"
    )


def _copies(dataset_dir: Path, files_dir: Path, paths: list[str]) -> Path:
    """Copy files that are not ``dataset_dir``'s own to its quarantine folder, for the record; return the folder."""
    for path in paths:
        target = quarantine_dir_for(dataset_dir) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(files_dir / path, target)
    return quarantine_dir_for(dataset_dir)


def quarantine_and_fail(dataset_dir: Path, files_dir: Path, problem: str, failures: list[tuple[str, object, object]], whole: bool = False) -> NoReturn:
    """Quarantine every failed file (path, expected, actual) found in ``files_dir``; fail naming the first, in one line.

    A file restored from the output cache is copied, and its entry set aside whole (:func:`refuse_cached`); a file
    reached through another link is copied and left where it is. With ``whole`` (a preparation shard, made by one job)
    the whole folder is moved aside, so that the next run makes it again. A file that cannot be moved (a read-only
    folder) stays where it is, and the line says why and what to do."""
    path, expected, actual = failures[0]
    more = f" ({len(failures)} files failed)" if len(failures) > 1 else ""
    mismatch = f"{dataset_dir.name}/{path}: {problem}: expected {expected}, actual {actual}"
    failed = [failed for failed, _, _ in failures]
    entry = cache_entry_of(files_dir / path)
    if entry is not None:
        copies = _copies(dataset_dir, files_dir, failed)
        refuse_cached(dataset_dir, entry, f"{mismatch}{more} (a copy in {copies})")
    elsewhere = reached_through_link(files_dir, path)
    if elsewhere is not None:
        copies = _copies(dataset_dir, files_dir, failed)
        raise ChecksumError(
            f"{mismatch}{more}; left in place as {elsewhere} (reached through a link, so not moved; a copy in {copies}): "
            f"replace it there, or delete {dataset_dir} and rerun to make it again"
        )
    if whole:
        target = quarantine_dir_for(dataset_dir)
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        dataset_dir.replace(target)
        raise ChecksumError(f"{mismatch}{more}; {dataset_dir} moved to {target}: rerun and it is made again")
    moved = []
    for name in failed:
        try:
            moved.append(quarantine_file(dataset_dir, name, files_dir / name))
        except OSError as err:
            raise ChecksumError(
                f"{mismatch}{more}; left in place: moving {name} to {quarantine_dir_for(dataset_dir)} failed ({err.strerror}): "
                f"make {files_dir} writable and rerun (each bad file is then moved aside), or delete {files_dir} to download it again"
            ) from None
    raise ChecksumError(f"{mismatch}; moved to {moved[0]}{more}")


def _load_stamps(path: Path) -> dict[str, Stamp]:
    if not path.is_file():
        return {}
    try:
        return {s["path"]: Stamp(**s) for s in json.loads(path.read_text())}
    except (ValueError, TypeError, KeyError):
        return {}  # an unreadable stamps file only costs a full re-hash


def _stamp(path: str, st: os.stat_result, md5: str) -> Stamp:
    return Stamp(path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, md5)


def write_stamps(folder: Path, digests: dict[str, str], stamps_file: Path | None = None) -> None:
    """Record stamps for files whose md5 is already known (computed while downloading)."""
    stamps = [_stamp(path, (folder / path).stat(), md5) for path, md5 in digests.items()]
    (stamps_file or folder / STAMPS_NAME).write_text(json.dumps([asdict(s) for s in stamps], indent=1))


def verify_dataset(folder: Path, manifest: Path | None = None, jobs: int = 4, stamps_file: Path | None = None, whole: bool = False) -> VerificationRecord:
    """Check every listed file, re-hashing only files whose stamp changed; quarantine and fail on a mismatch
    (:func:`quarantine_and_fail`; with ``whole``, the whole folder is moved aside)."""
    started = time.time()
    manifest = manifest or folder / MANIFEST_NAME
    stamps_file = stamps_file or folder / STAMPS_NAME
    if not manifest.is_file():
        raise ChecksumError(f"{manifest}: md5 list not found; download the dataset first")
    entries = parse_manifest(manifest.read_text(), str(manifest))
    missing = [e.path for e in entries if not (folder / e.path).is_file()]
    if missing:
        problem = f"{folder.name}/{missing[0]}: listed in {manifest.name} but missing ({len(missing)} missing in all)"
        entry = cache_entry_of(folder / missing[0])
        if entry is not None:
            refuse_cached(folder, entry, problem)
        raise ChecksumError(f"{problem}: delete {folder} and rerun to make it again")
    stats = {e.path: (folder / e.path).stat() for e in entries}
    # An external stamps file starts from the stamps the download wrote while hashing the stream.
    stamps = _load_stamps(stamps_file) or _load_stamps(folder / STAMPS_NAME)
    stale = [e for e in entries if not (e.path in stamps and stamps[e.path].matches(stats[e.path]) and stamps[e.path].md5 == e.md5)]
    hashed = md5_files(folder, [e.path for e in stale], jobs)
    bad = [(e, hashed[e.path]) for e in stale if hashed[e.path] != e.md5]
    failed = {e.path for e, _ in bad}
    good = [_stamp(e.path, stats[e.path], e.md5) for e in entries if e.path not in failed]
    stamps_file.parent.mkdir(parents=True, exist_ok=True)
    stamps_file.write_text(json.dumps([asdict(s) for s in good], indent=1))
    if bad:
        quarantine_and_fail(folder, folder, "md5 mismatch", [(entry.path, entry.md5, actual) for entry, actual in bad], whole=whole)
    files = [VerifiedFile(e.path, stats[e.path].st_size, e.md5, e.path in hashed) for e in entries]
    return VerificationRecord(
        dataset=folder.name,
        manifest=str(manifest),
        files=files,
        total_bytes=sum(f.size for f in files),
        bytes_hashed=sum(stats[p].st_size for p in hashed),
        seconds=round(time.time() - started, 3),
    )


def check_unchanged(folder: Path, stamps_file: Path, jobs: int = 2) -> int:
    """A verified dataset as a later stage (a preparation) finds it: every file its last verification stamped is still
    there, and one written since (its size or mtime changed) is read again against its md5; a mismatch is moved aside
    and fails in one line, as :func:`verify_dataset` does, before anything reads it. ctime and inode are not compared:
    linking a file into a preparation changes its ctime, and every shard job would read the whole dataset again.
    Returns how many files were read; their new stamps are kept."""
    stamps = _load_stamps(stamps_file)
    if not stamps:
        raise ChecksumError(f"{folder}: no stamps of its verification in {stamps_file}: run verify first (mlperf-wf verify {folder} --stamps {stamps_file})")
    stats = {}
    for path in stamps:
        try:
            stats[path] = (folder / path).stat()
        except FileNotFoundError:
            problem = f"{folder.name}/{path}: verified but missing now"
            entry = cache_entry_of(folder)
            if entry is not None:
                refuse_cached(folder, entry, problem)
            raise ChecksumError(f"{problem}: delete {folder} and rerun to make it again") from None
    written = [path for path, stamp in stamps.items() if stamp.written_since(stats[path])]
    hashed = md5_files(folder, written, jobs)
    bad = [(path, stamps[path].md5, hashed[path]) for path in written if hashed[path] != stamps[path].md5]
    if written:
        failed = {path for path, _, _ in bad}
        renewed = {path: _stamp(path, stats[path], hashed[path]) if path in hashed else stamp for path, stamp in stamps.items() if path not in failed}
        stamps_file.write_text(json.dumps([asdict(stamp) for stamp in renewed.values()], indent=1))
    if bad:
        quarantine_and_fail(folder, folder, "md5 mismatch (written after it was verified)", bad)
    return len(written)


def write_record(record: VerificationRecord, out: Path) -> None:
    """Write the verification record as JSON."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(asdict(record), indent=2))
