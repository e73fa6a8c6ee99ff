"""torchrec's preparation of the raw Criteo 1TB click logs, day by day and feature by feature, in bounded memory.

The reference (``scripts/process_Criteo_1TB_Click_Logs_dataset.sh`` at aa344c7) runs three torchrec 0.3.2 scripts
whose work is ``torchrec/datasets/criteo.py``'s ``BinaryCriteoUtils``, each holding every day in memory ("700GB of
RAM", "1-2 days", README.MD:86):

1. ``npy_preproc_criteo`` (``tsv_to_npys``), per day: label ``int(x or "0")``, 13 dense ``int(x or "0")``, 26
   categorical ``int(x or "0", 16)``, stacked as int32 (numpy 1.x, the reference image's, wraps values >= 2**31), the
   dense part stored as ``log(x + 3)`` in float32 and the labels as (rows, 1).
2. ``contiguous_preproc_criteo --frequency_threshold 0`` (``sparse_to_contiguous``): per feature, the values of days
   0..23 in row order renumbered by first appearance, from 2 (without a threshold 1 is never used).
3. ``shuffle_preproc_criteo --random_seed 0`` (``shuffle``): days 0-22 stacked in one float32 (rows, 40) array
   (dense, sparse, label), ``np.random.seed(0); np.random.shuffle``, cut back into days of the same sizes, sparse and
   labels cast back to int32 -- so the training days' contiguous ids above 2**24 come out rounded to float32's
   precision, as in the reference's output; day 23 is copied unchanged.

Here the same results come from shards that each hold one chunk, one feature's vocabulary, or one index per row:

- :func:`read_day` (step 1): one day streamed in blocks of lines (a ``.gz`` file is read as it decompresses, and a
  stream cut before its gzip trailer, as the Hugging Face copies are reported to be, loses only its unfinished last
  line, which is recorded); checkpoint per block.
- :func:`contiguous_ids` (step 2): one feature across the 24 days, numbered with a sorted table of the values seen
  so far (the size of the feature's vocabulary, not of the data); checkpoint per day.
- :func:`shuffle_destinations` (step 3): the permutation numpy's shuffle applies, inverted into the position every
  training row moves to. The legacy MT19937 draws of ``shuffle`` depend only on the row count, so shuffling an index
  array moves indices exactly as the reference's shuffle moves rows (tested against it).
- :func:`scatter_day` / :func:`gather_day` (step 3): each source day sends its rows to one bucket per destination
  day; each destination day places its buckets' rows. The data is read and written twice instead of held in RAM.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from mlperf_wf.acquire.prepare import Checkpoint
from mlperf_wf.benchmarks.dlrm_dcnv2.criteo import DAYS, DENSE_FEATURES, SPARSE_FEATURES
from mlperf_wf.errors import UserError

RAW_COLUMNS = 1 + DENSE_FEATURES + SPARSE_FEATURES
"""A click-log line: label, 13 integer features, 26 hexadecimal categorical features, tab-separated."""
BLOCK_BYTES = 1 << 26
"""Decompressed bytes of lines parsed at once (about 300,000 Criteo lines)."""
CHUNK_ROWS = 1 << 22
"""Rows scattered or placed at once."""
NUMBERING_CHUNK_ROWS = 1 << 24
"""Values numbered at once: each chunk's new values are inserted into the sorted table (a copy of the table), so
fewer, larger chunks (16 M values, a few hundred MB of sorting) keep that copying small next to the reading."""
HEADER_BYTES = 128
"""Bytes reserved for the ``.npy`` header of a file whose row count is known only at its end."""
MAX_HEX_DIGITS = 16
"""Longest categorical value read (Criteo's are 8 hexadecimal digits, 32-bit hashes)."""
FIRST_CONTIGUOUS_ID = 2
"""sparse_to_contiguous numbers from 2 (1 is kept for values under a frequency threshold, 0 for none)."""
BUCKET_ROW = np.dtype([("row", "<u4"), ("dense", "<f4", (DENSE_FEATURES,)), ("sparse", "<i4", (SPARSE_FEATURES,)), ("label", "<i4")])
"""A training row on its way to its destination day: its row there, and its data."""


def raw_day_file(folder: Path, day: int) -> Path:
    """Day ``day`` of the raw click logs: ``day_<d>`` (as the reference reads it) or ``day_<d>.gz`` (as published)."""
    for name in (f"day_{day}", f"day_{day}.gz"):
        if (folder / name).is_file():
            return folder / name
    raise UserError(f"{folder}: has neither day_{day} nor day_{day}.gz; the raw Criteo 1TB click logs are day_0..day_{DAYS - 1} (.gz)")


# ---- step 1: one day of lines to arrays ----


class DayLines:
    """Whole lines of a raw day file after its first ``skip_bytes`` decompressed bytes, in blocks, each with the
    decompressed offset it ends at. An unfinished last line is kept when the stream is complete and dropped (its
    length in ``dropped_bytes``) when a gzip member ends without its trailer, as one trims a cut download."""

    def __init__(self, path: Path, skip_bytes: int = 0, size: int | None = None) -> None:
        self.path, self.skip_bytes, self.size = path, skip_bytes, size or BLOCK_BYTES
        self.truncated = False
        self.dropped_bytes = 0

    def _decompressed(self) -> Iterator[bytes]:
        with self.path.open("rb") as raw:
            if self.path.suffix != ".gz":
                while block := raw.read(self.size):
                    yield block
                return
            inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip header
            while compressed := raw.read(self.size):
                while compressed:
                    if inflate.eof:  # the next gzip member of a concatenated file
                        inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)
                    yield inflate.decompress(compressed, self.size)  # at most a block: text inflates about 4x
                    compressed = inflate.unused_data if inflate.eof else inflate.unconsumed_tail
            yield inflate.flush()
            self.truncated = not inflate.eof

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        offset, pending = 0, b""
        for block in self._decompressed():
            if offset + len(block) <= self.skip_bytes:
                offset += len(block)
                continue
            if offset < self.skip_bytes:
                block = block[self.skip_bytes - offset :]
                offset = self.skip_bytes
            pending += block
            if len(pending) >= self.size and (cut := pending.rfind(b"\n") + 1):
                offset += cut
                yield pending[:cut], offset
                pending = pending[cut:]
        if cut := pending.rfind(b"\n") + 1:
            offset += cut
            yield pending[:cut], offset
            pending = pending[cut:]
        if pending and self.truncated:
            self.dropped_bytes = len(pending)
        elif pending:
            yield pending + b"\n", offset + len(pending)


