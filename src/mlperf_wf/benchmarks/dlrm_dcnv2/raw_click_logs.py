"""Seeded raw Criteo click logs for the tiny tier of dlrm_dcnv2's from-raw preparation, in the published layout.

``day_0.gz`` .. ``day_23.gz`` as Criteo publishes them on the Hugging Face Hub (``criteo/CriteoClickLogs``): gzip
text, one ad per line, tab-separated ``<label> <13 integers> <26 categorical hashes>``, 8 lowercase hexadecimal
digits a hash, empty fields for missing values. The rows come from the same hidden teacher as the tiny published
dataset (``criteo.py``), so the from-raw preparation's output trains to the target as that does: each table's ids
are hashed to distinct random 32-bit values (half of them >= 2**31, which the reference stores wrapped), counts
are written as integers, and about 1 % of the fields are empty. As the Hub's copies are reported to be,
``day_7.gz`` ends without its gzip trailer, after an unfinished line.
"""

from __future__ import annotations

import io
import zlib
from pathlib import Path

import numpy as np

from mlperf_wf.benchmarks.dlrm_dcnv2.criteo import DAYS, DENSE_FEATURES, SPARSE_FEATURES, ClickLogShape, Teacher

MISSING = 0.01
"""Share of empty fields (Criteo's missing values)."""
CUT_DAY = 7
"""The day written as a stream cut before its gzip trailer, after part of a line."""


def _hex8(values: np.ndarray) -> np.ndarray:
    """uint32 values as 8 lowercase hexadecimal digits (``S8``)."""
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    shifts = np.arange(28, -4, -4, dtype=np.uint64)
    nibbles = (values.astype(np.uint64)[:, None] >> shifts) & np.uint64(15)
    return digits[nibbles.astype(np.intp)].view("S8").ravel()


def lines(teacher: Teacher, hashes: list[np.ndarray], rng: np.random.Generator, rows: int) -> bytes:
    """``rows`` click-log lines drawn from the teacher (written by Arrow's CSV writer: empty fields for nulls)."""
    import pyarrow as pa
    from pyarrow import csv

    standard = rng.standard_normal((rows, DENSE_FEATURES))
    counts = np.floor(np.exp(1.5 * standard)).astype(np.int64)
    ids = teacher.ids(rng, rows)
    labels = (rng.random(rows) < 1 / (1 + np.exp(-teacher.logit(standard, ids)))).astype(np.int64)
    columns = {"label": pa.array(labels)}
    for j in range(DENSE_FEATURES):
        columns[f"int_{j}"] = pa.array(counts[:, j], mask=rng.random(rows) < MISSING)
    for k in range(SPARSE_FEATURES):
        digits = _hex8(hashes[k][ids[:, k]]).astype(object)
        columns[f"cat_{k}"] = pa.array(digits, type=pa.binary(), mask=rng.random(rows) < MISSING).cast(pa.string())
    out = io.BytesIO()
    csv.write_csv(pa.table(columns), out, csv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none"))
    return out.getvalue()


def generate(out_dir: Path, seed: int, shape: ClickLogShape | None = None) -> list[Path]:
    """Write ``day_0.gz`` .. ``day_23.gz`` into ``out_dir``; return the files written."""
    shape = shape or ClickLogShape()
    teacher = Teacher(seed, shape)
    hash_rng = np.random.default_rng([seed, DAYS])
    hashes = [hash_rng.choice(2**32, n, replace=False).astype(np.uint32) for n in teacher.sizes]
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for day in range(DAYS):
        rng = np.random.default_rng([seed, day])
        rows = shape.rows_last_day if day == DAYS - 1 else shape.rows_per_train_day
        text = lines(teacher, hashes, rng, rows)
        deflate = zlib.compressobj(1, zlib.DEFLATED, zlib.MAX_WBITS | 16)  # gzip framing
        if day == CUT_DAY:  # an unfinished line, and no final block or trailer
            body = deflate.compress(text + text[: len(text) // rows // 2]) + deflate.flush(zlib.Z_SYNC_FLUSH)
        else:
            body = deflate.compress(text) + deflate.flush()
        path = out_dir / f"day_{day}.gz"
        path.write_bytes(body)
        written.append(path)
    return written
