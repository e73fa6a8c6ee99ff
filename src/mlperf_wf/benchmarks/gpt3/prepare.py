"""Data preparation for gpt3: unpack the two published tarballs, verified and resumable.

MLCommons publishes the gpt3 C4, already tokenized with the benchmark's SentencePiece model as Megatron indexed
datasets, as one tarball, ``dataset_c4_spm.tar``, that unpacks to ``preprocessed_c4_spm/`` (README.md:40-42), and
the fp32 starting checkpoint as ``checkpoint_megatron_fp32.tar``, unpacking to ``ckpt4000_fp32/`` (README.md:66-69):
the R2 ``.md5`` lists name those tarballs, and the download stage checks them. The reference reads the unpacked
files as they are: ``--train-data-path 0.5 c4_en_6... 0.5 c4_en_7...``, ``--valid-data-path 1.00
c4_en_validation_subset...`` under ``COM_DIR`` (run_gpt3.sh:29-33, 73-74) and ``--load`` the checkpoint folder
(:99-106). So preparation has two shards, each extracting one tarball (``tarball.extract``: resumable member by
member after a kill, every member's size and md5 recorded in the shard's ``members.json``):

- ``c4``: the dataset's members, opened with megatron-core's reader (``.idx`` header, version, dtype);
  ``prepared.json`` says the documents and tokens of each, and whether each file's md5 is the one the reference's
  checksums/dataset_checksum.log gives (a difference is logged as a warning, not an error: the tarball's own md5,
  checked by the download against the published list, is what proves the bytes are MLCommons'; a differing member
  means MLCommons published other files than the reference's log names, which the run's owner should know);
- ``checkpoint``: the checkpoint's members (the reference publishes no checksums of them at aa344c7: its
  checksums/fp32_checkpoint_checksum.log is missing), then the folder must hold what ``load_external_checkpoint``
  opens first (``metadata.json``, ``common.pt``).

The prepared tree links each dataset file at its top (``COM_DIR``) and the checkpoint folder as ``ckpt4000_fp32``.
The same at both scales: the tiny inputs are published as the same two tarballs.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from mlperf_wf.acquire.prepare import scratch_for
from mlperf_wf.benchmarks.gpt3 import c4_corpus, starting_checkpoint, tarball
from mlperf_wf.errors import UserError

log = logging.getLogger(__name__)

DATASET_TARBALL, DATASET_FOLDER = c4_corpus.TARBALL, c4_corpus.FOLDER
CHECKPOINT_TARBALL, CHECKPOINT_FOLDER = starting_checkpoint.TARBALL, starting_checkpoint.FOLDER
PREFIXES = (*c4_corpus.TRAIN_PREFIXES, c4_corpus.VALIDATION_PREFIX)
PUBLISHED_MD5 = {
    "c4_en_6_c4_spm_text_document.bin": "317a1c1b0b17fbd658e3e0b09d118ce9",
    "c4_en_6_c4_spm_text_document.idx": "5c8cfe37a26f919fb3998e84d1d07d8e",
    "c4_en_7_c4_spm_text_document.bin": "5a84af04d55765993ecb5461af56b718",
    "c4_en_7_c4_spm_text_document.idx": "35b23332069840094e1a75332cdeab62",
    "c4_en_validation_subset_c4_spm_text_document.bin": "20d868f6cb865ce616ce7b9cf8312be0",
    "c4_en_validation_subset_c4_spm_text_document.idx": "f76050809d0b42611eeef31d67d04224",
}
"""The reference's checksums/dataset_checksum.log at aa344c7: the md5 of each file the dataset tarball unpacks to."""
CHECKPOINT_FILES = ("metadata.json", "common.pt")
"""What ``load_external_checkpoint`` opens first (dist_checkpointing/core.py:25-36, serialization.py:64-67)."""
SHARDS = ("c4", "checkpoint")


def shards(scale: str) -> list[str]:
    """One shard per published tarball, at both scales."""
    return list(SHARDS)


def resources(shard: str, scale: str) -> dict[str, int]:
    """Extraction streams the tarball (bounded memory); the checkpoint's 2 TB take hours on a slow filesystem."""
    return {"mem_mb": 4000, "runtime": 1440}


def layout(scale: str) -> dict[str, str]:
    """Each dataset file at the top of the prepared tree (``COM_DIR``), ``prepared.json``, and the checkpoint folder."""
    names = [f"{prefix}.{suffix}" for prefix in PREFIXES for suffix in ("bin", "idx")]
    tree = {name: f"c4/{DATASET_FOLDER}/{name}" for name in names}
    tree["prepared.json"] = "c4/prepared.json"
    tree[CHECKPOINT_FOLDER] = f"checkpoint/{CHECKPOINT_FOLDER}"
    return tree


def _check_indexed_datasets(folder: Path) -> dict:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    datasets = {}
    for prefix in PREFIXES:
        source = folder / prefix
        try:
            dataset = IndexedDataset(str(source))
        except Exception as err:  # any reader failure is a bad dataset, said in one line
            raise UserError(f"{source}.idx/.bin: not a Megatron indexed dataset megatron-core can read: {err}") from None
        datasets[prefix] = {"documents": len(dataset), "tokens": int(dataset.sequence_lengths.sum())}
    return datasets


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Extract the shard's tarball into ``out_dir`` and check what the reference opens in it."""
    if shard == "c4":
        members = tarball.extract(inputs["data"] / DATASET_TARBALL, out_dir, scratch_for(out_dir))
        missing = [name for name in PUBLISHED_MD5 if f"{DATASET_FOLDER}/{name}" not in members]
        if missing:
            raise UserError(f"{inputs['data'] / DATASET_TARBALL}: holds no {DATASET_FOLDER}/{missing[0]}; the reference reads {', '.join(PREFIXES)}")
        differing = sorted(name for name, md5 in PUBLISHED_MD5.items() if members[f"{DATASET_FOLDER}/{name}"]["md5"] != md5)
        if differing and scale == "full":
            log.warning("%s: %s differ from the reference's checksums/dataset_checksum.log", DATASET_TARBALL, ", ".join(differing))
        summary = {"scale": scale, "datasets": _check_indexed_datasets(out_dir / DATASET_FOLDER), "differ_from_reference_checksums": differing}
        (out_dir / "prepared.json").write_text(json.dumps(summary, indent=2))
        return summary
    if shard == "checkpoint":
        members = tarball.extract(inputs["checkpoint"] / CHECKPOINT_TARBALL, out_dir, scratch_for(out_dir))
        missing = [name for name in CHECKPOINT_FILES if f"{CHECKPOINT_FOLDER}/{name}" not in members]
        if missing and scale == "full":
            raise UserError(f"{inputs['checkpoint'] / CHECKPOINT_TARBALL}: holds no {CHECKPOINT_FOLDER}/{missing[0]}, which --load reads")
        if not (out_dir / CHECKPOINT_FOLDER).is_dir():
            raise UserError(f"{inputs['checkpoint'] / CHECKPOINT_TARBALL}: holds no folder {CHECKPOINT_FOLDER}/ (README.md:68)")
        return {"scale": scale, "members": len(members)}
    raise UserError(f"gpt3: unknown shard {shard!r}; known: {', '.join(SHARDS)}")
