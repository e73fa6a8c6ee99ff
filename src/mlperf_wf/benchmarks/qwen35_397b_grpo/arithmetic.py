"""The tiny tier's tasks: two-digit additions with a verifiable three-digit answer.

A task is ``ab+cd=`` and its answer is the sum written with three digits (``12+34=`` -> ``046``), so every
prompt is 7 tokens (with the BOS) and every completion exactly 3: no padding and no end token are needed. The
10,000 ordered pairs are split once, by a fixed seed, into the held-out validation tasks (the tiny stand-in of
the reference's 256 held-out R2E-Gym tasks, trimmed to the 251 the 6.1.0 rules log), a probe set the base
policy's supervised warm-up stops on, and the rest, which the warm-up and the RL training draw from. The
split is a property of the task family, so the dataset generator, the base-policy generator and the
preparation agree on it without reading each other's files.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

DIGITS = "0123456789"
BOS = "<s>"
VOCABULARY = (*DIGITS, "+", "=", BOS)
"""The 13 tokens: digits, ``+``, ``=`` and the beginning-of-sequence token."""
ANSWER_DIGITS = 3
"""Every answer is written with three digits (leading zeros kept)."""
VALIDATION_TASKS = 251
"""Held-out tasks: the 6.1.0 rules check ``eval_samples == 251``."""
PROBE_TASKS = 500
"""Held-out tasks the base policy's warm-up measures its pass@4 on (never RL-trained on, never validated on)."""
SPLIT_SEED = 20260710
"""Seed of the one split of all pairs (the reference's curriculum seed, for no deeper reason)."""


@dataclass(frozen=True)
class Task:
    """One addition ``left + right``."""

    left: int
    """First addend (0-99)."""
    right: int
    """Second addend (0-99)."""

    @property
    def instance_id(self) -> str:
        """Stable id in R2E-Gym's ``<repo>__<name>-<n>`` style."""
        return f"tiny-arith__add-{self.left:02d}{self.right:02d}"

    @property
    def prompt(self) -> str:
        """The prompt text, e.g. ``12+34=``."""
        return f"{self.left:02d}+{self.right:02d}="

    @property
    def answer(self) -> str:
        """The exact answer the verifier accepts, e.g. ``046``."""
        return f"{self.left + self.right:03d}"


def all_tasks() -> list[Task]:
    """Every pair, in a fixed order."""
    return [Task(a, b) for a in range(100) for b in range(100)]


@cache
def split() -> dict[str, tuple[Task, ...]]:
    """``validation``, ``probe`` and ``train`` tasks: disjoint, fixed by ``SPLIT_SEED``."""
    tasks = all_tasks()
    random.Random(SPLIT_SEED).shuffle(tasks)
    return {
        "validation": tuple(tasks[:VALIDATION_TASKS]),
        "probe": tuple(tasks[VALIDATION_TASKS : VALIDATION_TASKS + PROBE_TASKS]),
        "train": tuple(tasks[VALIDATION_TASKS + PROBE_TASKS :]),
    }


def parse_prompt(text: str) -> Task:
    """The task of a prompt ``ab+cd=``; a clear error for anything else."""
    if len(text) != 6 or text[2] != "+" or text[5] != "=" or not (text[:2] + text[3:5]).isdigit():
        raise ValueError(f"not a tiny addition prompt: {text!r} (expected 'ab+cd=')")
    return Task(int(text[:2]), int(text[3:5]))


def reward(completion: str, expected: str) -> float:
    """The verifier: 1 when the completion is exactly the expected answer, else 0 (the reference's binary reward)."""
    return 1.0 if completion == expected else 0.0
