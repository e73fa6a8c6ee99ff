"""Data preparation for llama31_8b.

MLCommons publishes C4 already tokenized with the Llama 3.1 tokenizer as Megatron indexed datasets
(the reference's own ``preprocess_data_for_megatron.py`` output), and the reference reads those files
as they are (``--blend_per_split`` of ``c4-train.en_6_text_document`` and
``c4-validation-91205-samples.en_text_document``). Preparation therefore opens each pair with
megatron-core's reader (which checks the ``.idx`` header, version and dtype) and hard-links the verified
files into one shard (a symlink would dangle in a container that mounts only the prepared folder).
The same at both scales: the tiny corpus is written in the same format.
"""

from __future__ import annotations

from mlperf_wf.language_models import indexed_datasets
from mlperf_wf.language_models.c4_corpus import TRAIN_PREFIX, VALIDATION_PREFIX

PREPARATION = indexed_datasets.LinkedPreparation("llama31_8b", (TRAIN_PREFIX, VALIDATION_PREFIX))
shards, layout, prepare_shard = PREPARATION.shards, PREPARATION.layout, PREPARATION.prepare_shard
