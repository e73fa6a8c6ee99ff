"""Extracts dataset archives (tar, tar.gz, ...) without letting them escape their folder.

Every member is checked before anything is written: absolute names, ``..``
components, symbolic or hard links that point outside the destination, and
device, FIFO or other special files are refused, naming the archive, the member
and the reason. Extraction then runs with Python's ``data`` filter as a second
line of defence.
"""

from __future__ import annotations

import tarfile
from pathlib import Path, PurePosixPath

from mlperf_wf.errors import UserError


class UnsafeArchiveError(UserError):
    """An archive member would write outside the destination or is not a plain file, folder or inner link."""


def _inside(dest: Path, candidate: Path) -> bool:
    dest = dest.resolve()
    return candidate == dest or dest in candidate.parents


def check_member(archive: Path, member: tarfile.TarInfo, dest: Path) -> None:
    """Raise UnsafeArchiveError unless ``member`` is safe to extract into ``dest``."""
    name = PurePosixPath(member.name)
    where = f"{archive.name}: member {member.name!r}"
    if name.is_absolute() or member.name.startswith(("/", "\\")):
        raise UnsafeArchiveError(f"{where} has an absolute path; refusing to extract")
    if ".." in name.parts:
        raise UnsafeArchiveError(f"{where} climbs out with '..'; refusing to extract")
    target = (dest.resolve() / name).resolve()
    if not _inside(dest, target):
        raise UnsafeArchiveError(f"{where} resolves to {target}, outside {dest}; refusing to extract")
    if member.isdev() or member.isfifo() or not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise UnsafeArchiveError(f"{where} is a device, FIFO or special file; refusing to extract")
    if member.issym():
        link = PurePosixPath(member.linkname)
        if link.is_absolute():
            raise UnsafeArchiveError(f"{where} is a symlink to the absolute path {member.linkname!r}; refusing to extract")
        pointed = (target.parent / link).resolve()
        if not _inside(dest, pointed):
            raise UnsafeArchiveError(f"{where} is a symlink to {member.linkname!r}, outside {dest}; refusing to extract")
    if member.islnk():
        pointed = (dest.resolve() / member.linkname).resolve()
        if PurePosixPath(member.linkname).is_absolute() or not _inside(dest, pointed):
            raise UnsafeArchiveError(f"{where} is a hard link to {member.linkname!r}, outside {dest}; refusing to extract")


def safe_extract(archive: Path, dest: Path) -> list[str]:
    """Check every member, then extract ``archive`` into ``dest``; return the member names."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:
            check_member(archive, member, dest)
        tar.extractall(dest, members=members, filter="data")
    return [m.name for m in members]
