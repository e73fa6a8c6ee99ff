"""An offline bundle: everything a site whose compute side has no network needs to run a set of benchmarks.

``mlperf-wf bundle export`` (on a connected machine, in a workflow folder whose datasets were downloaded and verified)
writes one folder:

- ``images/``: each pinned image as an OCI archive copied by digest (its manifest unchanged, so its sha256 is the pin)
  and, where ``mksquashfs`` exists, its enroot squashfs, which pyxis starts without importing anything (at tiny scale,
  whose runs start no pinned image, only the images that are pinned: none is needed);
- ``datasets/<scale>/<id>/``: every verified dataset the benchmarks read (hard links where the filesystem allows): at
  full scale what the download wrote, at tiny scale the generated mirror it reads (:func:`carried_folder`);
- ``wheels/``: the workflow's and the checker's (mlperf-logging) wheels, and any others given (``--wheels-from``);
- ``source/``: the workflow itself at its commit (``git archive``: the Snakefile, rules, profiles, containers);
- ``bundle.json``: what each file is and its sha256 and size; export prints the sha256 of ``bundle.json`` itself.

While export writes its folder, the folder holds :data:`EXPORTING`: an export that stopped part way is run again into
the same folder, which clears what the stopped one wrote; a folder with anything else in it is refused.

``mlperf-wf bundle import`` (on the disconnected side) checks every file against ``bundle.json`` (and ``bundle.json``
against the printed digest with ``--expect``) before it copies anything, refuses a changed, missing or added file by
name, then puts the images in the site's image folder (once per site: an identical file already there is kept),
optionally loads them into the local Docker engine, places the datasets where the download rule would have left them,
and writes ``config/site.yaml``, which the workflow reads after ``config/config.yaml``: each benchmark's
``full_container`` then names the local files, so a full-scale plan starts nothing from a registry.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mlperf_wf.acquire import image_files
from mlperf_wf.acquire.image_files import sha256_file
from mlperf_wf.acquire.prepare import link_or_copy
from mlperf_wf.errors import UserError

BUNDLE_FILE = "bundle.json"
FORMAT = 1
"""Version of ``bundle.json``'s layout; import refuses another."""
EXPORTING = ".export-incomplete"
"""The file export writes first in its folder and removes last: a folder holding it is an export that did not finish,
which the next export into that folder clears (what export wrote only) and makes again; import refuses it."""
EXPORTED = ("images", "datasets", "wheels", "source", BUNDLE_FILE, EXPORTING)
"""What export writes in its folder."""
CHECKER_DISTRIBUTION = "mlperf-logging"
WORKFLOW_DISTRIBUTION = "mlperf-workflow"


class BundleError(UserError):
    """A bundle cannot be made or is not what its ``bundle.json`` says."""


@dataclass(frozen=True)
class BundledImage:
    """One pinned image of the bundle."""

    image: str
    """Repository and tag, as pinned in the plan."""
    digest: str
    """Manifest digest (the pin)."""
    config_digest: str
    """Config digest: the image's Docker ID once loaded."""
    oci_archive: str
    """Bundle path of its OCI archive."""
    squashfs: str | None
    """Bundle path of its enroot squashfs (None where ``mksquashfs`` was missing at export)."""
    benchmarks: tuple[str, ...]
    """The benchmarks that run it."""


