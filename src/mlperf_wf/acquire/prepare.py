"""The prepared dataset of a benchmark: shards, and the tree the runs read.

A benchmark's ``prepare`` module (or the module of another preparation it offers, chosen by the
config's ``preparation``) declares its ``shards(scale)`` (each one job, cached on its own; a shard
may read shards listed before it, named by ``shard_inputs(shard, scale)``) and ``layout(scale)``, the folder tree its trainer or reference container reads, as
``tree path -> <shard>/<file>``. ``assemble`` builds that tree from relative symbolic links,
so it costs nothing at 2 TB, and it resolves both on the host and inside a container that
mounts the benchmark's prepared folder (``resources/<scale>/prepared/<benchmark>``:
``shards/`` and ``dataset/`` side by side).
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from mlperf_wf.acquire.manifest import manifest_text, parse_manifest
from mlperf_wf.acquire.verify import STAMPS_NAME, cache_entry_of, md5_files, refuse_cached, verify_dataset
from mlperf_wf.errors import ChecksumError, ConfigError, UserError
from mlperf_wf.kinds import DEFAULT_PREPARATION

if TYPE_CHECKING:
    from mlperf_wf.config.registry import BenchmarkDef

DEFAULT_SHARD_RESOURCES = {"mem_mb": 16000, "runtime": 1440}
"""Scheduler resources of a shard job when the module does not say (16 GB, a day)."""


def module(bench: BenchmarkDef, preparation: str = DEFAULT_PREPARATION) -> ModuleType:
    """The module of the benchmark's preparation (``prepare`` unless the config picks another one)."""
    from mlperf_wf.config.registry import benchmark_module  # not for the stamps: check-prepared starts in a tenth of a second

    return benchmark_module(bench, bench.preparation_module(preparation))


def check_preparation(bench: BenchmarkDef, preparation: str, key: str = "preparation") -> None:
    """A clear error when the benchmark does not offer ``preparation``."""
    if preparation not in bench.preparation_names():
        offered = "; ".join([f"{DEFAULT_PREPARATION} (prepare.py)", *(f"{name} ({way.about})" for name, way in bench.preparations.items())])
        raise ConfigError(f"{key}: {bench.name} has no preparation {preparation!r}; it offers {offered}")


def _source(bench: BenchmarkDef, preparation: str) -> str:
    return str(bench.folder / f"{bench.preparation_module(preparation)}.py")


_SHARD_NAMES: dict[tuple, tuple[str, ...]] = {}
"""(module, its ``shards`` function, scale) -> the checked names: a parse asks for them once per job (bert has 502)."""


def shard_names(bench: BenchmarkDef, scale: str, preparation: str = DEFAULT_PREPARATION) -> list[str]:
    """The shards of a benchmark's preparation at ``scale``."""
    chosen = module(bench, preparation)
    key = (chosen, chosen.shards, scale)
    if key not in _SHARD_NAMES:
        names = list(chosen.shards(scale))
        bad = [name for name in names if not name or "/" in name or name.startswith(".")]
        if bad or len(set(names)) != len(names):
            raise ConfigError(f"{_source(bench, preparation)}: shards({scale!r}) must be unique folder names, got {names}")
        _SHARD_NAMES[key] = tuple(names)
    return list(_SHARD_NAMES[key])


def shard_inputs(bench: BenchmarkDef, shard: str, scale: str, preparation: str = DEFAULT_PREPARATION) -> list[str]:
    """The earlier shards that ``shard`` reads (the module's ``shard_inputs``; none when it has none).

    A shard may read only shards listed before it, so the order of ``shards()`` is an order to make them in."""
    chosen = getattr(module(bench, preparation), "shard_inputs", None)
    needed = list(chosen(shard, scale)) if chosen else []
    names = shard_names(bench, scale, preparation)
    earlier = names[: names.index(shard)] if shard in names else []
    wrong = [name for name in needed if name not in earlier]
    if wrong:
        raise ConfigError(f"{_source(bench, preparation)}: shard_inputs({shard!r}) names {wrong}, which are not shards listed before it")
    return needed


