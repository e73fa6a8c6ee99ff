"""Snakemake's own state of a campaign folder, read only: the one place that knows its files.

What ``.snakemake/`` holds (Snakemake 9, ``persistence/file.py``): ``locks/<n>.{input,output}.lock`` list the files the
running Snakemake reads and will make; ``incomplete/`` holds one marker per output of a job started and not finished,
named by the output path's urlsafe base64 (split into folders of at most NAME_MAX bytes, every part but the last
starting with ``@``), holding JSON with the scheduler's ``external_jobid``. And which Snakemake processes on this host
work in a folder (``/proc``). ``tests/results/test_snakemake_state.py`` checks the decoding against Snakemake's own encoder and
the records against a real Snakemake's.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SnakemakeRecords:
    """What ``.snakemake/`` of the campaign's folder says, read without locking."""

    locked: bool
    """A lock is held: a Snakemake is running here (or one killed with -9 left it: ``snakemake --unlock``)."""
    lock_time: float | None
    """When the lock was taken (the oldest lock file's mtime)."""
    wanted: frozenset[str]
    """The outputs the locking Snakemake will make (its output lock)."""
    started: dict[str, str | None]
    """Output -> scheduler job id (None for a local job) of every job started and not finished (incomplete markers)."""
    stale_lock: bool = False
    """Lock files are there but no Snakemake runs in the folder on this host (one was killed): ``snakemake --unlock``."""
    failed: frozenset[str] = frozenset()
    """Outputs of the jobs the running Snakemake reported failed (``Error in rule`` in its log; ``--quiet`` writes none).
    A job's log without an incomplete marker is not enough at once: the local executor starts the job's shell, which
    creates the log, before Snakemake writes the marker."""


def snakemake_processes_in(root: Path) -> list[int] | None:
    """Process ids of the Snakemakes on this host that work in ``root`` (their current folder, or ``-d``/``--directory``),
    not counting the jobs a Snakemake starts (``--target-jobs``); None where processes cannot be listed."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    target = root.resolve()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if not any("snakemake" in Path(arg).name for arg in argv[:3]) or "--target-jobs" in argv:
                continue
            folder = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        for flag, value in itertools.pairwise(argv):
            if flag in ("-d", "--directory"):
                folder = (folder / value).resolve()
        if folder == target:
            found.append(int(entry.name))
    return found


def snakemake_running_in(root: Path) -> bool | None:
    """Whether a Snakemake on this host works in ``root``; None where processes cannot be listed (a lock is then
    taken as live)."""
    found = snakemake_processes_in(root)
    return None if found is None else bool(found)


def _ancestors() -> set[int]:
    """This process and its parents (a Snakemake started through a wrapper finds itself, not another)."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def another_snakemake_in(root: Path) -> int | None:
    """The process id of another Snakemake working in ``root`` (not this one), or None."""
    others = sorted(set(snakemake_processes_in(root) or []) - _ancestors())
    return others[0] if others else None


def read_snakemake_records(root: Path) -> SnakemakeRecords:
    """The lock and incomplete markers of ``root/.snakemake`` (all empty when Snakemake never ran there)."""
    state = root / ".snakemake"
    lock_files = sorted((state / "locks").glob("*.lock")) if (state / "locks").is_dir() else []
    wanted: set[str] = set()
    for lock in lock_files:
        if lock.name.endswith(".output.lock"):
            wanted |= {line.strip() for line in read_text_or_empty(lock).splitlines() if line.strip()}
    times = [mtime_or_none(lock) for lock in lock_files]
    started: dict[str, str | None] = {}
    incomplete = state / "incomplete"
    if incomplete.is_dir():
        for folder, _, names in os.walk(incomplete):
            for name in names:
                marker = Path(folder, name)
                key = _marker_key(marker.relative_to(incomplete))
                if key is None:
                    continue
                try:
                    record = json.loads(read_text_or_empty(marker) or "{}")
                except ValueError:
                    record = {}
                job_id = record.get("external_jobid") if isinstance(record, dict) else None
                started[key] = str(job_id) if job_id is not None else None
    if lock_files and snakemake_running_in(root) is False:  # a Snakemake killed with -9 left its lock
        return SnakemakeRecords(locked=False, lock_time=None, wanted=frozenset(), started=started, stale_lock=True)
    lock_time = min((t for t in times if t is not None), default=None)
    return SnakemakeRecords(
        locked=bool(lock_files),
        lock_time=lock_time,
        wanted=frozenset(wanted),
        started=started,
        failed=failed_outputs(root, lock_time) if lock_files else frozenset(),
    )


def failed_outputs(root: Path, since: float | None) -> frozenset[str]:
    """The outputs of the jobs whose failure the Snakemake log written since ``since`` reports: its blocks
    ``Error in rule <name>:`` with an indented ``output: a, b`` line."""
    logs = sorted((root / ".snakemake" / "log").glob("*.snakemake.log"))
    current = [log for log in logs if since is None or (mtime_or_none(log) or 0) >= since]
    failed: set[str] = set()
    for log in current[-1:]:
        in_error = False
        for line in read_text_or_empty(log).splitlines():
            if line.startswith("Error in rule "):
                in_error = True
            elif in_error and line.startswith("    output: "):
                failed |= {path.strip() for path in line.removeprefix("    output: ").split(",") if path.strip()}
                in_error = False
            elif line and not line.startswith(" "):
                in_error = False
    return frozenset(failed)


def _marker_key(relative: Path) -> str | None:
    """The output path an incomplete marker stands for: Snakemake names it by the path's urlsafe base64, split
    into folder names of at most NAME_MAX bytes, every part but the last starting with ``@``."""
    encoded = "".join(part.removeprefix("@") for part in relative.parts)
    try:
        return base64.urlsafe_b64decode(encoded).decode()
    except (ValueError, UnicodeDecodeError):
        return None  # e.g. the "migration_underway" flag


def read_text_or_empty(path: Path) -> str:
    try:
        return path.read_text(encoding="latin-1")
    except OSError:
        return ""


def mtime_or_none(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None
