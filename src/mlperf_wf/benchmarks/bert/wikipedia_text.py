"""Seeded stand-in of ``bert_wikipedia_preprocessed``, in the layout MLCommons publishes.

The published dataset (R2 ``bert-preprocessed-wikipedia-dataset``) holds ``results_text.tar.gz``
and ``results_text.zip`` (the same tree twice), ``bert_reference_results_text_md5.txt`` and
``License.txt``. The archive's ``results/`` folder holds ``part-00000-of-00500`` ...
``part-00499-of-00500`` and ``eval.txt``: "one sentence of an article in one line and different
articles separated by blank line" (reference README.md:57-72), plus ``eval.md5``. The stand-in
writes the same files with ``TRAIN_PARTS`` parts of Markov-language articles (``markov.py``);
the reference's ``create_pretraining_data.py`` step turns them into TFRecords in preparation.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlperf_wf.benchmarks.bert import markov

ARCHIVE_ROOT = "results"
"""Folder inside both archives (the reference's ``./results`` directory)."""
EVAL_FILE = "eval.txt"


@dataclass(frozen=True)
class TextShape:
    """Sizes of the generated text."""

    train_parts: int = 4
    """Training part files (the real dataset has 500)."""
    articles_per_part: int = 250
    """Articles per training part."""
    eval_articles: int = 120
    """Articles of eval.txt."""
    sentences_per_article: tuple[int, int] = (8, 24)
    """Range of sentences per article."""
    words_per_sentence: tuple[int, int] = (6, 24)
    """Range of words per sentence."""


def part_name(index: int, count: int) -> str:
    """``part-00007-of-00500``, the published naming."""
    return f"part-{index:05d}-of-{count:05d}"


def text_files(seed: int, shape: TextShape = TextShape()) -> dict[str, bytes]:
    """``results/<name>`` -> content of every text file of the archive."""
    rng = np.random.default_rng(seed)
    matrix = markov.transitions()
    files: dict[str, bytes] = {}
    names = [part_name(i, shape.train_parts) for i in range(shape.train_parts)] + [EVAL_FILE]
    for name in names:
        count = shape.eval_articles if name == EVAL_FILE else shape.articles_per_part
        articles = ["\n".join(markov.article(matrix, shape.sentences_per_article, shape.words_per_sentence, rng)) for _ in range(count)]
        files[f"{ARCHIVE_ROOT}/{name}"] = ("\n\n".join(articles) + "\n").encode()
    # eval.md5 in the published tree lists one md5 per eval line; the stand-in keeps that role for its eval.txt
    eval_lines = files[f"{ARCHIVE_ROOT}/{EVAL_FILE}"].decode().splitlines()
    files[f"{ARCHIVE_ROOT}/eval.md5"] = "".join(hashlib.md5(line.encode()).hexdigest() + "\n" for line in eval_lines if line).encode()
    return files


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write the four published files for the seeded text."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = text_files(seed)
    with tarfile.open(out_dir / "results_text.tar.gz", "w:gz") as archive:
        for name, content in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(content), 1_580_000_000, 0o644  # fixed: same bytes on every machine
            archive.addfile(info, io.BytesIO(content))
    with zipfile.ZipFile(out_dir / "results_text.zip", "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(2020, 2, 10, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content)
    (out_dir / "bert_reference_results_text_md5.txt").write_text(
        "".join(f"{Path(name).name}\t{hashlib.md5(content).hexdigest()}\n" for name, content in sorted(files.items()))
    )
    (out_dir / "License.txt").write_text(
        f"Tiny stand-in of MLCommons' preprocessed Wikipedia for BERT (mlperf-workflow tiny tier, seed {seed}):\n"
        f"articles of a Markov chain over {markov.WORDS} words with {markov.SUCCESSORS} successors each, not Wikipedia text.\n"
    )
    return sorted(p for p in out_dir.rglob("*") if p.is_file())
