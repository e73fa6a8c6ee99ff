"""Data preparation for gpt3.

MLCommons publishes the gpt3 C4 already tokenized with the benchmark's SentencePiece model as Megatron
indexed datasets (``preprocessed_c4_spm/``: the output of the reference's own scripts/preprocess.sh and
preprocess_val.sh, NeMo's ``preprocess_data_for_megatron.py``), and the reference reads those files as they
are: ``--train-data-path 0.5 c4_en_6... 0.5 c4_en_7...`` and ``--valid-data-path 1.00 c4_en_validation_subset...``
under ``COM_DIR`` (run_gpt3.sh:29-33, 73-74). Preparation therefore opens each pair with megatron-core's
reader (which checks the ``.idx`` header, version and dtype) and hard-links the verified files into one shard
(a symlink would dangle in a container that mounts only the prepared folder); Megatron builds its sample
index at run time. The same at both scales: the tiny corpus is written in the same format. Re-running from
the raw C4 (README.md:196-246) is the optional path the reference documents; it is not needed here.
"""

from __future__ import annotations

from mlperf_wf.benchmarks.gpt3.c4_corpus import TRAIN_PREFIXES, VALIDATION_PREFIX
from mlperf_wf.language_models import indexed_datasets

PREPARATION = indexed_datasets.LinkedPreparation("gpt3", (*TRAIN_PREFIXES, VALIDATION_PREFIX))
shards, layout, prepare_shard = PREPARATION.shards, PREPARATION.layout, PREPARATION.prepare_shard
