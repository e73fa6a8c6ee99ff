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

import json
import os
import shutil
from pathlib import Path
from types import ModuleType

from mlperf_wf.errors import ConfigError, UserError
from mlperf_wf.registry import DEFAULT_PREPARATION, BenchmarkDef, benchmark_module

DEFAULT_SHARD_RESOURCES = {"mem_mb": 16000, "runtime": 1440}
"""Scheduler resources of a shard job when the module does not say (16 GB, a day)."""


def module(bench: BenchmarkDef, preparation: str = DEFAULT_PREPARATION) -> ModuleType:
    """The module of the benchmark's preparation (``prepare`` unless the config picks another one)."""
    return benchmark_module(bench, bench.preparation_module(preparation))


def check_preparation(bench: BenchmarkDef, preparation: str, key: str = "preparation") -> None:
    """A clear error when the benchmark does not offer ``preparation``."""
    if preparation not in bench.preparation_names():
        offered = "; ".join([f"{DEFAULT_PREPARATION} (prepare.py)", *(f"{name} ({way.about})" for name, way in bench.preparations.items())])
        raise ConfigError(f"{key}: {bench.name} has no preparation {preparation!r}; it offers {offered}")


def _source(bench: BenchmarkDef, preparation: str) -> str:
    return str(bench.folder / f"{bench.preparation_module(preparation)}.py")


def shard_names(bench: BenchmarkDef, scale: str, preparation: str = DEFAULT_PREPARATION) -> list[str]:
    """The shards of a benchmark's preparation at ``scale``."""
    names = module(bench, preparation).shards(scale)
    bad = [name for name in names if not name or "/" in name or name.startswith(".")]
    if bad or len(set(names)) != len(names):
        raise ConfigError(f"{_source(bench, preparation)}: shards({scale!r}) must be unique folder names, got {names}")
    return names


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


def assemble(layout: dict[str, str], shards_dir: Path, out_dir: Path) -> int:
    """Link every ``layout`` entry into ``out_dir``; return the number of links.

    Every target must exist: a missing one means a shard did not write what the
    module declared, which is a bug to report, not a tree to hand to training.
    """
    missing = [target for target in layout.values() if not (shards_dir / target).exists()]
    if missing:
        raise UserError(f"{shards_dir}: shards lack {len(missing)} declared files, e.g. {missing[0]}")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    for tree_path, target in sorted(layout.items()):
        link = out_dir / tree_path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(shards_dir / target, link.parent))
    return len(layout)


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
