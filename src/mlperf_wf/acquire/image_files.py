"""Container images as files, for sites whose compute side has no registry: an OCI archive of a pinned image (skopeo
copies it by digest), the enroot squashfs of its root filesystem (what ``enroot import`` makes, and what pyxis starts
with ``--container-image=/path/image.sqsh``), and the checks that an archive is the image its digest names.

The archive keeps the registry's manifest byte for byte (``skopeo copy --preserve-digests``): its sha256 is the
pinned digest, checked here when an archive is written and again when a bundle is imported. An image's Docker ID is
the digest of its config blob, named in that manifest; ``docker run <ID>`` starts a loaded image without a registry.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mlperf_wf.errors import UserError

MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")
"""Manifests of one platform's image (an index names several; the pinned digest must be one image's)."""
WHITEOUT = ".wh."
OPAQUE_WHITEOUT = ".wh..wh..opq"


class ImageFileError(UserError):
    """An image could not be copied to a file, or a file is not the image it claims to be."""


@dataclass(frozen=True)
class ArchivedImage:
    """What an OCI archive holds, read from its own bytes."""

    manifest_digest: str
    """sha256 of the manifest: the digest the image is pinned to."""
    config_digest: str
    """sha256 of the image config: Docker's image ID once it is loaded."""
    layers: tuple[str, ...]
    """Layer blob digests, lowest first."""
    env: tuple[str, ...]
    """The image's ``ENV`` (``KEY=VALUE``)."""
    workdir: str
    """The image's ``WORKDIR`` (``/`` when unset)."""


def sha256_file(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes (read as the verify stage reads files)."""
    from mlperf_wf.acquire.verify import hash_file

    return f"sha256:{hash_file(path, {'sha256': hashlib.sha256()})['sha256'].hexdigest()}"


def _sha256(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def is_loopback(registry: str | None) -> bool:
    """A registry on this machine (``localhost`` or 127.0.0.0/8): plain HTTP, as Docker allows by default."""
    if not registry:
        return False
    host = registry.rsplit(":", 1)[0] if registry.count(":") == 1 else registry
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _skopeo(argv: list[str], what: str) -> None:
    if shutil.which("skopeo") is None:
        raise ImageFileError(f"{what}: skopeo is not installed (Debian: apt-get install skopeo)")
    done = subprocess.run(["skopeo", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ImageFileError(f"{what}: skopeo {argv[0]} failed: {last}")


def write_oci_archive(registry: str | None, repository: str, digest: str, out: Path) -> ArchivedImage:
    """Copy ``registry/repository@digest`` into the OCI archive ``out`` with its manifest unchanged, and check it.

    Credentials are skopeo's own (``REGISTRY_AUTH_FILE``, ``~/.docker/config.json``): each goes only to its registry.
    """
    source = f"docker://{registry + '/' if registry else ''}{repository}@{digest}"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.unlink(missing_ok=True)
    argv = ["copy", "--quiet", "--preserve-digests"]
    if is_loopback(registry):
        argv.append("--src-tls-verify=false")
    _skopeo([*argv, source, f"oci-archive:{partial}"], source)
    image = read_oci_archive(partial)
    if image.manifest_digest != digest:
        partial.unlink()
        raise ImageFileError(f"{source}: the registry sent manifest {image.manifest_digest}, not the pinned {digest}")
    partial.replace(out)
    return image


def _members(archive: tarfile.TarFile) -> dict[str, tarfile.TarInfo]:
    return {str(PurePosixPath(member.name.lstrip("./") or ".")): member for member in archive.getmembers()}


def _blob(archive: tarfile.TarFile, members: dict[str, tarfile.TarInfo], digest: str, where: Path) -> bytes:
    algorithm, _, hexdigest = digest.partition(":")
    member = members.get(f"blobs/{algorithm}/{hexdigest}")
    stream = archive.extractfile(member) if member else None
    if stream is None:
        raise ImageFileError(f"{where}: blob {digest} is missing from the archive")
    data = stream.read()
    if _sha256(data) != digest:
        raise ImageFileError(f"{where}: blob {digest} does not match its digest")
    return data


def read_oci_archive(path: Path) -> ArchivedImage:
    """The image in an OCI archive, its manifest and config checked against their digests."""
    try:
        with tarfile.open(path) as archive:
            members = _members(archive)
            index_member = members.get("index.json")
            stream = archive.extractfile(index_member) if index_member else None
            if stream is None:
                raise ImageFileError(f"{path}: no index.json: not an OCI archive")
            manifests = [m for m in json.loads(stream.read()).get("manifests", []) if m.get("mediaType") in MANIFEST_TYPES]
            if len(manifests) != 1:
                raise ImageFileError(f"{path}: the archive holds {len(manifests)} single-platform images; expected 1")
            digest = manifests[0]["digest"]
            manifest = json.loads(_blob(archive, members, digest, path))
            config = json.loads(_blob(archive, members, manifest["config"]["digest"], path))
    except (tarfile.TarError, OSError, json.JSONDecodeError, KeyError) as err:
        raise ImageFileError(f"{path}: not a readable OCI archive ({err})") from None
    settings = config.get("config") or {}
    return ArchivedImage(
        manifest_digest=digest,
        config_digest=manifest["config"]["digest"],
        layers=tuple(layer["digest"] for layer in manifest.get("layers", [])),
        env=tuple(settings.get("Env") or ()),
        workdir=settings.get("WorkingDir") or "/",
    )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _apply_whiteouts(layer: tarfile.TarFile, rootfs: Path) -> list[tarfile.TarInfo]:
    """Delete what this layer's whiteouts hide in the layers below; the layer's other members, to extract."""
    keep = []
    for member in layer.getmembers():
        path = PurePosixPath(member.name.lstrip("/"))
        if ".." in path.parts:
            raise ImageFileError(f"layer member {member.name!r} leaves the root filesystem")
        if path.name == OPAQUE_WHITEOUT:
            folder = rootfs / path.parent
            if folder.is_dir() and not folder.is_symlink():
                for child in folder.iterdir():
                    _remove(child)
        elif path.name.startswith(WHITEOUT):
            _remove(rootfs / path.parent / path.name[len(WHITEOUT) :])
        else:
            keep.append(member)
    return keep


def unpack_rootfs(archive_path: Path, rootfs: Path) -> ArchivedImage:
    """The image's root filesystem: its layers extracted lowest first, whiteouts applied (OCI image layout rules);
    no member may land outside ``rootfs`` (tarfile's ``tar`` filter)."""
    image = read_oci_archive(archive_path)
    rootfs.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive_path) as archive:
        members = _members(archive)
        for digest in image.layers:
            algorithm, _, hexdigest = digest.partition(":")
            member = members.get(f"blobs/{algorithm}/{hexdigest}")
            stream = archive.extractfile(member) if member else None
            if stream is None:
                raise ImageFileError(f"{archive_path}: layer {digest} is missing from the archive")
            with tarfile.open(fileobj=stream, mode="r:*") as layer:
                layer.extractall(rootfs, members=_apply_whiteouts(layer, rootfs), filter="tar")
    return image


RC = """#!/bin/sh
# The image's start-up as enroot's import writes it: its WORKDIR, then the command given (mlperf-wf bundle export).
cd {workdir} || exit 1
exec "$@"
"""


def write_squashfs(archive_path: Path, out: Path) -> None:
    """The enroot image of an OCI archive: its root filesystem with the image's ``ENV`` in ``/etc/environment`` and its
    ``WORKDIR`` in ``/etc/rc`` (as ``enroot import`` lays them out), as a squashfs that pyxis starts directly."""
    if shutil.which("mksquashfs") is None:
        raise ImageFileError(f"{out}: mksquashfs is not installed (Debian: apt-get install squashfs-tools)")
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".rootfs-") as scratch:
        rootfs = Path(scratch) / "rootfs"
        image = unpack_rootfs(archive_path, rootfs)
        etc = rootfs / "etc"
        etc.mkdir(exist_ok=True)
        (etc / "environment").write_text("".join(f"{line}\n" for line in image.env))
        import shlex

        (etc / "rc").write_text(RC.format(workdir=shlex.quote(image.workdir)))
        (etc / "rc").chmod(0o755)
        partial = out.with_name(out.name + ".partial")
        partial.unlink(missing_ok=True)
        done = subprocess.run(["mksquashfs", str(rootfs), str(partial), "-noappend", "-quiet", "-no-progress"], capture_output=True, text=True)
        if done.returncode != 0:
            raise ImageFileError(f"{out}: mksquashfs failed: {(done.stderr.strip().splitlines() or ['no message'])[-1]}")
        partial.replace(out)


