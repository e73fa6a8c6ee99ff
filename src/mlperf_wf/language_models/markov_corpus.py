"""Seeded Markov-chain corpora in the Megatron/NeMo indexed-dataset format the LLM references read.

The pretraining references read C4 already tokenized into Megatron mmap indexed datasets (a ``.bin`` of
token ids and an ``.idx`` of document sizes and offsets). The tiny stand-ins are written by megatron-core's
own ``IndexedDatasetBuilder`` (the reader the references use), one document per item and, as the
references' ``preprocess_data_for_megatron.py`` output, without BOS/EOD tokens.

How hard the task is, and why: the text is a first-order Markov chain over ``symbols`` symbols, each with
``successors`` possible next symbols drawn with Dirichlet(``concentration``) probabilities. Its entropy rate
is the best log perplexity any model can reach; the unigram entropy is what a model that ignores context
reaches. A benchmark picks a shape whose two entropies bracket its target, so a run reaches the target
only by learning the transition structure from the data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class CorpusShape:
    """Sizes and difficulty of a generated corpus."""

    symbols: int = 256
    """Distinct symbols (token ids 0..symbols-1)."""
    successors: int = 32
    """Next symbols each symbol can have (fewer: a lower entropy rate, an easier target)."""
    concentration: float = 1.0
    """Dirichlet concentration of each row's probabilities (lower: more skewed rows, a lower entropy rate)."""
    train_documents: int = 4_000
    """Training documents."""
    validation_documents: int = 400
    """Validation documents."""
    document_tokens: tuple[int, int] = (200, 800)
    """Range of document lengths in tokens."""


def transitions(seed: int, shape: CorpusShape) -> np.ndarray:
    """The chain's transition matrix (rows sum to 1; ``successors`` non-zero entries per row)."""
    rng = np.random.default_rng(seed)
    matrix = np.zeros((shape.symbols, shape.symbols))
    for row in range(shape.symbols):
        nexts = rng.choice(shape.symbols, size=shape.successors, replace=False)
        matrix[row, nexts] = rng.dirichlet(np.full(shape.successors, shape.concentration))
    return matrix


def stationary(matrix: np.ndarray) -> np.ndarray:
    """The chain's stationary distribution (power iteration; a full eigendecomposition if it does not settle:
    eig of a 1024-symbol chain takes 5-25 s on a busy 2-core machine, and every documents() call needs it)."""
    pi = np.full(len(matrix), 1.0 / len(matrix))
    for _ in range(10_000):
        following = pi @ matrix
        if np.abs(following - pi).max() < 1e-13:
            return following / following.sum()
        pi = following
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
    symbols = len(matrix)
    pi = stationary(matrix)
    cumulative = np.cumsum(matrix, axis=1)
    out = []
    for _ in range(count):
        length = int(rng.integers(lengths[0], lengths[1] + 1))
        state = int(rng.choice(symbols, p=pi))
        draws = rng.random(length)
        sequence = [state]
        for u in draws[1:]:
            state = min(int(np.searchsorted(cumulative[state], u)), symbols - 1)
            sequence.append(state)
        out.append(sequence)
    return out


def write_indexed(prefix: Path, token_documents: Sequence[Sequence[int]], dtype: type = np.int32) -> list[Path]:
    """``prefix.bin``/``prefix.idx`` with megatron-core's builder (one document each). Each document goes in as a NumPy
    array, which the builder converts to ``dtype`` as it would a tensor, without NumPy 2's deprecation warning for a
    tensor's ``__array__``."""
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    given = {np.int32: np.int32, np.uint16: np.int32, np.int64: np.int64}[dtype]
    builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=dtype)
    for ids in token_documents:
        builder.add_document(np.array(list(ids), dtype=given), [len(ids)])
    builder.finalize(f"{prefix}.idx")
    return [Path(f"{prefix}.bin"), Path(f"{prefix}.idx")]


def generate_split_pair(
    out_dir: Path,
    seed: int,
    shape: CorpusShape,
    prefixes: tuple[str, str],
    tokenize: Callable[[list[str]], list[list[int]]],
    symbol: Callable[[int], str],
    dtype: type = np.int32,
) -> tuple[list[Path], np.ndarray]:
    """Write the training and validation pairs under ``prefixes``: documents as text, then ``tokenize``d.

    Returns the files and the transition matrix (for the license note's entropy figures)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    matrix = transitions(seed, shape)
    rng = np.random.default_rng(seed + 1)
    written: list[Path] = []
    for prefix, count in zip(prefixes, (shape.train_documents, shape.validation_documents), strict=True):
        texts = [" ".join(symbol(s) for s in doc) for doc in documents(matrix, count, shape.document_tokens, rng)]
        written += write_indexed(out_dir / prefix, tokenize(texts), dtype)
    return written, matrix


def describe(matrix: np.ndarray, seed: int, what: str) -> str:
    """One line for the stand-in's license/notice files: what it is and how hard it is."""
    return (
        f"Tiny stand-in of {what} (mlperf-workflow tiny tier, seed {seed}): a first-order Markov chain over "
        f"{len(matrix)} symbols with entropy rate {entropy_rate(matrix):.3f} nats/token and unigram entropy "
        f"{unigram_entropy(matrix):.3f}, not real text.\n"
    )


def windows(prefix: str, length: int) -> "torch.Tensor":  # noqa: F821, UP037 - torch is imported lazily
    """Every ``length + 1`` token window of the concatenated documents, in file order.

    The extra token is the last target, as megatron-core's GPTDataset ``add_extra_token_to_sequence``."""
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    data = IndexedDataset(prefix)
    stream = np.concatenate([data[i] for i in range(len(data))]).astype(np.int64)
    count = (len(stream) - 1) // length
    if count < 1:
        raise ValueError(f"{prefix}: {len(stream)} tokens are fewer than one window of {length + 1}")
    return torch.from_numpy(np.lib.stride_tricks.sliding_window_view(stream, length + 1)[::length][:count].copy())
