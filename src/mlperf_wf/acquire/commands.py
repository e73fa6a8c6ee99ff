"""The acquire stage's subcommands: download, verify, the tiny mirror, sealing a dataset an image made, extracting an
archive, a preparation's shards and the tree assembled from them (each flag's parsing here, the work in its module)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from mlperf_wf.acquire.verify import STAMPS_NAME
from mlperf_wf.command import Command
from mlperf_wf.kinds import DEFAULT_PREPARATION, Scale

log = logging.getLogger("mlperf_wf")  # the CLI's own lines, under the name its logs have always had


def _mirror_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True)
    p.add_argument("--out", type=Path, required=True)


def _mirror(args: argparse.Namespace) -> None:
    from mlperf_wf.acquire.mirror import generate_tiny_mirror
    from mlperf_wf.config.registry import load_dataset

    paths = generate_tiny_mirror(load_dataset(args.dataset), args.out)
    log.info("mirror of %s written: %s", args.dataset, paths.data)


MIRROR = Command(
    "mirror",
    help="generate a tiny dataset as a local mirror in its protocol's layout (R2 or Hugging Face Hub)",
    add_arguments=_mirror_arguments,
    run=_mirror,
    people=True,
)


def _download_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", help="catalog id (<id>.yaml in a benchmark folder's datasets/ or config/datasets/): its source, pins and excludes")
    p.add_argument("--dest", type=Path, required=True, help="the dataset folder (staged beside it, placed only when complete)")
    p.add_argument("--uri", help="R2: the .uri URL (https:// or file://); overrides the catalog's (its md5 pins then do not apply)")
    p.add_argument("--md5", help="R2: the .md5 list URL (default: beside --uri)")
    p.add_argument("--endpoint", help="hub: base URL (https://huggingface.co, a mirror, or file:ROOT of a local copy); default the catalog's")
    p.add_argument("--repository", help="hub: OWNER/NAME (default the catalog's)")
    p.add_argument("--repo-type", choices=["dataset", "model"], help="hub: repository type (default the catalog's, else dataset)")
    p.add_argument("--revision", help="hub: the 40-hex commit (default the catalog's); the catalog's pins apply only to its own endpoint and commit")
    p.add_argument("--url-list", type=Path, help="a plain list of URLs ('URL' or 'md5  URL' per line)")
    p.add_argument("--source", help="fiftyone: file:FOLDER, the folder the reference's FiftyOne fetch wrote (or the tiny mirror)")
    p.add_argument("--expect", default="catalog", help="fiftyone: whose image counts and checksums apply: catalog (default) or tiny")
    p.add_argument("--jobs", type=int, default=4, help="files downloaded at once (default 4)")


def _download(args: argparse.Namespace) -> None:
    from mlperf_wf.acquire.sources import HubOptions, download

    hub = HubOptions(args.endpoint, args.repository, args.repo_type, args.revision)
    record = download(args.dataset, args.dest, args.uri, args.md5, args.url_list, args.jobs, hub, args.source, args.expect)
    log.info("%s: %d files, %d bytes transferred in %.1f s", args.dest.name, len(record.files), record.bytes_transferred, record.seconds)


DOWNLOAD = Command(
    "download",
    help="download a dataset: MLCommons R2 or the Hugging Face Hub at a pinned commit (parallel, resumable, checked while streaming, staged)",
    description="Download a catalog dataset with its protocol, or any R2 dataset (--uri), hub repository (--repository/--revision) or URL list. "
    "R2: every file against the published md5 list. Hugging Face Hub: the listing and every file must come from the pinned commit "
    "(X-Repo-Commit); every file against the hub's size and sha256 (LFS) or git blob id, and the catalog's sha256/size/rows pins. "
    "A file failing its checks twice is moved to <dest>/../.quarantine/; the folder is placed only when complete. "
    "Auth from the environment: MLPERF_WF_CF_ACCESS_* (R2), HF_TOKEN (hub).",
    add_arguments=_download_arguments,
    run=_download,
    people=True,
)


def _verify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", type=Path)
    p.add_argument("--manifest", type=Path, help="md5 list ('md5  path' lines; default: FOLDER/manifest.md5)")
    p.add_argument("--out", type=Path, help="write the verification record (JSON) here")
    p.add_argument("--stamps", type=Path, help=f"stamps file (default: FOLDER/{STAMPS_NAME})")
    p.add_argument("--jobs", type=int, default=4, help="files hashed at once")


def _verify(args: argparse.Namespace) -> None:
    from mlperf_wf.acquire.verify import verify_dataset, write_record

    record = verify_dataset(args.folder, manifest=args.manifest, jobs=args.jobs, stamps_file=args.stamps)
    if args.out:
        write_record(record, args.out)
    log.info("%s: %d files, %d bytes verified, %d bytes read", args.folder.name, len(record.files), record.total_bytes, record.bytes_hashed)


VERIFY = Command(
    "verify",
    help="check a dataset folder against its md5 list (only changed files are re-read)",
    add_arguments=_verify_arguments,
    run=_verify,
    people=True,
)


def _seal_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", type=Path)
    p.add_argument("--dataset", required=True, help="its catalog id (protocol made_in_image)")
    p.add_argument("--jobs", type=int, default=4, help="files hashed at once")


def _seal(args: argparse.Namespace) -> None:
    from mlperf_wf.acquire.made_in_image import seal

    digests = seal(args.dataset, args.folder, args.jobs)
    log.info("%s: %d files sealed in its md5 list", args.folder, len(digests))


SEAL = Command(
    "seal",
    help="check a dataset a one-off job of a benchmark's image made (the catalog's files are there) and write its md5 list for the verify stage",
    add_arguments=_seal_arguments,
    run=_seal,
)


def _extract_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("archive", type=Path)
    p.add_argument("--dest", type=Path, required=True)


def _extract(args: argparse.Namespace) -> None:
    from mlperf_wf.acquire.archive import safe_extract

    names = safe_extract(args.archive, args.dest)
    log.info("%s: %d members extracted into %s", args.archive.name, len(names), args.dest)


EXTRACT = Command(
    "extract",
    help="extract a tar archive safely (no traversal, absolute paths, outward links or device files)",
    add_arguments=_extract_arguments,
    run=_extract,
)


def _preprocess_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True)
    p.add_argument("--scale", choices=list(Scale), required=True)
    p.add_argument("--shard", required=True, help="shard name (the preprocessing module's shards(scale))")
    p.add_argument("--input", action="append", default=[], help="ROLE=FOLDER, one per dataset role (shards=FOLDER for a shard that reads earlier shards)")
    p.add_argument(
        "--verified",
        action="append",
        default=[],
        help="ROLE=STAMPS: the stamps verify wrote for that role's dataset; a file written since is read again and refused on an md5 mismatch",
    )
    p.add_argument("--preparation", default=DEFAULT_PREPARATION, help="the benchmark's preparation (benchmark.yaml preparations; default: its prepare.py)")
    p.add_argument("--out", type=Path, required=True)


def _preprocess(args: argparse.Namespace) -> None:
    from mlperf_wf.acquire import prepare
    from mlperf_wf.config.registry import load_benchmark

    bench = load_benchmark(args.benchmark)
    inputs, read_again = prepare.shard_input_folders(bench, args.scale, args.shard, args.input, args.preparation, args.verified)
    for folder in read_again:
        log.info("%s: files written since its verification were read again and match their md5", folder)
    summary = prepare.write_shard(bench, args.preparation, args.shard, inputs, args.out, args.scale)
    log.info("%s shard %s prepared: %s", args.benchmark, args.shard, json.dumps(summary))


PREPROCESS = Command(
    "preprocess",
    help="prepare one shard of a benchmark's data",
    add_arguments=_preprocess_arguments,
    run=_preprocess,
)


def _assemble_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", required=True)
    p.add_argument("--scale", choices=list(Scale), required=True)
    p.add_argument("--shards", type=Path, required=True, help="folder holding the shard folders")
    p.add_argument("--preparation", default=DEFAULT_PREPARATION, help="the benchmark's preparation the shards come from")
    p.add_argument("--out", type=Path, required=True)


def _assemble(args: argparse.Namespace) -> None:
    from mlperf_wf.acquire import prepare
    from mlperf_wf.config.registry import load_benchmark

    links = prepare.assemble_prepared(load_benchmark(args.benchmark), args.scale, args.shards, args.out, args.preparation)
    log.info("%s: %d files linked into %s", args.benchmark, links, args.out)


ASSEMBLE = Command(
    "assemble",
    help="link a benchmark's prepared shards into the tree its trainer reads",
    add_arguments=_assemble_arguments,
    run=_assemble,
)


def _check_prepared(args: argparse.Namespace) -> None:
    from mlperf_wf.acquire import prepare

    note = prepare.check_prepared(args.prepared)
    if note:
        log.info("%s", note)


CHECK_PREPARED = Command(
    "check-prepared",
    help="refuse a prepared tree that changed since it was assembled (stat only)",
    add_arguments=lambda p: p.add_argument("prepared", type=Path),
    run=_check_prepared,
)

COMMANDS = (DOWNLOAD, VERIFY, MIRROR, PREPROCESS, ASSEMBLE, CHECK_PREPARED, SEAL, EXTRACT)
"""The acquire stage's subcommands, in the order the help lists them."""
