"""Data preparation for gpt_oss_20b.

The reference reads the llama31_8b benchmark's published C4 (pre-tokenized with the Llama 3.1 tokenizer,
Megatron indexed datasets) as it is: ``train_data_path: "10 /data/c4-train.en_6_text_document"`` and
``valid_data_path``/``test_data_path: /data/c4-validation-91205-samples.en_text_document``
(conf/gpt_oss_20B-pretrain-nvidia.yaml). Preparation is therefore llama31_8b's: open each pair with
megatron-core's reader (header, version, dtype checked) and hard-link the verified files into one shard.
The same at both scales: the tiny corpus is written in the same format.
"""

from __future__ import annotations

from mlperf_wf.language_models import indexed_datasets
from mlperf_wf.language_models.c4_corpus import TRAIN_PREFIX, VALIDATION_PREFIX

PREPARATION = indexed_datasets.LinkedPreparation("gpt_oss_20b", (TRAIN_PREFIX, VALIDATION_PREFIX))
shards, layout, prepare_shard = PREPARATION.shards, PREPARATION.layout, PREPARATION.prepare_shard
