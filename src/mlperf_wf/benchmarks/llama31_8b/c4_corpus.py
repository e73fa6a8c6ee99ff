"""Seeded stand-in of the preprocessed C4 (Llama 3.1 tokenizer) in the Megatron indexed-dataset format.

The published dataset is two Megatron/NeMo mmap indexed datasets, ``c4-train.en_6_text_document`` and
``c4-validation-91205-samples.en_text_document`` (a ``.bin`` of token ids and an ``.idx`` of document
sizes and offsets each), plus ``LICENSE.txt``/``NOTICE.txt``. The tiny stand-in has the same six file
names, written by megatron-core's own ``IndexedDatasetBuilder`` (the reader the reference uses), with
the documents tokenized by the tiny tokenizer (``tokenizer.py``) as the real ones were by Llama's.

How hard the task is, and why: the text is a first-order Markov chain over 256 symbols, each with
``successors`` possible next symbols drawn with Dirichlet(1) probabilities. Its entropy rate (about
3.06 nats per token with 32 successors) is the best log perplexity any model can reach; the unigram
entropy (about 5.5 nats) is what a model that ignores context reaches. The llama31_8b target, 3.3,
lies between them: a run reaches it only by learning the transition structure from the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlperf_wf.benchmarks.llama31_8b import tokenizer

TRAIN_PREFIX = "c4-train.en_6_text_document"
VALIDATION_PREFIX = "c4-validation-91205-samples.en_text_document"


@dataclass(frozen=True)
class CorpusShape:
    """Sizes and difficulty of the generated corpus."""

    successors: int = 32
    """Next symbols each symbol can have (fewer: a lower entropy rate, an easier target)."""
    train_documents: int = 4_000
    """Training documents."""
    validation_documents: int = 400
    """Validation documents."""
    document_tokens: tuple[int, int] = (200, 800)
    """Range of document lengths in tokens."""


def transitions(seed: int, shape: CorpusShape = CorpusShape()) -> np.ndarray:
    """The chain's transition matrix (rows sum to 1; ``successors`` non-zero entries per row)."""
    rng = np.random.default_rng(seed)
    matrix = np.zeros((tokenizer.SYMBOLS, tokenizer.SYMBOLS))
    for row in range(tokenizer.SYMBOLS):
        nexts = rng.choice(tokenizer.SYMBOLS, size=shape.successors, replace=False)
        matrix[row, nexts] = rng.dirichlet(np.ones(shape.successors))
    return matrix


def stationary(matrix: np.ndarray) -> np.ndarray:
    """The chain's stationary distribution."""
    values, vectors = np.linalg.eig(matrix.T)
    pi = np.real(vectors[:, np.argmin(np.abs(values - 1.0))])
    return pi / pi.sum()


def entropy_rate(matrix: np.ndarray) -> float:
    """Nats per token of the chain: the lowest log perplexity a model can reach."""
    with np.errstate(divide="ignore", invalid="ignore"):
        row_entropy = -np.nansum(np.where(matrix > 0, matrix * np.log(matrix), 0.0), axis=1)
    return float(stationary(matrix) @ row_entropy)


def unigram_entropy(matrix: np.ndarray) -> float:
    """Nats per token of a model that ignores context (the stationary distribution's entropy)."""
    pi = stationary(matrix)
    return float(-(pi[pi > 0] * np.log(pi[pi > 0])).sum())


def documents(matrix: np.ndarray, count: int, lengths: tuple[int, int], rng: np.random.Generator) -> list[list[int]]:
    """``count`` symbol sequences of the chain, each started from the stationary distribution."""
    pi = stationary(matrix)
    cumulative = np.cumsum(matrix, axis=1)
    out = []
    for _ in range(count):
        length = int(rng.integers(lengths[0], lengths[1] + 1))
        state = int(rng.choice(tokenizer.SYMBOLS, p=pi))
        draws = rng.random(length)
        sequence = [state]
        for u in draws[1:]:
            state = min(int(np.searchsorted(cumulative[state], u)), tokenizer.SYMBOLS - 1)
            sequence.append(state)
        out.append(sequence)
    return out


def write_indexed(prefix: Path, token_documents: list[list[int]]) -> list[Path]:
    """``prefix.bin``/``prefix.idx`` with megatron-core's builder (int32 ids, one document each)."""
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.int32)
    for ids in token_documents:
        builder.add_document(torch.tensor(ids, dtype=torch.int32), [len(ids)])
    builder.finalize(f"{prefix}.idx")
    return [Path(f"{prefix}.bin"), Path(f"{prefix}.idx")]


def generate(out_dir: Path, seed: int, shape: CorpusShape = CorpusShape()) -> list[Path]:
    """Write the six files; each document is written as text, then tokenized without BOS/EOD."""
    out_dir.mkdir(parents=True, exist_ok=True)
    matrix = transitions(seed, shape)
    rng = np.random.default_rng(seed + 1)
    encoder = tokenizer.build()
    written = []
    for prefix, count in ((TRAIN_PREFIX, shape.train_documents), (VALIDATION_PREFIX, shape.validation_documents)):
        texts = [" ".join(tokenizer.symbol(s) for s in doc) for doc in documents(matrix, count, shape.document_tokens, rng)]
        # as the reference's preprocess_data_for_megatron.py: int32, one item per document, no BOS and no EOD
        token_documents = encoder(texts, add_special_tokens=False)["input_ids"]
        written += write_indexed(out_dir / prefix, token_documents)
    for name in ("LICENSE.txt", "NOTICE.txt"):
        (out_dir / name).write_text(
            f"Tiny stand-in of the preprocessed C4 (mlperf-workflow tiny tier, seed {seed}): a Markov chain with entropy rate "
            f"{entropy_rate(matrix):.3f} nats/token, not C4 text.\n"
        )
        written.append(out_dir / name)
    return sorted(written)
