"""The prepared dataset of a benchmark: shards, and the tree the runs read.

A benchmark's ``prepare`` module declares its ``shards(scale)`` (each one job, cached on its
own) and ``layout(scale)``, the folder tree its trainer or reference container reads, as
``tree path -> <shard>/<file>``. ``assemble`` builds that tree from relative symbolic links,
so it costs nothing at 2 TB, and it resolves both on the host and inside a container that
mounts the benchmark's prepared folder (``resources/<scale>/prepared/<benchmark>``:
``shards/`` and ``dataset/`` side by side).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import ModuleType

from mlperf_wf.errors import ConfigError, UserError
from mlperf_wf.registry import BenchmarkDef, benchmark_module

DEFAULT_SHARD_RESOURCES = {"mem_mb": 16000, "runtime": 1440}
"""Scheduler resources of a shard job when the module does not say (16 GB, a day)."""


def module(bench: BenchmarkDef) -> ModuleType:
    """The benchmark's ``prepare`` module."""
    return benchmark_module(bench, "prepare")


def shard_names(bench: BenchmarkDef, scale: str) -> list[str]:
    """The shards of a benchmark's preparation at ``scale``."""
    names = module(bench).shards(scale)
    bad = [name for name in names if not name or "/" in name or name.startswith(".")]
    if bad or len(set(names)) != len(names):
        raise ConfigError(f"{bench.folder / 'prepare.py'}: shards({scale!r}) must be unique folder names, got {names}")
    return names


def shard_resources(bench: BenchmarkDef, shard: str, scale: str) -> dict[str, int]:
    """Scheduler resources of one shard job (the module's ``resources``, else ``DEFAULT_SHARD_RESOURCES``)."""
    chosen = getattr(module(bench), "resources", None)
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