def write_sif(archive_path: Path, out: Path) -> None:
    """Apptainer's SIF of an OCI archive (``apptainer build``), made once per site: Apptainer started from
    ``oci-archive:`` converts the archive again in every job's cache. Written as ``out`` only when complete."""
    if shutil.which("apptainer") is None:
        raise ImageFileError(f"{out}: apptainer is not installed on this machine")
    partial = out.with_name(out.name + ".partial")
    partial.unlink(missing_ok=True)
    done = subprocess.run(["apptainer", "build", str(partial), f"oci-archive:{archive_path}"], capture_output=True, text=True)
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise ImageFileError(f"{out}: apptainer build failed: {(done.stderr.strip().splitlines() or ['no message'])[-1]}")
    partial.replace(out)


def load_into_docker(archive_path: Path, name: str, docker_host: str | None = None) -> str:
    """Load an OCI archive into the local Docker engine as ``name`` (skopeo's ``docker-daemon:`` transport); returns the
    image ID, which is the archive's config digest (checked)."""
    image = read_oci_archive(archive_path)
    argv = ["copy", "--quiet"]
    if docker_host:
        argv.append(f"--dest-daemon-host={docker_host}")
    _skopeo([*argv, f"oci-archive:{archive_path}", f"docker-daemon:{name}"], f"{archive_path} -> docker")
    inspect = ["docker", "image", "inspect", "--format", "{{.Id}}", name]
    env = None
    if docker_host:
        import os

        env = {**os.environ, "DOCKER_HOST": docker_host}
    loaded = subprocess.run(inspect, capture_output=True, text=True, env=env).stdout.strip()
    if loaded != image.config_digest:
        raise ImageFileError(f"{archive_path}: Docker loaded image {loaded or 'nothing'}, not the archive's {image.config_digest}")
    return loaded
