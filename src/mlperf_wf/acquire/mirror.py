"""Writes a local mirror of a dataset's tiny stand-in in its protocol's layout, for the tiny tier.

R2 layout (as on ``*.mlcommons-storage.org``)::

    <root>/metadata/<name>.uri   -> file://<root>/data/<name>
    <root>/metadata/<name>.md5   -> "md5  path" lines
    <root>/data/<name>/<files>

FiftyOne zoo layout (``fiftyone`` protocol: the folder the reference's fetch writes, read as ``file:<root>``)::

    <root>/info.json, <root>/<split>/{data/<id>.jpg, labels/<labels file>, metadata/...}

Hugging Face Hub layout (as under ``https://huggingface.co``, endpoint ``file://<root>``)::

    <root>/api/{datasets|models}/<repo>/revision/<commit>   -> the listing JSON (sha, siblings with size, blobId, lfs)
    <root>/{datasets/}<repo>/resolve/<commit>/<files>

The download stage reads the mirror through exactly the code path it uses for
https://, so the tiny DAG exercises the real protocol.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from mlperf_wf.acquire.manifest import manifest_text
from mlperf_wf.acquire.verify import git_blob_hash, hash_file, md5_file
from mlperf_wf.config import registry
from mlperf_wf.config.registry import DatasetDef, DatasetSource
from mlperf_wf.errors import ConfigError

LFS_SUFFIXES = (".parquet", ".arrow", ".safetensors", ".bin", ".pt", ".pth", ".npy", ".npz", ".gz", ".zst", ".tar", ".jsonl", ".model")
"""Files the mirror lists as LFS files (as the hub's default ``.gitattributes`` stores such data); the rest are git blobs."""


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
    paths.md5.write_text(manifest_text({p.relative_to(data_dir).as_posix(): md5_file(p) for p in files}))
    paths.uri.write_text(paths.data.resolve().as_uri() + "\n")
    return paths


@dataclass(frozen=True)
class HubMirrorPaths:
    """The listing and files of one mirrored hub repository."""

    listing: Path
    data: Path


def hub_mirror_paths(root: Path, source: DatasetSource) -> HubMirrorPaths:
    """Where a hub repository at its pinned commit lives in a mirror rooted at ``root`` (its endpoint ``file://<root>``)."""
    from mlperf_wf.acquire.hub import HubRepo

    repo = HubRepo(root.resolve().as_uri(), source.repository, source.repository_type, source.revision)
    return HubMirrorPaths(listing=root / repo.listing_path, data=root / repo.resolve_path)


def _sibling(path: Path, rfilename: str) -> dict:
    """The listing entry the hub gives a file: an LFS file's sha256 and size, and every file's git blob id."""
    size = path.stat().st_size
    digests = hash_file(path, {"sha256": hashlib.sha256(), "blob": git_blob_hash(size)})
    sha256 = digests["sha256"].hexdigest()
    if not path.name.endswith(LFS_SUFFIXES):
        return {"rfilename": rfilename, "size": size, "blobId": digests["blob"].hexdigest()}
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
    pointer_hash = git_blob_hash(len(pointer))
    pointer_hash.update(pointer)
    return {"rfilename": rfilename, "size": size, "blobId": pointer_hash.hexdigest(), "lfs": {"sha256": sha256, "size": size, "pointerSize": len(pointer)}}


def publish_hub(root: Path, source: DatasetSource) -> HubMirrorPaths:
    """Write the listing JSON of the files already under the mirror's resolve folder, for the source's pinned commit."""
    paths = hub_mirror_paths(root, source)
    files = sorted(p for p in paths.data.rglob("*") if p.is_file())
    siblings = [_sibling(p, p.relative_to(paths.data).as_posix()) for p in files]
    paths.listing.parent.mkdir(parents=True, exist_ok=True)
    paths.listing.write_text(json.dumps({"id": source.repository, "sha": source.revision, "siblings": siblings}, indent=1))
    return paths


@dataclass(frozen=True)
class FiftyOneMirrorPaths:
    """A mirrored FiftyOne dataset folder (``<split>/{data,labels,metadata}``, ``info.json``)."""

    data: Path


def generate_tiny_mirror(dataset: DatasetDef, root: Path) -> MirrorPaths | HubMirrorPaths | FiftyOneMirrorPaths:
    """Run the dataset's seeded generator into a fresh mirror at ``root``, in the layout of the dataset's protocol."""
    if dataset.tiny is None:
        raise ConfigError(f"{registry.dataset_where(dataset.id)}: no tiny: generator, so {dataset.id} has no tiny-scale stand-in; run it with scale: full")
    if root.exists():
        shutil.rmtree(root)
    generate = dataset.tiny.function()
    if dataset.source.protocol == "huggingface":
        generate(hub_mirror_paths(root, dataset.source).data, seed=dataset.tiny.seed)
        return publish_hub(root, dataset.source)
    if dataset.source.protocol == "fiftyone":
        # FiftyOne publishes no listing: the mirror is the folder its fetch writes (received by mlperf_wf.acquire.fiftyone).
        generate(root, seed=dataset.tiny.seed)
        return FiftyOneMirrorPaths(data=root)
    paths = mirror_paths(root, dataset.id)
    generate(paths.data, seed=dataset.tiny.seed)
    return publish(root, dataset.id, paths.data)
