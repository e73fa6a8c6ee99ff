"""The seeded Markov "language" of the tiny tier: its words, its vocabulary file and its articles.

Why this text: a first-order Markov chain over ``WORDS`` words, each with ``SUCCESSORS`` possible
next words drawn with Dirichlet(1) probabilities, makes masked-LM accuracy a real learning signal.
A model that ignores context predicts masked words at about the unigram level (0.1-0.2); one that
uses both neighbours can reach about 0.96 (the Bayes oracle); BERT's target, 0.720, lies between
and is reached only once attention has learnt the transitions (tiny-scale notes, section 3).
"""

from __future__ import annotations

import numpy as np

WORDS = 128
"""Distinct words of the language (V)."""
SUCCESSORS = 4
"""Possible next words of each word (K)."""
LANGUAGE_SEED = 1200
"""Seed of the transition matrix: the one language that the text parts, the eval text and the phase-1 checkpoint's text share."""
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
"""BERT's special tokens; ``[PAD]`` is id 0 as in the real vocab.txt, which the reference pads with."""


def word(index: int) -> str:
    """The text of word ``index`` (lower case and unpunctuated: one WordPiece token each)."""
    return f"w{index:03d}"


def vocabulary() -> list[str]:
    """vocab.txt's lines: the special tokens, then the words (line number = token id)."""
    return [*SPECIAL_TOKENS, *(word(i) for i in range(WORDS))]


def transitions() -> np.ndarray:
    """The language: a row-stochastic ``WORDS x WORDS`` matrix with ``SUCCESSORS`` non-zero entries per row."""
    rng = np.random.default_rng(LANGUAGE_SEED)
    matrix = np.zeros((WORDS, WORDS))
    for row in range(WORDS):
        nexts = rng.choice(WORDS, size=SUCCESSORS, replace=False)
        matrix[row, nexts] = rng.dirichlet(np.ones(SUCCESSORS))
    return matrix


def walk(matrix: np.ndarray, length: int, rng: np.random.Generator) -> np.ndarray:
    """``length`` words of the chain from a uniformly drawn first word."""
    cumulative = np.cumsum(matrix, axis=1)
    draws = rng.random(length)
    out = np.empty(length, dtype=np.int64)
    state = int(rng.integers(WORDS))
    out[0] = state
    for i in range(1, length):
        state = min(int(np.searchsorted(cumulative[state], draws[i])), WORDS - 1)
        out[i] = state
    return out


def article(matrix: np.ndarray, sentences: tuple[int, int], words: tuple[int, int], rng: np.random.Generator) -> list[str]:
    """One article: one continuous walk of the chain cut into sentences (one per line, as the published text)."""
    lengths = rng.integers(words[0], words[1] + 1, size=int(rng.integers(sentences[0], sentences[1] + 1)))
    stream = walk(matrix, int(lengths.sum()), rng)
    lines, start = [], 0
    for length in lengths:
        lines.append(" ".join(word(int(w)) for w in stream[start : start + length]))
        start += int(length)
    return lines
