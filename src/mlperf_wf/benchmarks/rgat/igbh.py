"""Seeded IGBH-shaped heterogeneous graph for the tiny rgat tier.

Node types paper, author, institute and fos; relations cites (paper->paper),
written_by (paper->author), affiliated_to (author->institute) and topic
(paper->fos); every paper is labelled. Files are written with the published
IGBH-full paths (``full/processed/<type>/node_feat.npy``,
``full/processed/<src>__<rel>__<dst>/edge_index.npy`` as ``(E, 2)`` int64,
labels as float32), so download, verify and preprocessing read them exactly as
they read the real dataset. Journal and conference (IGBH-large/full only) are
not generated; the preprocessing converts whatever node and edge types exist.

How hard the task is, and why: paper features carry only a weak class signal
(``feature_signal`` times a class prototype plus unit noise), so a model that
reads a paper's own features stays far below the 0.72 target. Citations,
authors and fields of study are homophilous (a fraction ``homophily`` of each
paper's links go to its class), so the target needs messages from neighbours
of several relations: the R-GAT's job. The labels are never part of any input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = "full/processed"
"""Folder of the published IGBH-full files inside the dataset."""


@dataclass(frozen=True)
class GraphShape:
    """Sizes and difficulty of the generated graph."""

    papers: int = 30_000
    """Labelled paper nodes."""
    authors: int = 15_000
    """Author nodes (each with a home class)."""
    institutes: int = 200
    """Institute nodes."""
    fos: int = 64
    """Field-of-study nodes; ``fos // classes`` of them belong to each class."""
    classes: int = 8
    """Classes of ``node_label_2K.npy`` (the label set the reference trains on)."""
    feature_dim: int = 32
    """Node feature width (IGBH: 1024)."""
    feature_signal: float = 0.25
    """Weight of the class prototype in a paper's features (noise has unit variance)."""
    homophily: float = 0.40
    """Fraction of a paper's citations, authors and fields drawn from its own class."""
    cites_per_paper: int = 6
    """Out-citations per paper."""
    authors_per_paper: int = 3
    """Authors per paper."""
    fos_per_paper: int = 2
    """Fields of study per paper."""


def _pick_same_class(rng: np.random.Generator, members: list[np.ndarray], cls: np.ndarray) -> np.ndarray:
    """One random member of class ``cls[i]`` for every i."""
    out = np.empty(len(cls), dtype=np.int64)
    for c, pool in enumerate(members):
        where = np.flatnonzero(cls == c)
        out[where] = pool[rng.integers(0, len(pool), len(where))]
    return out


def _links(rng: np.random.Generator, cls: np.ndarray, per_node: int, members: list[np.ndarray], n_targets: int, homophily: float) -> np.ndarray:
    """``per_node`` links per source node: same-class targets with probability ``homophily``, else uniform."""
    sources = np.repeat(np.arange(len(cls), dtype=np.int64), per_node)
    source_class = np.repeat(cls, per_node)
    targets = rng.integers(0, n_targets, len(sources), dtype=np.int64)
    same = rng.random(len(sources)) < homophily
    targets[same] = _pick_same_class(rng, members, source_class[same])
    return np.stack([sources, targets], axis=1)


def make_graph(seed: int, shape: GraphShape = GraphShape()) -> dict[str, np.ndarray]:
    """Arrays of the graph keyed by their path under ``ROOT``."""
    rng = np.random.default_rng(seed)
    s = shape
    paper_class = rng.integers(0, s.classes, s.papers)
    author_class = rng.integers(0, s.classes, s.authors)
    fos_class = np.arange(s.fos) % s.classes
    prototypes = rng.standard_normal((s.classes, s.feature_dim)).astype(np.float32)

    papers_of = [np.flatnonzero(paper_class == c) for c in range(s.classes)]
    authors_of = [np.flatnonzero(author_class == c) for c in range(s.classes)]
    fos_of = [np.flatnonzero(fos_class == c) for c in range(s.classes)]

    cites = _links(rng, paper_class, s.cites_per_paper, papers_of, s.papers, s.homophily)
    written_by = _links(rng, paper_class, s.authors_per_paper, authors_of, s.authors, s.homophily)
    topic = _links(rng, paper_class, s.fos_per_paper, fos_of, s.fos, s.homophily)
    affiliated_to = np.stack([np.arange(s.authors, dtype=np.int64), rng.integers(0, s.institutes, s.authors, dtype=np.int64)], axis=1)

    def noise(n: int) -> np.ndarray:
        return rng.standard_normal((n, s.feature_dim)).astype(np.float32)

    paper_feat = s.feature_signal * prototypes[paper_class] + noise(s.papers)
    # The 19-class label set of IGBH is coarser than the 2K one; here pairs of classes merge.
    return {
        "paper/node_feat.npy": paper_feat.astype(np.float32),
        "paper/node_label_2K.npy": paper_class.astype(np.float32),
        "paper/node_label_19.npy": (paper_class // 2).astype(np.float32),
        "paper/paper_id_index_mapping.npy": np.arange(s.papers, dtype=np.int64),
        "author/node_feat.npy": noise(s.authors),
        "author/author_id_index_mapping.npy": np.arange(s.authors, dtype=np.int64),
        "institute/node_feat.npy": noise(s.institutes),
        "institute/institute_id_index_mapping.npy": np.arange(s.institutes, dtype=np.int64),
        "fos/node_feat.npy": noise(s.fos),
        "fos/fos_id_index_mapping.npy": np.arange(s.fos, dtype=np.int64),
        "paper__cites__paper/edge_index.npy": cites,
        "paper__written_by__author/edge_index.npy": written_by,
        "author__affiliated_to__institute/edge_index.npy": affiliated_to,
        "paper__topic__fos/edge_index.npy": topic,
    }


NOTICE = """Synthetic IGBH-shaped graph generated by mlperf-workflow (mlperf_wf.benchmarks.rgat.igbh) with seed {seed}.
It has the file layout and formats of IGBH-full but none of its data; it exists so the tiny tier
runs the same download, verification, preprocessing and training code as the full benchmark.
"""


def generate(out_dir: Path, seed: int, shape: GraphShape = GraphShape()) -> list[Path]:
    """Write the graph into ``out_dir`` with IGBH-full's paths; return the files written."""
    root = out_dir / ROOT
    written = []
    for relative, array in make_graph(seed, shape).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, array)
        written.append(path)
    for name, text in (("NOTICE.txt", NOTICE.format(seed=seed)), ("LICENSE.txt", "Generated data; no third-party content.\n")):
        (root / name).write_text(text)
        written.append(root / name)
    return written