def shard_resources(bench: BenchmarkDef, shard: str, scale: str, preparation: str = DEFAULT_PREPARATION) -> dict[str, int]:
    """Scheduler resources of one shard job (the module's ``resources``, else ``DEFAULT_SHARD_RESOURCES``)."""
    chosen = getattr(module(bench, preparation), "resources", None)
    return {**DEFAULT_SHARD_RESOURCES, **(chosen(shard, scale) if chosen else {})}


# ---- what a shard was when it was made ----
# A shard job records the md5 of every file it leaves in its folder, inside the folder, so that the record travels with
# the shard into Snakemake's output cache and back out to every checkout that restores it. Each assembly checks the
# shards it links against their records (re-reading only files whose stat changed since the last check here), so a
# cached shard corrupted in place is refused, set aside and made again before any run reads it.

SHARD_MD5 = ".mlperf-wf-shard.md5"
"""The md5 list a shard job writes into its shard folder (md5sum's format)."""


def _shard_files(shard: Path) -> list[str]:
    """The data files of a shard folder (relative paths), not its md5 list nor Snakemake's timestamp."""
    return sorted(
        path.relative_to(shard).as_posix()
        for path in shard.rglob("*")
        if path.is_file() and path.name not in (SHARD_MD5, SNAKEMAKE_TIMESTAMP) and not (path.parent == shard and path.name == STAMPS_NAME)
    )


def record_shard(shard: Path, jobs: int = 2) -> Path:
    """Write the md5 of every file of a just-made shard into its md5 list; return the list."""
    digests = md5_files(shard, _shard_files(shard), jobs)
    target = shard / SHARD_MD5
    partial = target.with_name(f"{SHARD_MD5}.partial")
    partial.write_text(manifest_text(digests))
    partial.replace(target)
    return target


def make_shard(bench: BenchmarkDef, preparation: str, shard: str, inputs: dict[str, Path], out: Path, scale: str) -> dict:
    """Write one shard by the benchmark's preparation module and record its md5 list (:func:`record_shard`), which
    every assembly of it checks; return the module's summary."""
    summary = module(bench, preparation).prepare_shard(shard, inputs, out, scale)
    record_shard(out)
    return summary


def shard_stamps_file(shard: Path) -> Path:
    """Where a checkout keeps the stamps of a shard's last check (beside the shards, never in a cached shard)."""
    return shard.parent.parent / "shard-stamps" / f"{shard.name}.json"


def check_shards(layout: dict[str, str], shards_dir: Path, jobs: int = 2) -> None:
    """Check every shard ``layout`` links against the md5 list it recorded when it was made; a shard that fails is
    moved aside (a cached one: its cache entry set aside whole) and the check fails in one line."""
    for name in sorted({target.split("/", 1)[0] for target in layout.values()}):
        shard = shards_dir / name
        listed = shard / SHARD_MD5
        if shard.is_dir() and not listed.is_file():
            problem = f"{name}/{SHARD_MD5}: md5 list not found: the shard was not made by `mlperf-wf preprocess` of this version"
            entry = cache_entry_of(shard / SHARD_MD5)
            if entry is not None:
                refuse_cached(shard, entry, problem)
            raise ChecksumError(f"{problem}; delete {shard} and rerun: it is made again")
        if shard.is_dir():
            recorded = {entry.path for entry in parse_manifest(listed.read_text(), str(listed))}
            linked = {target.split("/", 1)[1] for target in layout.values() if target.startswith(f"{name}/")}
            # a linked folder (flux1's empty encodings folder) is covered by its files' entries
            unlisted = sorted(
                path
                for path in linked
                if ((shard / path).is_dir() and any(f not in recorded for f in _shard_files(shard) if f.startswith(f"{path}/")))
                or (not (shard / path).is_dir() and path not in recorded)
            )
            if unlisted:
                raise ChecksumError(f"{name}/{unlisted[0]}: not in the shard's md5 list {listed}; delete {shard} and rerun: it is made again")
            verify_dataset(shard, manifest=listed, jobs=jobs, stamps_file=shard_stamps_file(shard), whole=True)


