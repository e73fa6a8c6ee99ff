"""Resumable, verified extraction of a published tarball (gpt3's ``dataset_c4_spm.tar`` and ``checkpoint_megatron_fp32.tar``).

MLCommons publishes gpt3's preprocessed C4 and its fp32 starting checkpoint as one uncompressed tarball each; the
download stage checks each tarball's md5 against the published ``.md5`` list, and the reference reads the unpacked
folders (README.md:40-42, 66-69). Extracting 2 TB (the checkpoint holds weights and both Adam moments) takes long
enough that a preparation job may be killed, so:

- each regular file member is written to ``<name>.partial`` while its md5 is computed, then renamed, and only then
  appended to a progress log (one JSON line per member: name, size, md5) in the shard's scratch folder, outside the
  output Snakemake deletes before a rerun;
- a rerun reads the log and skips every member already complete (its file there with the logged size), seeking past
  its data in the uncompressed tar, so only the member being written when the job was killed is extracted again;
- a link, device or path outside the folder is refused (nothing in the published tarballs is one), and a member
  shorter than its header says (a truncated tarball) stops the extraction;
- the finished tree is moved into the shard with ``members.json`` (every member's size and md5), so the extracted
  files' integrity stays known after the scratch folder is gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
from pathlib import Path, PurePosixPath

from mlperf_wf.acquire.prepare import source_identity
from mlperf_wf.errors import UserError

CHUNK = 8 << 20
MEMBERS_RECORD = "members.json"
"""Each extracted member's size and md5, written into the shard beside the extracted folder."""


def _safe_name(tarball: Path, member: tarfile.TarInfo) -> PurePosixPath:
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts or not name.parts:
        raise UserError(f"{tarball}: member {member.name!r} is outside the archive's folder; allowed: relative paths without '..'")
    if not (member.isfile() or member.isdir()):
        raise UserError(f"{tarball}: member {member.name!r} is a link or special file; allowed: regular files and folders")
    return name


def _read_progress(log: Path) -> dict[str, dict]:
    """Members the log records as complete (a line cut short by a kill is ignored)."""
    done: dict[str, dict] = {}
    if log.is_file():
        for line in log.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            done[entry["name"]] = {"size": entry["size"], "md5": entry["md5"]}
    return done


def _copy_member(source, target: Path, size: int) -> str:
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.md5()
    written = 0
    with open(partial, "wb") as out:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
            written += len(chunk)
        out.flush()
        os.fsync(out.fileno())
    if written != size:
        raise UserError(f"{target.name}: the tar header says {size} bytes, {written} were read; the tarball is truncated")
    partial.replace(target)
    return digest.hexdigest()


def extract(tarball: Path, out_dir: Path, scratch: Path) -> dict[str, dict]:
    """Extract ``tarball`` into ``out_dir`` through ``scratch`` (resuming there); return member -> size and md5."""
    if not tarball.is_file():
        raise UserError(f"{tarball}: not found; the download stage leaves the published tarball there")
    state = scratch / "source.json"
    identity = {"tarball": source_identity(tarball)}
    if scratch.exists() and (not state.is_file() or json.loads(state.read_text()) != identity):
        shutil.rmtree(scratch)  # another tarball (or none recorded): start afresh
    tree, log = scratch / "tree", scratch / "progress.jsonl"
    tree.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps(identity))
    done = _read_progress(log)
    members: dict[str, dict] = {}
    with tarfile.open(tarball, "r:") as archive, open(log, "a") as progress:
        for member in archive:
            name = _safe_name(tarball, member)
            target = tree.joinpath(*name.parts)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            key = name.as_posix()
            if key in done and done[key]["size"] == member.size and target.is_file() and target.stat().st_size == member.size:
                members[key] = done[key]
                continue  # complete before the kill: the uncompressed tar seeks past its data
            target.parent.mkdir(parents=True, exist_ok=True)
            md5 = _copy_member(archive.extractfile(member), target, member.size)
            members[key] = {"size": member.size, "md5": md5}
            progress.write(json.dumps({"name": key, **members[key]}) + "\n")
            progress.flush()
    out_dir.mkdir(parents=True, exist_ok=True)
    for entry in sorted(tree.iterdir()):
        entry.replace(out_dir / entry.name)
    (out_dir / MEMBERS_RECORD).write_text(json.dumps({"tarball": tarball.name, "members": members}, indent=1, sort_keys=True))
    shutil.rmtree(scratch)
    return members


def write(path: Path, folder: Path, name: str) -> Path:
    """``folder``'s files as one uncompressed tarball whose members sit under ``name/`` (the published layout)."""
    with tarfile.open(path, "w") as archive:
        for file in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = archive.gettarinfo(str(file), arcname=f"{name}/{file.relative_to(folder).as_posix()}")
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""  # the same bytes from the same files
            with open(file, "rb") as stream:
                archive.addfile(info, stream)
    return path
