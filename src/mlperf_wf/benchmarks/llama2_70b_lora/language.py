"""A seeded synthetic language shared by every tiny-scale LLM dataset.

The tiny GovReport-like reports and the corpus that pretrains the tiny base
checkpoint are written in the same made-up language, as the real GovReport
reports and Llama-2's pretraining data are both English. Each report is about
one of a few *subjects* (think: the agency a report audits); a subject has a
one-word name and a set of words its reports use more often. The language is
fixed by ``LANGUAGE_SEED`` so the checkpoint's tokenizer covers the reports.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

LANGUAGE_SEED = 20240
"""Seed of the lexicon and subjects; changing it changes every tiny LLM dataset and checkpoint."""

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "sh", "tr", "st"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou"]
_CODAS = ["", "", "", "n", "r", "s", "l", "m"]


@dataclass(frozen=True)
class Subject:
    """What a report is about."""

    name: str
    """One capitalised word naming the subject."""
    words: tuple[str, ...]
    """Words that reports on this subject use often."""


@dataclass(frozen=True)
class Language:
    """The words and subjects of the synthetic language."""

    words: tuple[str, ...]
    """General vocabulary."""
    subjects: tuple[Subject, ...]
    """Report subjects."""


def _pseudo_words(rng: random.Random, count: int, taken: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < count:
        syllables = rng.choice([1, 2, 2, 3])
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))
        if word not in taken:
            taken.add(word)
            out.append(word)
    return out


def make_language(n_words: int = 240, n_subjects: int = 48, words_per_subject: int = 16, seed: int = LANGUAGE_SEED) -> Language:
    """Build the vocabulary and the subjects (names use words outside the vocabulary)."""
    rng = random.Random(seed)
    taken: set[str] = set()
    words = _pseudo_words(rng, n_words, taken)
    names = _pseudo_words(rng, n_subjects, taken)
    subjects = tuple(Subject(name=name.capitalize(), words=tuple(rng.sample(words, words_per_subject))) for name in names)
    return Language(words=tuple(words), subjects=subjects)


def make_sentence(rng: random.Random, language: Language, subject: Subject, subject_share: float) -> str:
    """One sentence: 3-6 words, each from the subject's words with probability ``subject_share``."""
    words = [rng.choice(subject.words) if rng.random() < subject_share else rng.choice(language.words) for _ in range(rng.randint(3, 6))]
    words[0] = words[0].capitalize()
    return " ".join(words) + "."


def make_report(rng: random.Random, language: Language, subject: Subject, subject_share: float = 0.5) -> str:
    """A report body: 4-6 sentences about ``subject``."""
    return " ".join(make_sentence(rng, language, subject, subject_share) for _ in range(rng.randint(4, 6)))