def assemble(layout: dict[str, str], shards_dir: Path, out_dir: Path) -> int:
    """Link every ``layout`` entry into ``out_dir``; return the number of links.

    Every target must exist: a missing one means a shard did not write what the
    module declared, which is a bug to report, not a tree to hand to training.
    Every shard is first checked against its md5 list (:func:`check_shards`).
    """
    missing = [target for target in layout.values() if not (shards_dir / target).exists()]
    if missing:
        raise UserError(f"{shards_dir}: shards lack {len(missing)} declared files, e.g. {missing[0]}")
    check_shards(layout, shards_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    for tree_path, target in sorted(layout.items()):
        link = out_dir / tree_path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(shards_dir / target, link.parent))
    write_stamps(out_dir)
    return len(layout)


# ---- what the prepared tree was when it was made ----
# A prepared file may be a hard link of a verified dataset file (the same inode): a byte changed through either
# name, even with its mtime set back, changes the inode's ctime. Every file's stat at assembly time is recorded
# beside the tree, and each train job compares before it starts (stat only, no hashing).


SNAKEMAKE_TIMESTAMP = ".snakemake_timestamp"
"""Snakemake adds it to a directory output after the job: not data."""


def stamps_file(prepared: Path) -> Path:
    """Where the stamps of a prepared tree are kept: beside it, so nothing is added to what the runs mount."""
    return prepared.with_name(f"{prepared.name}.stamps.json.gz")


def tree_stamps(prepared: Path) -> dict[str, list[int]]:
    """Path (relative) -> [size, mtime_ns, ctime_ns, inode, links] of every file the tree reaches (symlinks followed)."""
    stamps = {}
    for root, _dirs, files in os.walk(prepared, followlinks=True):
        for name in files:
            if name == SNAKEMAKE_TIMESTAMP:
                continue
            path = Path(root) / name
            st = path.stat()
            stamps[path.relative_to(prepared).as_posix()] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_nlink]
    return stamps


def write_stamps(prepared: Path) -> Path:
    """Record the tree's stamps (after the last link is made: linking changes an inode's ctime)."""
    target = stamps_file(prepared)
    with gzip.open(target, "wt") as handle:
        json.dump(tree_stamps(prepared), handle)
    return target


def changed_since_prepared(prepared: Path) -> tuple[list[str], bool]:
    """What in ``prepared`` is not as it was assembled, one phrase per file (empty: unchanged), and whether its stamps
    are to be renewed: the whole tree copied or moved as it is (every file a new inode, sizes and mtimes kept), or
    files linked again elsewhere (another benchmark's preparation hard-linking the same dataset file changes its
    link count and ctime, not its bytes)."""
    with gzip.open(stamps_file(prepared), "rt") as handle:
        recorded: dict[str, list[int]] = json.load(handle)
    now = tree_stamps(prepared)
    changed = [f"{path}: missing" for path in recorded if path not in now]
    changed += [f"{path}: new" for path in now if path not in recorded]
    relinked = False
    for path, was in recorded.items():
        if path not in now or now[path] == was:
            continue
        size, mtime, ctime, inode, links = now[path]
        differ = [name for name, a, b in (("size", was[0], size), ("mtime", was[1], mtime), ("inode", was[3], inode)) if a != b]
        if was[2] != ctime:
            if len(was) > 4 and was[4] != links and not differ:
                relinked = True  # a link added or removed elsewhere: ctime moves with the link count
                continue
            differ.append("ctime")
        if differ:
            changed.append(f"{path}: {', '.join(differ)} changed")
    moved = bool(now) and now.keys() == recorded.keys() and all(now[p][:2] == recorded[p][:2] and now[p][3] != recorded[p][3] for p in now)
    if moved:  # new inodes throughout: their bytes are checked against the shards' md5 lists before the stamps are renewed
        check_shards_of(prepared)
        return [], True
    return changed, relinked and not changed


