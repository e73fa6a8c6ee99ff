"""Seeded Criteo-1TB-multi-hot-shaped click logs for the tiny dlrm_dcnv2 tier, in the reference's layout.

The files are those ``dlrm_main.py --synthetic_multi_hot_criteo_path`` opens
(data/dlrm_dataloader.py:77-95, data/multi_hot_criteo.py:97-115 at aa344c7):
``day_{0..23}_dense.npy`` (float32, rows x 13, already ``log(x + 3)`` as torchrec's
``npy_preproc_criteo`` writes it), ``day_{0..23}_labels.npy`` (int32, rows x 1) and
``day_{0..23}_sparse_multi_hot.npz`` (an uncompressed ``np.savez`` with one int32 array
``"<k>"`` of rows x multi_hot_size[k] per categorical feature k, as
``materialize_synthetic_multihot_dataset.py`` writes it). Days 0-22 train; day 23 is
split in halves, validation then test, by the reference's loader. These helpers (the
day-file names and their reader) are also what a second recommendation benchmark on
numpy day files could reuse.

How hard the task is, and why (tiny-scale-notes.md section 2): the label is Bernoulli of a
hidden teacher logit = a dense linear part + a per-id main effect + dot products of hidden
per-id latents for 12 random pairs of categorical features + dense x categorical crosses.
The pair terms are the part a logistic regression cannot represent (it plateaus near AUC
0.71), while DLRM's cross layers can, so the target 0.80275 needs the DCNv2 interaction.
Multi-hot bags follow the reference's ``Multihot`` (multi_hot.py): a row's one-hot id maps
to a fixed bag whose first element is the id itself and whose others are fixed random ids
of the same table, so the bag carries the id's information (the teacher reads the id).
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DAYS = 24
"""Day files of Criteo 1TB (torchrec.datasets.criteo.DAYS); the last is validation + test."""
DENSE_FEATURES = 13
"""Integer (dense) features of Criteo."""
SPARSE_FEATURES = 26
"""Categorical features of Criteo, one embedding table each."""


def day_files(day: int) -> dict[str, str]:
    """The reference's three files of one day: part -> file name."""
    return {"dense": f"day_{day}_dense.npy", "labels": f"day_{day}_labels.npy", "sparse": f"day_{day}_sparse_multi_hot.npz"}


def load_multi_hot(path: Path, feature: int) -> np.ndarray:
    """Feature ``feature``'s (rows x hot) int32 array of a ``day_*_sparse_multi_hot.npz``, memory-mapped.

    The reference's loader maps each member of the uncompressed zip in place
    (multi_hot_criteo.py:_load_from_npz) and refuses anything but int32; so does this.
    """
    name = f"{feature}.npy"
    with zipfile.ZipFile(path) as archive:
        if name not in archive.NameToInfo:
            raise ValueError(f"{path}: has no member {name}; a multi-hot day file holds 0.npy..{SPARSE_FEATURES - 1}.npy")
        info = archive.NameToInfo[name]
        if info.compress_type != zipfile.ZIP_STORED:
            raise ValueError(f"{path}: member {name} is compressed; the reference memory-maps uncompressed members only")
        with archive.open(name) as member:
            version = np.lib.format.read_magic(member)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(member)
            header_length = member.tell()
        # The local header's name and extra fields precede the member's bytes.
        with path.open("rb") as raw:
            raw.seek(info.header_offset + 26)
            name_length, extra_length = np.frombuffer(raw.read(4), dtype="<u2")
        offset = info.header_offset + 30 + int(name_length) + int(extra_length) + header_length
    if dtype != np.int32:
        raise ValueError(f"{path}: member {name} is {dtype}; the reference's loader requires int32")
    return np.memmap(path, dtype=dtype, shape=shape, order="F" if fortran else "C", mode="r", offset=offset)


@dataclass(frozen=True)
class ClickLogShape:
    """Sizes and difficulty of the generated click logs."""

    rows_per_train_day: int = 48_000
    """Rows of each of days 0-22 (23 x 48,000 = 1.1 M training rows)."""
    rows_last_day: int = 120_000
    """Rows of day 23: the first half validates, the second half tests."""
    smallest_table: int = 10
    """Vocabulary of the smallest embedding table; sizes grow geometrically to ``largest_table``."""
    largest_table: int = 2000
    """Vocabulary of the largest embedding table."""
    multi_hot_sizes: tuple[int, ...] = (2, 2, 1, 2, 2, 1, 1, 1, 1, 2, 2, 2, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 1, 1)
    """Ids per row and feature: the reference's 3,2,1,2,6,...,100,27,... capped at 2 (each extra id adds another
    id's embedding to the bag, which slows learning at tiny size)."""
    zipf_exponent: float = 1.1
    """Id popularity: Zipf ranks mapped through a random permutation, as hashed ids look."""
    interacting_pairs: int = 12
    """Pairs of categorical features whose hidden latents interact in the teacher."""
    latent_dim: int = 4
    """Width of the teacher's hidden per-id latents."""
    bias: float = -1.2
    """Teacher logit offset (click-through rate near 0.35)."""
    pair_strength: float = 2.0
    """Multiplier of the pair terms (Bayes AUC about 0.92 on the test half, as the measured design)."""