def _copy_tree(source: Path, target: Path) -> None:
    for path in sorted(source.rglob("*")):
        if path.is_symlink():
            raise BundleError(f"{path}: a link in a downloaded dataset; a bundle carries plain files only")
        if path.is_file():
            (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(path, target / path.relative_to(source))


def _image_name(repository: str, digest: str) -> str:
    return f"{repository.replace('/', '_')}@{digest.split(':', 1)[1][:16]}"


def _export_images(plan, names: list[str], out: Path, squashfs: bool) -> dict[str, BundledImage]:
    by_digest: dict[str, BundledImage] = {}
    for name in names:
        container = plan.of(name).container()
        if container.digest in by_digest:
            known = by_digest[container.digest]
            by_digest[container.digest] = BundledImage(**{**asdict(known), "benchmarks": (*known.benchmarks, name)})
            continue
        registry, repository = container.location()
        stem = _image_name(repository, container.digest)
        archive = out / "images" / f"{stem}.oci.tar"
        print(f"bundle: {container.reference} -> {archive.relative_to(out)}", file=sys.stderr)
        archived = image_files.write_oci_archive(registry, repository, container.digest, archive)
        sqsh = None
        if squashfs:
            sqsh = out / "images" / f"{stem}.sqsh"
            image_files.write_squashfs(archive, sqsh)
        by_digest[container.digest] = BundledImage(
            image=container.image,
            digest=container.digest,
            config_digest=archived.config_digest,
            oci_archive=str(archive.relative_to(out)),
            squashfs=str(sqsh.relative_to(out)) if sqsh else None,
            benchmarks=(name,),
        )
    return {image.digest: image for image in by_digest.values()}


def carried_folder(plan, dataset_id: str) -> str:
    """The folder of a dataset a bundle carries: what the download wrote at full scale; at tiny scale what the download
    reads (the generated mirror, the tiny tier's published source), so the site's own download and verify rules run
    on it without network."""
    return plan.download_inputs(dataset_id).get("mirror") or plan.dataset_dir(dataset_id)


def _verified_datasets(plan, root: Path, names: list[str]) -> list[str]:
    """Every dataset the benchmarks read; each must have been verified in ``root``, except one a job of a benchmark's
    image makes (``made_in_image``: a GPU job, which the site runs itself where it was not made here; carried when it
    was)."""
    dataset_ids = sorted({dataset_id for name in names for dataset_id in plan.of(name).datasets_read()})
    carried = []
    for dataset_id in dataset_ids:
        if (root / plan.verified_record(dataset_id)).is_file():
            carried.append(dataset_id)
        elif dataset_id not in plan.made_in_image:
            raise BundleError(
                f"{plan.verified_record(dataset_id)}: missing: dataset {dataset_id} is not verified in {root}; run "
                f"`snakemake {plan.verified_record(dataset_id)} --config scale={plan.scale}` there first"
            )
    return carried


def _export_datasets(plan, root: Path, dataset_ids: list[str], out: Path) -> dict[str, dict[str, str]]:
    datasets = {}
    for dataset_id in dataset_ids:
        place = carried_folder(plan, dataset_id)
        target = out / "datasets" / str(plan.scale) / dataset_id
        _copy_tree(root / place, target)
        datasets[dataset_id] = {"bundle": str(target.relative_to(out)), "place": place}
    return datasets


def _pip(argv: list[str], what: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise BundleError(f"{what}: pip {argv[0]} failed: {last}")


def _export_wheels(project_root: Path, out: Path, wheels_from: list[Path]) -> list[str]:
    from importlib import metadata

    wheels = out / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mlperf-wf-wheel-") as scratch:
        # built from a copy of what the wheel is made of: setuptools writes build/ and egg-info beside its sources
        source = Path(scratch) / "source"
        shutil.copytree(project_root / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(project_root / name, source / name)
        _pip(["wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(wheels), str(source)], "the workflow's wheel")
    checker = f"{CHECKER_DISTRIBUTION}=={metadata.version(CHECKER_DISTRIBUTION)}"
    _pip(["download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest", str(wheels), checker], checker)
    for folder in wheels_from:
        found = sorted(folder.glob("*.whl"))
        if not found:
            raise BundleError(f"--wheels-from {folder}: no .whl files there (make them with `pip download -r requirements.txt -d {folder}`)")
        for wheel in found:
            if not (wheels / wheel.name).exists():
                link_or_copy(wheel, wheels / wheel.name)
    pins = [f"{WORKFLOW_DISTRIBUTION}=={metadata.version(WORKFLOW_DISTRIBUTION)}", checker]
    (wheels / "requirements.txt").write_text("".join(f"{pin}\n" for pin in pins))
    return sorted(str(path.relative_to(out)) for path in wheels.iterdir())


def _export_source(project_root: Path, out: Path) -> dict:
    """The workflow itself (the Snakefile, rules, profiles, config, containers): ``git archive`` of the checkout's commit,
    which the site unpacks as its workflow folder. Uncommitted changes are not in it: the bundle says so."""
    commit = subprocess.run(["git", "-C", str(project_root), "rev-parse", "HEAD"], capture_output=True, text=True)
    if commit.returncode != 0:
        raise BundleError(f"{project_root}: not a git checkout; a bundle carries the workflow as `git archive` of a commit")
    head = commit.stdout.strip()
    target = out / "source" / f"mlperf-workflow-{head[:12]}.tar"
    target.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["git", "-C", str(project_root), "archive", "--format=tar", "-o", str(target), head], capture_output=True, text=True)
    if done.returncode != 0:
        raise BundleError(f"{target}: git archive failed: {done.stderr.strip()[-300:]}")
    status = subprocess.run(["git", "-C", str(project_root), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    return {"archive": str(target.relative_to(out)), "commit": head, "uncommitted_changes_left_out": bool(status.stdout.strip())}


def _pinned(plan, names: list[str], scale: str) -> list[str]:
    """The benchmarks whose full-scale image the bundle carries: every one at full scale, where each must be pinned by
    digest; at tiny scale, whose runs start no pinned image (on the host, or in ``tiny_image``, a userland the site
    makes), those pinned, for a site that also plans full-scale jobs; the others are named on stderr."""
    pinned = [name for name in names if plan.of(name).container().digest]
    for name in names:
        if name in pinned:
            continue
        if scale == "full":
            image = plan.of(name).container().image
            raise BundleError(f"full_container.{name}.digest: unset for {image}; a bundle carries pinned images only (push the image and set its digest)")
        print(f"bundle: {name}: no image carried (full_container.{name}.digest unset; tiny runs start none)", file=sys.stderr)
    if scale == "tiny" and any(plan.of(name).launch_settings().launcher == "docker" for name in names):
        tiny_image = plan.settings.tiny_image
        print(f"bundle: tiny_image {tiny_image} (launcher: docker) is not carried: a userland the site makes (config/config.yaml, tiny_image)", file=sys.stderr)
    return pinned


def _check_out(out: Path) -> None:
    """``--out`` must be a new or empty folder, or one an export that did not finish left (it holds :data:`EXPORTING`,
    and nothing export does not write): anything else is refused, naming what is there, before anything is written."""
    if out.exists() and not out.is_dir():
        raise BundleError(f"--out {out}: a file, not a folder; give a new or empty folder")
    entries = sorted(path.name for path in out.iterdir()) if out.is_dir() else []
    if not entries:
        return
    if EXPORTING not in entries:
        if BUNDLE_FILE in entries:
            raise BundleError(f"--out {out}: holds a finished bundle ({BUNDLE_FILE}); give a new or empty folder")
        more = f" (and {len(entries) - 1} more)" if len(entries) > 1 else ""
        raise BundleError(f"--out {out}: holds {entries[0]}{more}, which export did not write; give a new or empty folder")
    foreign = [name for name in entries if name not in EXPORTED]
    if foreign:
        raise BundleError(f"--out {out}: holds {foreign[0]} beside an export that did not finish, which export did not write; move it away to export again")


def _claim(out: Path) -> None:
    """Mark ``out`` (checked by :func:`_check_out`) as an export under way, after clearing what an export that did not
    finish wrote there: its own entries only (:data:`EXPORTED`)."""
    if out.is_dir() and (out / EXPORTING).exists():
        print(f"bundle: {out}: an export did not finish there; starting it again", file=sys.stderr)
        for name in EXPORTED:
            path = out / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
    out.mkdir(parents=True, exist_ok=True)
    (out / EXPORTING).write_text("mlperf-wf bundle export is writing this folder; if it stopped, run it again\n")


def export(root: Path, project_root: Path, out: Path, config: dict, wheels_from: list[Path], squashfs: bool | None = None) -> str:
    """Write the bundle of the workflow ``config``'s benchmarks at its scale (the config as Snakemake would merge it in
    ``root``) into ``out``, a new or empty folder or one whose export did not finish (:func:`_check_out`); returns the
    sha256 of its ``bundle.json``. ``squashfs``: make the enroot images (default: where ``mksquashfs`` exists)."""
    from mlperf_wf.config.config_check import parsed_config
    from mlperf_wf.plan import plan as planning

    _check_out(out)
    settings = parsed_config(config)
    names, scale = list(settings.benchmarks), str(settings.scale)
    plan = planning.load(settings, project_root=project_root, workdir=root)
    if squashfs is None:
        squashfs = shutil.which("mksquashfs") is not None
    pinned = _pinned(plan, names, scale)
    dataset_ids = _verified_datasets(plan, root, names)
    _claim(out)
    images = _export_images(plan, pinned, out, squashfs)
    datasets = _export_datasets(plan, root, dataset_ids, out)
    wheels = _export_wheels(project_root, out, wheels_from)
    source = _export_source(project_root, out)
    files = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file() and p.name != EXPORTING):
        files[str(path.relative_to(out))] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    described = {
        "format": FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "scale": scale,
        "benchmarks": names,
        "images": [asdict(image) for image in images.values()],
        "datasets": datasets,
        "wheels": wheels,
        "source": source,
        "files": files,
    }
    manifest = out / BUNDLE_FILE
    manifest.write_text(json.dumps(described, indent=1) + "\n")
    (out / EXPORTING).unlink()  # last: the bundle is whole
    return sha256_file(manifest)


def check(bundle: Path, expect: str | None = None) -> dict:
    """``bundle.json`` (checked against ``expect``), after every file of the bundle was checked against it: nothing
    missing, changed or added. A problem is one line naming the file."""
    manifest = bundle / BUNDLE_FILE
    if (bundle / EXPORTING).exists():
        raise BundleError(f"{bundle / EXPORTING}: the export of {bundle} did not finish; run `mlperf-wf bundle export` into it again")
    if not manifest.is_file():
        raise BundleError(f"{manifest}: missing: {bundle} is not a bundle made by `mlperf-wf bundle export`")
    if expect and sha256_file(manifest) != expect:
        raise BundleError(f"{manifest}: sha256 {sha256_file(manifest)} is not the {expect} export printed: the bundle was changed")
    try:
        described = json.loads(manifest.read_text())
    except json.JSONDecodeError as err:
        raise BundleError(f"{manifest}: not JSON ({err.msg}, line {err.lineno})") from None
    if described.get("format") != FORMAT:
        raise BundleError(f"{manifest}: format {described.get('format')!r}; this mlperf-wf reads format {FORMAT}")
    listed = described["files"]
    present = {str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file() and p != manifest}
    for added in sorted(present - set(listed)):
        raise BundleError(f"{bundle / added}: not in {BUNDLE_FILE}: a file was added to the bundle after export")
    for name, expected in sorted(listed.items()):
        path = bundle / name
        if not path.is_file():
            raise BundleError(f"{path}: missing from the bundle ({BUNDLE_FILE} lists it)")
        size = path.stat().st_size
        if size != expected["size"]:
            raise BundleError(f"{path}: {size} bytes, {BUNDLE_FILE} says {expected['size']}: the file was changed after export")
        digest = sha256_file(path)
        if digest != expected["sha256"]:
            raise BundleError(f"{path}: sha256 {digest} is not {BUNDLE_FILE}'s {expected['sha256']}: the file was changed after export")
    return described


def _same_tree(source: Path, target: Path) -> bool:
    def listing(folder: Path) -> dict[str, int]:
        return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}

    return listing(source) == listing(target)


def import_bundle(bundle: Path, root: Path, images_dir: Path, docker: bool = False, expect: str | None = None, sif: bool | None = None) -> Path | None:
    """Check the bundle (:func:`check`), then place its images, datasets and the site config; returns the site config
    (None where the bundle carries no image: a tiny bundle's runs start none, and no site config is written).
    ``sif``: build each image's Apptainer SIF from its archive, once (default: where ``apptainer`` exists)."""
    import yaml

    from mlperf_wf.config.workflow_config import SITE_CONFIG

    described = check(bundle, expect)
    for dataset_id, where in described["datasets"].items():
        target = root / where["place"]
        if target.exists() and not _same_tree(bundle / where["bundle"], target):
            raise BundleError(f"{target}: exists with other files than the bundle's {dataset_id}; move it away to import this one")
    if described["images"]:
        images_dir.mkdir(parents=True, exist_ok=True)
    if sif is None:
        sif = shutil.which("apptainer") is not None
    containers = {}
    for image in described["images"]:
        local = {}
        for kind in ("oci_archive", "squashfs"):
            if not image[kind]:
                continue
            source, target = bundle / image[kind], images_dir / Path(image[kind]).name
            if not (target.exists() and sha256_file(target) == described["files"][image[kind]]["sha256"]):
                partial = target.with_name(target.name + ".partial")
                shutil.copy2(source, partial)
                partial.replace(target)
            local[kind] = str(target.resolve())
        archive = Path(local["oci_archive"])  # this site's copy, placed above
        if sif:
            target = archive.with_name(archive.name.removesuffix(".oci.tar") + ".sif")
            if not target.exists():  # named by the digest, written whole: one there is this image's
                image_files.write_sif(archive, target)
            local["sif"] = str(target)
        if docker:
            name = f"mlperf-wf-bundle/{archive.name.split('@')[0]}:{image['digest'].split(':')[1][:16]}"
            local["image_id"] = image_files.load_into_docker(archive, name.lower(), os.environ.get("DOCKER_HOST"))
        for name in image["benchmarks"]:
            containers[name] = {"image": image["image"], "digest": image["digest"], **local}
    for where in described["datasets"].values():
        target = root / where["place"]
        if not target.exists():
            partial = target.with_name(target.name + ".importing")
            shutil.rmtree(partial, ignore_errors=True)
            _copy_tree(bundle / where["bundle"], partial)
            partial.replace(target)
    if not containers:  # a tiny bundle: its runs start no pinned image
        return None
    site = root / SITE_CONFIG
    current = (yaml.safe_load(site.read_text()) or {}) if site.exists() else {}
    current.setdefault("full_container", {}).update(containers)
    partial = site.with_name(site.name + ".partial")
    header = f"# Written by `mlperf-wf bundle import {bundle}`: read after config.yaml. Delete it to pull from registries again.\n"
    partial.write_text(header + yaml.safe_dump(current, sort_keys=True))
    partial.replace(site)
    return site
