"""Data preparation for llama31_405b.

MLCommons publishes C4 already tokenized with the Mixtral 8x22B tokenizer as Megatron indexed datasets (the
output of the reference's ``utils/consolidate_data.sh`` then ``utils/preprocess.sh``, README.md:198-226), and
the reference reads three of them as they are from ``/preproc_data`` (pretrain_llama31.py:214-226):
``c4-train.en_6`` and ``c4-train.en_7`` (50/50) and ``c4-validation-91205-samples.en``. Preparation opens
each with megatron-core's reader (which checks the ``.idx`` header, version and dtype) and hard-links the
verified pair into its own shard (a symlink would dangle in a container that mounts only the prepared
folder). One shard per dataset: a killed preparation redoes only the shards it had not finished. The same at
both scales: the tiny corpus is written in the same format.

NeMo builds its sample index (document, sample and shuffle indices) at run time, in the reference's
``/npy_index`` (``index_mapping_dir``, pretrain_llama31.py:237; config.sh:40-42: "must be able to hold >400GB");
the full-scale runs put it in the run's folder (README "Full scale").
"""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.benchmarks.llama31_405b.c4_corpus import READ_TRAIN_PREFIXES, VALIDATION_PREFIX
from mlperf_wf.errors import UserError
from mlperf_wf.language_models import indexed_datasets

SHARDS = {"train_6": READ_TRAIN_PREFIXES[0], "train_7": READ_TRAIN_PREFIXES[1], "validation": VALIDATION_PREFIX}
"""Shard name -> the indexed dataset it prepares."""


def shards(scale: str) -> list[str]:
    """One shard per dataset the reference reads."""
    return list(SHARDS)


def layout(scale: str) -> dict[str, str]:
    """The folder the trainer and the reference's ``/preproc_data`` read: file -> shard file."""
    files = {f"{prefix}.{suffix}": f"{shard}/{prefix}.{suffix}" for shard, prefix in SHARDS.items() for suffix in ("bin", "idx")}
    files.update({f"prepared-{shard}.json": f"{shard}/prepared.json" for shard in SHARDS})
    return files


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Check one indexed dataset with megatron-core's reader and link it into ``out_dir``."""
    if shard not in SHARDS:
        raise UserError(f"llama31_405b: unknown shard {shard!r}; known: {', '.join(SHARDS)}")
    return indexed_datasets.check_and_link(inputs["data"], [SHARDS[shard]], out_dir, scale)
