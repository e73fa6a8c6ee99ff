"""Seeded stand-in of the preprocessed C4 (Llama 3.1 tokenizer) in the Megatron indexed-dataset format.

The published dataset is two Megatron/NeMo mmap indexed datasets, ``c4-train.en_6_text_document`` and
``c4-validation-91205-samples.en_text_document``, plus ``LICENSE.txt``/``NOTICE.txt``. The stand-in has the
same six file names, written by megatron-core's ``IndexedDatasetBuilder`` (``language_models.markov_corpus``),
with the documents tokenized by the tiny tokenizer (``llama31_tokenizer.py``) as the real ones were by Llama's.

How hard, and why: a first-order Markov chain over 256 symbols with 3 successors each (Dirichlet(1)):
entropy rate 0.81 nats/token, unigram entropy 5.14 (seed 5200). The target the tiny runs are checked
against is mlperf-logging's open-division rule for llama31_8b, ``eval_accuracy < 1.0`` (a placeholder in
every round's ``open_llama31_8b.yaml``; the closed target is 3.3): both lie between the two entropies, so a
run meets them only by learning the transitions from the data, and a run that meets 1.0 has met 3.3 on the
way. See llama31_8b's README. gpt_oss_20b and deepseekv3_671b read the same published files, so the stand-in
lives here, beside the trainer they share.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf.language_models import llama31_tokenizer as tokenizer
from mlperf_wf.language_models import markov_corpus, symbol_tokenizer

if TYPE_CHECKING:  # the preparations read the file names on every Snakemake parse: torch loads where a run trains
    from mlperf_wf.language_models.causal_trainer import Corpus

TRAIN_PREFIX = "c4-train.en_6_text_document"
VALIDATION_PREFIX = "c4-validation-91205-samples.en_text_document"
SHAPE = markov_corpus.CorpusShape(symbols=tokenizer.SYMBOLS, successors=3)
"""Entropy rate 0.81, unigram 5.14 nats/token at seed 5200."""


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write the six files; each document is written as text, then tokenized without BOS/EOD."""
    encoder = tokenizer.build()

    def tokenize(texts: list[str]) -> list[list[int]]:
        return encoder(texts, add_special_tokens=False)["input_ids"]

    written, matrix = markov_corpus.generate_split_pair(out_dir, seed, SHAPE, (TRAIN_PREFIX, VALIDATION_PREFIX), tokenize, symbol_tokenizer.symbol)
    for name in ("LICENSE.txt", "NOTICE.txt"):
        (out_dir / name).write_text(markov_corpus.describe(matrix, seed, "the Llama 3.1 preprocessed C4"))
        written.append(out_dir / name)
    return sorted(written)


def corpus(data_dir: Path) -> Corpus:
    """The prepared files a run reads: c4-train.en_6 and the 91,205-sample validation file."""
    from mlperf_wf.language_models import causal_trainer

    return causal_trainer.Corpus((str(data_dir / TRAIN_PREFIX),), str(data_dir / VALIDATION_PREFIX))
