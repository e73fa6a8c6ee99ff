"""Writes a local mirror in the MLCommons R2 layout for the tiny tier.

Layout (as on ``*.mlcommons-storage.org``)::

    <root>/metadata/<name>.uri   -> file://<root>/data/<name>
    <root>/metadata/<name>.md5   -> "md5  path" lines
    <root>/data/<name>/<files>

The download stage reads this mirror through exactly the code path it uses for
https://, so the tiny DAG exercises the real protocol.
"""

from __future__ import annotations

import importlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from mlperf_wf.errors import ConfigError
from mlperf_wf.registry import DatasetDef
from mlperf_wf.verify import md5_file


@dataclass(frozen=True)
class MirrorPaths:
    """The metadata files of one mirrored dataset."""

    uri: Path
    md5: Path
    data: Path


def mirror_paths(root: Path, name: str) -> MirrorPaths:
    """Where ``name`` lives in a mirror rooted at ``root``."""
    return MirrorPaths(uri=root / "metadata" / f"{name}.uri", md5=root / "metadata" / f"{name}.md5", data=root / "data" / name)


def publish(root: Path, name: str, data_dir: Path) -> MirrorPaths:
    """Write the ``.uri`` and ``.md5`` metadata for files already in ``data_dir``."""
    paths = mirror_paths(root, name)
    if data_dir.resolve() != paths.data.resolve():
        raise ValueError(f"{data_dir} is not the mirror's data folder {paths.data}")
    files = sorted(p for p in data_dir.rglob("*") if p.is_file())
    paths.md5.parent.mkdir(parents=True, exist_ok=True)
    paths.md5.write_text("".join(f"{md5_file(p)}  {p.relative_to(data_dir).as_posix()}\n" for p in files))
    paths.uri.write_text(paths.data.resolve().as_uri() + "\n")
    return paths


def generate_tiny_mirror(dataset: DatasetDef, root: Path) -> MirrorPaths:
    """Run the dataset's seeded generator into a fresh mirror at ``root``."""
    if dataset.tiny is None:
        raise ConfigError(f"config/datasets/{dataset.id}.yaml: no tiny: generator, so {dataset.id} has no tiny-scale stand-in; run it with scale: full")
    paths = mirror_paths(root, dataset.id)
    if root.exists():
        shutil.rmtree(root)
    generator = importlib.import_module(dataset.tiny.module)
    generator.generate(paths.data, seed=dataset.tiny.seed)
    return publish(root, dataset.id, paths.data)