def check_shards_of(prepared: Path, jobs: int = 2) -> None:
    """Check every shard beside a prepared tree (``../shards``) that has an md5 list against it (re-reading only files
    whose stat changed since their last check); a shard that fails is moved aside, in one line (:func:`check_shards`)."""
    shards = prepared.parent / "shards"
    for listed in sorted(shards.glob(f"*/{SHARD_MD5}")) if shards.is_dir() else []:
        verify_dataset(listed.parent, manifest=listed, jobs=jobs, stamps_file=shard_stamps_file(listed.parent), whole=True)


def full_disk_message(err: OSError, benchmark: str, shard: str, out: Path) -> str:
    """One line for a shard job whose disk filled up: the file it was writing (write(2)'s error names none: the newest
    file of the shard or its scratch folder), the shard folder, the space left there and what to do."""
    written = [path for folder in (out, scratch_for(out)) if folder.is_dir() for path in folder.rglob("*") if path.is_file()]
    newest = err.filename or (str(max(written, key=lambda path: path.stat().st_mtime_ns)) if written else f"{out}/ (a new file)")
    existing = next((folder for folder in (out, *out.parents) if folder.exists()), out)
    free = shutil.disk_usage(existing).free
    return (
        f"{newest}: {err.strerror} while writing shard {shard} of {benchmark} in {out} ({free} bytes free there): free space "
        f"on that filesystem (or put resources/ on a larger one) and rerun: the shard is made again"
    )


def role_folders(items: list[str], allowed: dict[str, str] | list[str], flag: str = "--input") -> dict[str, Path]:
    """``ROLE=FOLDER`` arguments as a mapping; each role must be one the stage reads (a key of ``allowed``)."""
    named = {}
    for item in items:
        role, sep, folder = item.partition("=")
        if not sep or role not in allowed:
            raise ConfigError(f"{flag} {item!r}: expected ROLE=FOLDER with ROLE one of {sorted(allowed)}")
        named[role] = Path(folder)
    return named


def shard_input_folders(
    bench: BenchmarkDef, scale: str, shard: str, inputs: list[str], preparation: str = DEFAULT_PREPARATION, verified: list[str] | None = None
) -> tuple[dict[str, Path], list[Path]]:
    """The ``role=folder`` ``inputs`` of one shard of the benchmark's named preparation, each role one it reads, each
    ``role=stamps`` of ``verified`` checked against what its verification read; returns them by role, and the folders
    whose files written since their verification were read again (and matched)."""
    from mlperf_wf.acquire.verify import check_unchanged
    from mlperf_wf.config.registry import SHARDS_ROLE

    check_preparation(bench, preparation, key="--preparation")
    known = shard_names(bench, scale, preparation)
    if shard not in known:
        raise ConfigError(f"--shard {shard!r}: {bench.name} at scale {scale} (preparation {preparation}) has shards {', '.join(known)}")
    allowed = bench.roles_for("prepare", preparation)
    if shard_inputs(bench, shard, scale, preparation):
        allowed = {**allowed, SHARDS_ROLE: ""}
    named = role_folders(inputs, allowed)
    checked = role_folders(verified or [], [role for role in named if role != SHARDS_ROLE], "--verified")
    return named, [named[role] for role, stamps in checked.items() if check_unchanged(named[role], stamps)]


def write_shard(bench: BenchmarkDef, preparation: str, shard: str, inputs: dict[str, Path], out: Path, scale: str) -> dict:
    """:func:`make_shard`, a full disk said in one line naming the file, the shard and the space left."""
    try:
        return make_shard(bench, preparation, shard, inputs, out, scale)
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise UserError(full_disk_message(err, bench.name, shard, out)) from None