def parse_hex(strings, where: str) -> np.ndarray:
    """Arrow strings of hexadecimal digits (empty: 0) as int32, wrapped as numpy 1.x stores ``int(x, 16)``."""
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32)[strings.offset : strings.offset + len(strings) + 1]
    data = np.frombuffer(strings.buffers()[2], dtype=np.uint8) if strings.buffers()[2] is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    if len(lengths) and lengths.max() > MAX_HEX_DIGITS:
        row = int(np.argmax(lengths))
        raise UserError(
            f"{where}: row {row}: a categorical value of {lengths[row]} characters; Criteo's are hexadecimal hashes of up to {MAX_HEX_DIGITS} digits"
        )
    digit_of = np.full(256, 255, dtype=np.uint8)
    for value, chars in enumerate(zip("0123456789abcdef", "0123456789ABCDEF", strict=True)):
        for char in chars:
            digit_of[ord(char)] = value
    values = np.zeros(len(lengths), dtype=np.uint64)
    for position in range(int(lengths.max()) if len(lengths) else 0):
        has = lengths > position
        digits = digit_of[data[offsets[:-1][has] + position]]
        if (digits == 255).any():
            row = int(np.flatnonzero(has)[np.argmax(digits == 255)])
            text = bytes(data[offsets[row] : offsets[row + 1]]).decode(errors="replace")
            raise UserError(f"{where}: row {row}: categorical value {text!r} is not hexadecimal")
        values[has] = values[has] * np.uint64(16) + digits
    return values.astype(np.uint32).view(np.int32)


def parse_lines(block: bytes, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels int32 (n,), dense int32 (n, 13), sparse int32 (n, 26)) of tab-separated click-log lines, empty fields 0."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv

    names = [f"c{i}" for i in range(RAW_COLUMNS)]
    types = {name: pa.int64() for name in names[: 1 + DENSE_FEATURES]} | {name: pa.string() for name in names[1 + DENSE_FEATURES :]}
    try:
        table = csv.read_csv(
            io.BytesIO(block),
            read_options=csv.ReadOptions(column_names=names, block_size=len(block) + 1),
            parse_options=csv.ParseOptions(delimiter="\t", quote_char=False),
            convert_options=csv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=False),
        )
    except pa.ArrowInvalid as err:
        problem = str(err).splitlines()[0].split(": ")[:2]  # "CSV parse error: Expected 40 columns, got 3: <the line>"
        raise UserError(f"{where}: {': '.join(problem)}; a Criteo line has {RAW_COLUMNS} tab-separated fields (label, 13 integers, 26 hashes)") from None
    # int(x) of a value past int32 is stored wrapped by numpy 1.x's int32 conversion; astype wraps the same way.
    numbers = np.stack([pc.fill_null(table.column(i), 0).to_numpy() for i in range(1 + DENSE_FEATURES)], axis=1).astype(np.int32)
    sparse = np.stack([parse_hex(table.column(1 + DENSE_FEATURES + k).combine_chunks(), where) for k in range(SPARSE_FEATURES)], axis=1)
    return numbers[:, 0], numbers[:, 1:], sparse


