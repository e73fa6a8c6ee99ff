"""Seeded GovReport-like summarisation data for the tiny llama2_70b_lora tier.

Each example is a report about one subject and a summary that names the
subject ("<Subject>."), the gist a GovReport summary leads with. The name never appears
in the report: a model has to infer the subject from the report's wording, a
capability the tiny base checkpoint has from pretraining, and learn the new
prompt/summary format, which is what the LoRA adapter is for.

Files are written like the raw SCROLLS gov_report parquet (columns ``input``
and ``output``), one train and one validation shard.
"""

from __future__ import annotations

import random
from pathlib import Path

import pandas as pd

from mlperf_wf.benchmarks.llama2_70b_lora.language import Subject, make_language, make_report


def summarise(subject: Subject) -> str:
    """The reference summary of a report on ``subject``."""
    return f"{subject.name}."


def generate_split(n_examples: int, seed: int) -> pd.DataFrame:
    """``n_examples`` (report, summary) pairs drawn with ``seed``."""
    rng = random.Random(seed)
    language = make_language()
    rows = []
    for _ in range(n_examples):
        subject = rng.choice(language.subjects)
        rows.append({"input": make_report(rng, language, subject), "output": summarise(subject)})
    return pd.DataFrame(rows)


def generate(out_dir: Path, seed: int, n_train: int = 4096, n_validation: int = 256) -> list[Path]:
    """Write the train and validation shards into ``out_dir``; return their paths.

    Validation is drawn with a different seed, so no report is shared.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for split, n, split_seed in (("train", n_train, seed), ("validation", n_validation, seed + 1_000_003)):
        path = out_dir / f"{split}-00000-of-00001.parquet"
        generate_split(n, split_seed).to_parquet(path, index=False)
        paths.append(path)
    return paths
