"""Seeded stand-in of C4 tokenized with the Mixtral 8x22B tokenizer, in the Megatron indexed-dataset format.

The published dataset (catalog ``c4_mixtral_8x22b_preprocessed``) is eleven Megatron mmap indexed datasets:
eight training partitions ``c4-train.en_{0..7}_text_document`` and three validation files, of which the
reference reads ``c4-validation-91205-samples.en_text_document`` (pretrain_llama31.py:221-226); it trains on
``c4-train.en_6`` and ``c4-train.en_7`` blended 50/50 (pretrain_llama31.py:214-217: "the last 256 of 1024
shards", README.md:97; all eight only with ``--use_full_dataset``). The stand-in writes all 22 published file
names with megatron-core's ``IndexedDatasetBuilder`` (``language_models.markov_corpus``), int32 ids without
BOS/EOD; the two read training partitions and the read validation file are full size for the tiny tier, the
others hold a few documents (nothing reads them).

How hard, and why: a first-order Markov chain over 1024 symbols with 32 successors each (Dirichlet(1)):
entropy rate 3.06 nats/token, unigram entropy 6.90 (seed 405). The target, log perplexity 5.6 (the same in
the closed and open rules of 6.0.0), lies between them: a model that ignores context (or one trained on
shuffled tokens) stays near 6.9, an untrained one near ln(1026) = 6.93; a run reaches 5.6 only by learning
the transitions from the data (tests/benchmarks/llama31_405b/test_llama31_405b.py measures both).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlperf_wf.benchmarks.llama31_405b import tokenizer
from mlperf_wf.language_models import markov_corpus, symbol_tokenizer

TRAIN_PREFIXES = tuple(f"c4-train.en_{index}_text_document" for index in range(8))
"""The eight published training partitions."""
READ_TRAIN_PREFIXES = TRAIN_PREFIXES[6:]
"""The partitions the reference trains on without ``--use_full_dataset`` (pretrain_llama31.py:217)."""
VALIDATION_PREFIX = "c4-validation-91205-samples.en_text_document"
"""The validation file the reference evaluates on (its first 5760 sequences, unshuffled)."""
OTHER_VALIDATION_PREFIXES = ("c4-validation-small.en_text_document", "c4-validation.en_text_document")
"""Published but not read by the reference."""
SHAPE = markov_corpus.CorpusShape(symbols=tokenizer.SYMBOLS, successors=32, concentration=1.0, document_tokens=(200, 800))
"""Entropy rate 3.06, unigram 6.90 nats/token at seed 405."""
READ_TRAIN_DOCUMENTS = 300
"""Documents in each read training partition (about 150k tokens each: the tiny runs reach the target within one pass)."""
VALIDATION_DOCUMENTS = 60
"""Documents of the validation file (about 30k tokens: more than the tiny tier's 64 evaluation sequences of 129)."""
UNREAD_DOCUMENTS = 8
"""Documents in each file the reference does not read (the published name, in the published format)."""


def documents_per_file() -> dict[str, int]:
    """How many documents each of the eleven indexed datasets holds."""
    counts = {prefix: (READ_TRAIN_DOCUMENTS if prefix in READ_TRAIN_PREFIXES else UNREAD_DOCUMENTS) for prefix in TRAIN_PREFIXES}
    counts[VALIDATION_PREFIX] = VALIDATION_DOCUMENTS
    counts.update(dict.fromkeys(OTHER_VALIDATION_PREFIXES, UNREAD_DOCUMENTS))
    return counts


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write the 22 files; each document is written as text, then tokenized without BOS/EOD (as the reference's
    ``preprocess.sh`` output)."""
    encoder = tokenizer.build()
    out_dir.mkdir(parents=True, exist_ok=True)
    matrix = markov_corpus.transitions(seed, SHAPE)
    rng = np.random.default_rng(seed + 1)
    counts = documents_per_file()
    # One draw of every document (documents are independent), then split in file order.
    remaining = markov_corpus.documents(matrix, sum(counts.values()), SHAPE.document_tokens, rng)
    written: list[Path] = []
    for prefix, count in counts.items():
        chosen, remaining = remaining[:count], remaining[count:]
        texts = [" ".join(symbol_tokenizer.symbol(s) for s in doc) for doc in chosen]
        written += markov_corpus.write_indexed(out_dir / prefix, encoder(texts, add_special_tokens=False)["input_ids"])
    return sorted(written)