def dense_log(dense: np.ndarray) -> np.ndarray:
    """tsv_to_npys's ``dense += 3; np.log(dense, dtype=np.float32)`` on int32 values (the addition wraps as int32)."""
    shifted = dense.astype(np.int32) + np.int32(3)
    with np.errstate(invalid="ignore", divide="ignore"):  # values below -2 give nan/-inf there too; counted by read_day
        return np.log(shifted, dtype=np.float32)


class GrowingArray:
    """An ``.npy`` file written row block by row block before its row count is known; the header comes last."""

    def __init__(self, path: Path, dtype: np.dtype, columns: tuple[int, ...], rows: int) -> None:
        self.path, self.dtype, self.columns = path, np.dtype(dtype), columns
        self.row_bytes = self.dtype.itemsize * int(np.prod(columns, dtype=np.int64))
        self.file = path.open("r+b" if rows and path.is_file() else "wb")
        self.file.truncate(HEADER_BYTES + rows * self.row_bytes)  # drops what was written after the last checkpoint
        self.file.seek(HEADER_BYTES + rows * self.row_bytes)
        self.rows = rows

    def append(self, block: np.ndarray) -> None:
        self.file.write(np.ascontiguousarray(block, dtype=self.dtype).tobytes())
        self.rows += len(block)

    def flush(self) -> None:
        self.file.flush()

    def finish(self) -> None:
        header = repr({"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": (self.rows, *self.columns)})
        text = header.encode("latin1")
        padding = HEADER_BYTES - 10 - len(text) - 1
        if padding < 0:
            raise ValueError(f"{self.path}: header of {len(text)} bytes does not fit {HEADER_BYTES}")
        self.file.seek(0)
        self.file.write(b"\x93NUMPY\x01\x00" + np.uint16(HEADER_BYTES - 10).tobytes() + text + b" " * padding + b"\n")
        self.file.close()


def day_part_files(folder: Path) -> dict[str, Path]:
    """The files :func:`read_day` writes: ``labels``, ``dense`` and ``sparse_<k>`` per categorical feature."""
    files = {"labels": folder / "labels.npy", "dense": folder / "dense.npy"}
    files.update({f"sparse_{k}": folder / f"sparse_{k}.npy" for k in range(SPARSE_FEATURES)})
    return files


def read_day(path: Path, folder: Path, scratch: Checkpoint) -> dict:
    """Step 1 for one day file: labels (rows, 1) int32, dense (rows, 13) float32 log(x + 3), and each categorical
    feature (rows,) int32 into ``folder``; a killed call resumes after its last saved block."""
    files = day_part_files(folder)
    rows, done_bytes, not_finite = scratch.get("rows"), scratch.get("bytes"), scratch.get("dense_not_finite")
    if rows and not all(file.is_file() for file in files.values()):
        rows, done_bytes, not_finite = 0, 0, 0
    writers = {
        "labels": GrowingArray(files["labels"], np.int32, (1,), rows),
        "dense": GrowingArray(files["dense"], np.float32, (DENSE_FEATURES,), rows),
        **{f"sparse_{k}": GrowingArray(files[f"sparse_{k}"], np.int32, (), rows) for k in range(SPARSE_FEATURES)},
    }
    lines = DayLines(path, done_bytes)
    for block, ends_at in lines:
        labels, dense, sparse = parse_lines(block, f"{path.name} (after byte {done_bytes})")
        writers["labels"].append(labels.reshape(-1, 1))
        logs = dense_log(dense)
        not_finite += int((~np.isfinite(logs)).sum())
        writers["dense"].append(logs)
        for k in range(SPARSE_FEATURES):
            writers[f"sparse_{k}"].append(sparse[:, k])
        for writer in writers.values():
            writer.flush()
        rows, done_bytes = rows + len(labels), ends_at
        scratch.save(rows=rows, bytes=done_bytes, dense_not_finite=not_finite)
    for writer in writers.values():
        writer.finish()
    # dense_not_finite: integer features below -2, whose log(x + 3) is nan or -inf in the reference's output too
    return {"rows": rows, "bytes": done_bytes, "cut_stream_dropped_bytes": lines.dropped_bytes, "dense_not_finite": not_finite}