def assemble_prepared(bench: BenchmarkDef, scale: str, shards: Path, out: Path, preparation: str = DEFAULT_PREPARATION) -> int:
    """Link the benchmark's shards (of the named preparation) into the tree its trainer or reference container reads;
    returns the number of links."""
    check_preparation(bench, preparation, key="--preparation")
    return assemble(module(bench, preparation).layout(scale), shards, out)


def check_prepared(prepared: Path) -> str | None:
    """Refuse (one line) a prepared tree that changed since it was assembled; a train job runs this first. A tree
    assembled by an earlier version, or copied or moved whole, is recorded as it is now: returns a line saying so."""
    if not prepared.is_dir():
        raise UserError(f"{prepared}: no prepared tree here")
    if not stamps_file(prepared).is_file():  # assembled by an earlier version: recorded as it is now
        write_stamps(prepared)
        return f"{prepared}: no stamps yet; recorded as it is now"
    changed, moved = changed_since_prepared(prepared)
    note = None
    if moved:  # copied or moved whole (rsync -a, a restore), or its files linked again elsewhere: recorded as it is now
        write_stamps(prepared)
        note = f"{prepared}: copied, moved or linked again elsewhere since it was prepared, its bytes untouched; stamps renewed"
    if changed:
        first = prepared / changed[0].rsplit(": ", 1)[0]
        linked = first.exists() and first.stat().st_nlink > 1
        also = (
            "; it is also a hard link of another file (a downloaded one: to re-check that dataset too, delete its "
            "resources/<scale>/verified/<dataset>.json before rerunning)"
            if linked
            else ""
        )
        raise UserError(
            f"{prepared}/{changed[0]} since it was prepared ({len(changed)} files in all); nothing was run: delete {prepared} "
            "and rerun snakemake: assembling it again checks every shard against the md5s recorded when it was made, and a "
            f"changed shard is set aside and made again{also}"
        )
    return note


def link_or_copy(source: Path, target: Path) -> None:
    """Hard-link ``source`` as ``target`` (a symlink would dangle in a container that mounts only the
    prepared folder); copy when they are on different filesystems."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:  # another filesystem
        shutil.copy2(source, target)


class Checkpoint:
    """Progress of one shard in its scratch folder, so a killed job resumes where it stopped.

    The scratch folder sits beside the shard folders (``prepared/<benchmark>/scratch/<shard>``),
    outside what Snakemake declares: Snakemake deletes a killed job's output before rerunning it,
    not this. The state names its source (path, size, mtime); other data starts afresh.
    """

    def __init__(self, folder: Path, source: dict) -> None:
        self.folder = folder
        self.source = source
        self.file = folder / "progress.json"
        folder.mkdir(parents=True, exist_ok=True)
        state = json.loads(self.file.read_text()) if self.file.is_file() else {}
        self.state: dict = state if state.get("source") == source else {}
        if not self.state:
            for stale in folder.iterdir():
                stale.unlink()

    def get(self, key: str, default: int = 0) -> int:
        return int(self.state.get(key, default))

    def save(self, **values: int) -> None:
        self.state = {**self.state, **values, "source": self.source}
        partial = self.file.with_suffix(".partial")
        partial.write_text(json.dumps(self.state))
        partial.replace(self.file)  # atomic: a kill leaves the old state or the new one

    def done(self) -> None:
        shutil.rmtree(self.folder)


def source_identity(*paths: Path) -> dict:
    """What a checkpoint's state belongs to: each source's path, size and modification time."""
    return {str(p): [p.stat().st_size, p.stat().st_mtime_ns] for p in paths}


def scratch_for(out_dir: Path) -> Path:
    """``prepared/<benchmark>/scratch/<shard>`` for ``prepared/<benchmark>/shards/<shard>``."""
    return out_dir.parent.parent / "scratch" / out_dir.name
