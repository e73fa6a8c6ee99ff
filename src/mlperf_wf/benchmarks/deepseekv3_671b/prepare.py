"""Data preparation for deepseekv3_671b.

The reference reads the same published files as llama31_8b: MLCommons' C4 tokenized with the Llama 3.1
tokenizer as Megatron indexed datasets (README.md:72 points at the llama-3-1-8b preprocessed C4 ``.uri``), and
opens two of them as they are from ``PREPROCESSED_PATH`` (default ``/preproc_data``):
``c4-train.en_6_text_document`` for training and ``c4-validation-91205-samples.en_text_document`` for
validation and test (pretrain_deepseek_v3_671b.py:53-62). Preparation opens each pair with megatron-core's
reader (which checks the ``.idx`` header, version and dtype) and hard-links the verified files into one shard.
Megatron-Bridge builds its sample index at run time in ``/npy_index`` (path_to_cache, :70). The same at both
scales: the tiny corpus is llama31_8b's generator, in the same format.
"""

from __future__ import annotations

from mlperf_wf.language_models import indexed_datasets
from mlperf_wf.language_models.c4_corpus import TRAIN_PREFIX, VALIDATION_PREFIX

PREPARATION = indexed_datasets.LinkedPreparation("deepseekv3_671b", (TRAIN_PREFIX, VALIDATION_PREFIX))
shards, layout, prepare_shard = PREPARATION.shards, PREPARATION.layout, PREPARATION.prepare_shard