# ---- step 2: one feature's contiguous ids across the days ----


class ContiguousIds:
    """First-appearance numbering of one feature's values: sorted values seen so far and the id of each."""

    def __init__(self, values: np.ndarray | None = None, ids: np.ndarray | None = None) -> None:
        self.values = values if values is not None else np.zeros(0, dtype=np.int32)
        self.ids = ids if ids is not None else np.zeros(0, dtype=np.int32)

    @property
    def next_id(self) -> int:
        return FIRST_CONTIGUOUS_ID + len(self.values)

    def map(self, chunk: np.ndarray) -> np.ndarray:
        """The contiguous ids of ``chunk``; values not seen before are numbered in order of first appearance."""
        unique, first = np.unique(chunk, return_index=True)
        at = np.searchsorted(self.values, unique)
        known = at < len(self.values)
        known[known] = self.values[at[known]] == unique[known]
        new, new_first = unique[~known], first[~known]
        new_ids = np.empty(len(new), dtype=np.int32)
        new_ids[np.argsort(new_first, kind="stable")] = np.arange(self.next_id, self.next_id + len(new), dtype=np.int32)
        self.values = np.insert(self.values, at[~known], new)
        self.ids = np.insert(self.ids, at[~known], new_ids)
        return self.ids[np.searchsorted(self.values, chunk)]


def contiguous_ids(day_files: list[Path], out_files: list[Path], scratch: Checkpoint) -> dict:
    """Step 2 for one feature: each day's values (in ``day_files``' order) as contiguous ids into ``out_files``.

    After each finished day the numbering so far is saved beside it; a killed call resumes at the next day."""
    table_file, ids_file = scratch.folder / "values.npy", scratch.folder / "ids.npy"
    days_done = scratch.get("days")
    if days_done and table_file.is_file() and ids_file.is_file() and all(file.is_file() for file in out_files[:days_done]):
        numbering = ContiguousIds(np.load(table_file), np.load(ids_file))
    else:
        days_done, numbering = 0, ContiguousIds()
    for day in range(days_done, len(day_files)):
        values = np.load(day_files[day], mmap_mode="r")
        out = np.lib.format.open_memmap(out_files[day], mode="w+", dtype=np.int32, shape=values.shape)
        for start in range(0, len(values), NUMBERING_CHUNK_ROWS):
            out[start : start + NUMBERING_CHUNK_ROWS] = numbering.map(np.asarray(values[start : start + NUMBERING_CHUNK_ROWS]))
        out.flush()
        del out
        for file, array in ((table_file, numbering.values), (ids_file, numbering.ids)):
            partial = file.with_suffix(".partial.npy")
            np.save(partial, array)
            partial.replace(file)
        scratch.save(days=day + 1)
    return {"vocabulary": len(numbering.values), "largest_id": numbering.next_id - 1}


# ---- step 3: the shuffle of the training days ----


def shuffle_destinations(rows_per_day: list[int], seed: int, target: Path, scratch: Checkpoint) -> None:
    """Where ``np.random.seed(seed); np.random.shuffle(rows)`` moves every training row, as ``target`` (unsigned ints).

    The shuffle runs on an index array mapped from the scratch folder (one index per row instead of 40 values), then
    is inverted in chunks; a kill during the inversion resumes at its last chunk, one during the shuffle reshuffles."""
    rows = int(sum(rows_per_day))
    dtype = np.uint32 if rows < 2**32 else np.uint64
    order_file = scratch.folder / "order.npy"
    if not (scratch.get("shuffled") and order_file.is_file()):
        order = np.lib.format.open_memmap(order_file, mode="w+", dtype=dtype, shape=(rows,))
        for start in range(0, rows, CHUNK_ROWS):
            order[start : start + CHUNK_ROWS] = np.arange(start, min(start + CHUNK_ROWS, rows), dtype=dtype)
        # np.asarray: the plain-ndarray view gets numpy's one-pass C shuffle (a memmap subclass would loop in Python).
        np.random.RandomState(seed).shuffle(np.asarray(order))
        order.flush()
        del order
        scratch.save(shuffled=1, inverted=0)
    order = np.load(order_file, mmap_mode="r")
    done = scratch.get("inverted") if target.is_file() else 0
    destination = np.lib.format.open_memmap(target, mode="r+" if done else "w+", dtype=dtype, shape=(rows,))
    for start in range(done, rows, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, rows)
        destination[np.asarray(order[start:stop])] = np.arange(start, stop, dtype=dtype)
        destination.flush()
        scratch.save(inverted=stop)
    del destination