def table_sizes(shape: ClickLogShape = ClickLogShape()) -> list[int]:
    """Embedding rows per categorical feature (the tiny ``num_embeddings_per_feature``)."""
    sizes = np.geomspace(shape.smallest_table, shape.largest_table, SPARSE_FEATURES)
    return [round(float(s)) for s in sizes]


class Teacher:
    """The hidden model that labels the rows; drawn from the seed, never written to the dataset."""

    def __init__(self, seed: int, shape: ClickLogShape) -> None:
        rng = np.random.default_rng(seed)
        self.shape = shape
        self.sizes = table_sizes(shape)
        self.dense_weight = rng.normal(0, 0.3, DENSE_FEATURES)
        self.main_effect = [rng.normal(0, 0.3, n) for n in self.sizes]
        self.latents = [rng.normal(0, 1, (n, shape.latent_dim)) for n in self.sizes]
        pairs = set()
        while len(pairs) < shape.interacting_pairs:
            a, b = sorted(rng.choice(SPARSE_FEATURES, 2, replace=False).tolist())
            pairs.add((a, b))
        self.pairs = sorted(pairs)
        self.pair_scale = shape.pair_strength / shape.latent_dim / np.sqrt(shape.interacting_pairs / 4)
        self.cross_features = list(range(0, SPARSE_FEATURES, 3))
        self.cross_weight = [rng.normal(0, 0.3, (n, DENSE_FEATURES)) for n in self.sizes]
        self.permutation = [rng.permutation(n) for n in self.sizes]
        # The reference's one-hot -> multi-hot tables (multi_hot.py, "uniform"): the id, then fixed random ids.
        self.multi_hot_tables = []
        for n, hot in zip(self.sizes, shape.multi_hot_sizes, strict=True):
            table = rng.integers(0, n, (n, hot), dtype=np.int32)
            table[:, 0] = np.arange(n, dtype=np.int32)
            self.multi_hot_tables.append(table)

    def ids(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        """(rows x 26) one-hot ids: Zipf ranks within each table, hashed by a fixed permutation."""
        out = np.empty((rows, SPARSE_FEATURES), dtype=np.int64)
        for k, n in enumerate(self.sizes):
            ranks = np.arange(1, n + 1, dtype=np.float64)
            p = ranks**-self.shape.zipf_exponent
            out[:, k] = self.permutation[k][rng.choice(n, rows, p=p / p.sum())]
        return out

    def logit(self, dense: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The teacher logit of rows with standardised dense features and one-hot ids."""
        z = self.shape.bias + dense @ self.dense_weight
        for k in range(SPARSE_FEATURES):
            z += self.main_effect[k][ids[:, k]]
        for a, b in self.pairs:
            z += self.pair_scale * np.einsum("ij,ij->i", self.latents[a][ids[:, a]], self.latents[b][ids[:, b]])
        for k in self.cross_features:
            z += np.einsum("ij,ij->i", self.cross_weight[k][ids[:, k]], dense) / np.sqrt(DENSE_FEATURES)
        return z


def make_day(teacher: Teacher, rng: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(dense, labels, multi-hot members) of one day file in the reference's dtypes and shapes."""
    standard = rng.standard_normal((rows, DENSE_FEATURES))
    counts = np.floor(np.exp(1.5 * standard))  # count-like, as Criteo's integer features
    dense = np.log(counts + 3).astype(np.float32)  # torchrec's npy_preproc_criteo stores log(x + 3)
    ids = teacher.ids(rng, rows)
    labels = (rng.random(rows) < 1 / (1 + np.exp(-teacher.logit(standard, ids)))).astype(np.int32).reshape(-1, 1)
    sparse = {str(k): teacher.multi_hot_tables[k][ids[:, k]] for k in range(SPARSE_FEATURES)}
    return dense, labels, sparse


NOTICE = """Synthetic Criteo-1TB-multi-hot-shaped click logs generated by mlperf-workflow
(mlperf_wf.benchmarks.dlrm_dcnv2.criteo) with seed {seed}. They have the file names, dtypes and
shapes of the reference's materialized multi-hot dataset but none of its data; they exist so the
tiny tier runs the same download, verification, preparation and training code as the full benchmark.
"""


def generate(out_dir: Path, seed: int, shape: ClickLogShape = ClickLogShape()) -> list[Path]:
    """Write the 24 day files (72 arrays) into ``out_dir``; return the files written."""
    teacher = Teacher(seed, shape)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for day in range(DAYS):
        rng = np.random.default_rng([seed, day])
        rows = shape.rows_last_day if day == DAYS - 1 else shape.rows_per_train_day
        dense, labels, sparse = make_day(teacher, rng, rows)
        names = day_files(day)
        np.save(out_dir / names["dense"], dense)
        np.save(out_dir / names["labels"], labels)
        np.savez(out_dir / names["sparse"], **sparse)
        written += [out_dir / names[part] for part in ("dense", "labels", "sparse")]
    for name, text in (("NOTICE.txt", NOTICE.format(seed=seed)), ("LICENSE.txt", "Generated data; no third-party content.\n")):
        (out_dir / name).write_text(text)
        written.append(out_dir / name)
    return written