def day_starts(rows_per_day: list[int]) -> np.ndarray:
    """First row of each day in the days' concatenation, and the total at the end."""
    return np.concatenate([[0], np.cumsum(rows_per_day, dtype=np.int64)])


def scatter_day(
    day: int, rows_per_day: list[int], destination: np.ndarray, part: dict[str, np.ndarray], bucket_files: list[Path], scratch: Checkpoint
) -> list[int]:
    """Send training day ``day``'s rows (``part``: ``dense``, ``labels``, ``sparse_<k>``) to one bucket file per
    destination day, each row with its row there; resumes after its last saved chunk. Returns the bucket sizes."""
    starts = day_starts(rows_per_day)
    own = np.asarray(destination[starts[day] : starts[day + 1]]).astype(np.int64)
    goes_to = np.searchsorted(starts, own, side="right") - 1
    sizes = np.bincount(goes_to, minlength=len(rows_per_day))
    done = scratch.get("rows")
    if done and not all(file.is_file() for file in bucket_files):
        done = 0
    buckets = [
        np.lib.format.open_memmap(file, mode="r+" if done else "w+", dtype=BUCKET_ROW, shape=(int(size),))
        for file, size in zip(bucket_files, sizes, strict=True)
    ]
    fill = np.bincount(goes_to[:done], minlength=len(rows_per_day))
    for start in range(done, len(own), CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, len(own))
        rows = np.empty(stop - start, dtype=BUCKET_ROW)
        rows["row"] = own[start:stop] - starts[goes_to[start:stop]]
        rows["dense"] = part["dense"][start:stop]
        rows["label"] = part["labels"][start:stop, 0]
        for k in range(SPARSE_FEATURES):
            rows["sparse"][:, k] = part[f"sparse_{k}"][start:stop]
        target = goes_to[start:stop]
        order = np.argsort(target, kind="stable")
        counts = np.bincount(target, minlength=len(rows_per_day))
        begin = 0
        for bucket, count in enumerate(counts):
            if count:
                buckets[bucket][fill[bucket] : fill[bucket] + count] = rows[order[begin : begin + count]]
                fill[bucket] += count
                begin += count
        for bucket in buckets:
            bucket.flush()
        scratch.save(rows=stop)
    return [int(size) for size in sizes]


def gather_day(rows: int, bucket_files: list[Path], out: dict[str, Path], scratch: Checkpoint) -> None:
    """Place every bucket's rows into destination day files ``out`` (``dense``, ``sparse``, ``labels``) as the
    reference writes them from its float32 array: sparse ids and labels through float32 back to int32."""
    buckets = [np.load(file, mmap_mode="r") for file in bucket_files]
    placed = sum(len(bucket) for bucket in buckets)
    if placed != rows:
        raise UserError(f"{out['dense'].parent}: the buckets hold {placed} rows for a day of {rows}; rerun the scatter shards")
    done = scratch.get("buckets")
    if done and not all(file.is_file() for file in out.values()):
        done = 0
    mode = "r+" if done else "w+"
    dense = np.lib.format.open_memmap(out["dense"], mode=mode, dtype=np.float32, shape=(rows, DENSE_FEATURES))
    sparse = np.lib.format.open_memmap(out["sparse"], mode=mode, dtype=np.int32, shape=(rows, SPARSE_FEATURES))
    labels = np.lib.format.open_memmap(out["labels"], mode=mode, dtype=np.int32, shape=(rows, 1))
    for index in range(done, len(buckets)):
        bucket = buckets[index]
        for start in range(0, len(bucket), CHUNK_ROWS):
            chunk = np.asarray(bucket[start : start + CHUNK_ROWS])
            where = chunk["row"].astype(np.int64)
            dense[where] = chunk["dense"]
            sparse[where] = chunk["sparse"].astype(np.float32).astype(np.int32)
            labels[where, 0] = chunk["label"].astype(np.float32).astype(np.int32)
        for array in (dense, sparse, labels):
            array.flush()
        scratch.save(buckets=index + 1)
