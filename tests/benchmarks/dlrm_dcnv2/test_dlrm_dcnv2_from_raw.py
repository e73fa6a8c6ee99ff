"""dlrm_dcnv2's preparation from the raw click logs, without Snakemake: each sharded step gives what the reference's
all-in-memory step gives (torchrec 0.3.2's tsv_to_npys, sparse_to_contiguous with threshold 0, the float32 shuffle
with seed 0, then the multi-hot materialization), a killed step resumes to the same bytes, bad input stops with one
clear line, and the config switch picks the preparation (its shards, their inputs and commands).

The oracles below are written from the reference's documented behaviour (the module docstring of
``click_logs.py`` cites it): whole arrays in memory, one Python value at a time where the reference does so."""

from __future__ import annotations

import gzip
import itertools
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from mlperf_wf.acquire.prepare import Checkpoint
from mlperf_wf.benchmarks.dlrm_dcnv2 import click_logs, criteo, multihot, raw_click_logs
from mlperf_wf.benchmarks.dlrm_dcnv2 import prepare as published
from mlperf_wf.benchmarks.dlrm_dcnv2 import prepare_from_raw as from_raw
from mlperf_wf.errors import ConfigError, UserError
from tests.plan.test_plan import make_plan, workdir

__all__ = ["workdir"]  # the workflow-directory fixture of the plan tests

SMALL = criteo.ClickLogShape(rows_per_train_day=120, rows_last_day=200)


def wrap_int32(value: int) -> int:
    """What numpy 1.x stores for a Python int in an int32 array (two's complement wrap)."""
    return (value + 2**31) % 2**32 - 2**31


def oracle_day(text: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One day as tsv_to_npys makes it: line by line, field by field."""
    labels, dense, sparse = [], [], []
    for line in text.decode().split("\n"):
        if not line:
            continue
        row = line.split("\t")
        labels.append(int(row[0] or "0"))
        dense.append([wrap_int32(int(row[i] or "0")) for i in range(1, 14)])
        sparse.append([wrap_int32(int(row[i] or "0", 16)) for i in range(14, 40)])
    dense_np = np.array(dense, dtype=np.int32) + np.int32(3)
    with np.errstate(invalid="ignore"):
        logs = np.log(dense_np, dtype=np.float32)
    return np.array(labels, dtype=np.int32).reshape(-1, 1), logs, np.array(sparse, dtype=np.int32)


def oracle_contiguous(days: list[np.ndarray]) -> list[np.ndarray]:
    """sparse_to_contiguous with frequency_threshold 0: per column, first appearance over the days, from 2."""
    out = [day.copy() for day in days]
    for column in range(days[0].shape[1]):
        numbering: dict[int, int] = {}
        for day in out:
            for i, value in enumerate(day[:, column].tolist()):
                if value not in numbering:
                    numbering[value] = 2 + len(numbering)
                day[i, column] = numbering[value]
    return out


def oracle_shuffle(dense: list[np.ndarray], sparse: list[np.ndarray], labels: list[np.ndarray], seed: int = 0) -> list[tuple]:
    """BinaryCriteoUtils.shuffle: days 0-22 in one float32 array, np.random.seed + shuffle, cut back, cast back."""
    full = np.concatenate([np.concatenate([d, s, lab], axis=1).astype(np.float32) for d, s, lab in zip(dense[:-1], sparse[:-1], labels[:-1], strict=True)])
    np.random.seed(seed)
    np.random.shuffle(full)
    days, start = [], 0
    for d in range(len(dense) - 1):
        stop = start + len(dense[d])
        days.append((full[start:stop, :13], full[start:stop, 13:39].astype(np.int32), full[start:stop, 39:].astype(np.int32)))
        start = stop
    days.append((dense[-1], sparse[-1], labels[-1]))
    return days


@contextmanager
def killed_at_a_save(monkeypatch, when: Callable[[dict], bool]) -> Iterator[None]:
    """The code inside dies (KeyboardInterrupt, as at a kill) at the first checkpoint save ``when`` picks, before
    that save is written."""
    real_save = Checkpoint.save

    def dying_save(self, **values):
        if when(values):
            raise KeyboardInterrupt("killed")
        real_save(self, **values)

    monkeypatch.setattr(Checkpoint, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        yield
    monkeypatch.setattr(Checkpoint, "save", real_save)


def write_gz(path: Path, text: bytes, cut: bool = False) -> None:
    deflate = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    path.write_bytes(deflate.compress(text) + (deflate.flush(zlib.Z_SYNC_FLUSH) if cut else deflate.flush()))


# ---- step 1 ----

EDGE_LINES = (
    b"1\t5\t\t-1\t2147483647\t3000000000\t0\t1\t2\t3\t4\t5\t6\t7\t68fd1e64\t\tffffffff\t80000000\t7fffffff\t0\tABCDEF01"
    + b"\t1\t2\t3\t4\t5\t6\t7\t8\t9\ta\tb\tc\td\te\tf\t10\t11\t12\t13\n"
    + b"\t" * 39
    + b"\n"
)


def test_a_day_of_lines_becomes_torchrec_s_arrays_with_its_wraps_and_missing_values(tmp_path):
    raw = tmp_path / "day_0"
    raw.write_bytes(EDGE_LINES + EDGE_LINES[:-1])  # the last line of a complete file may lack its newline
    summary = click_logs.read_day(raw, tmp_path / "out", Checkpoint(tmp_path / "out", {"x": 1}))
    labels, dense, sparse = oracle_day(EDGE_LINES + EDGE_LINES)
    files = click_logs.day_part_files(tmp_path / "out")
    assert summary["rows"] == 4 and summary["cut_stream_dropped_bytes"] == 0
    assert summary["dense_not_finite"] == 4, "2147483647 + 3 and 3000000000 wrap negative in int32, twice each"
    assert np.array_equal(np.load(files["labels"]), labels)
    assert np.array_equal(np.load(files["dense"]), dense, equal_nan=True)  # log of a negative (-1 + 3 > 0 here; wraps give nan)
    for k in range(criteo.SPARSE_FEATURES):
        column = np.load(files[f"sparse_{k}"])
        assert column.dtype == np.int32 and np.array_equal(column, sparse[:, k]), k
    assert sparse[0, 2] == -1 and sparse[0, 3] == -(2**31) and dense.dtype == np.float32


def test_a_gzip_day_cut_before_its_trailer_loses_only_its_unfinished_line(tmp_path):
    lines = b"".join(raw_click_logs.lines(criteo.Teacher(1, SMALL), _hashes(1), np.random.default_rng(0), 50).splitlines(keepends=True))
    write_gz(tmp_path / "day_3.gz", lines + lines[:37], cut=True)
    assert click_logs.raw_day_file(tmp_path, 3).name == "day_3.gz"
    with pytest.raises(EOFError):
        gzip.decompress((tmp_path / "day_3.gz").read_bytes())  # what gzip -t says of it
    summary = click_logs.read_day(tmp_path / "day_3.gz", tmp_path / "out", Checkpoint(tmp_path / "out", {"x": 1}))
    assert summary["rows"] == 50 and summary["cut_stream_dropped_bytes"] == 37
    labels, _, sparse = oracle_day(lines)
    assert np.array_equal(np.load(tmp_path / "out/labels.npy"), labels)
    assert np.array_equal(np.load(tmp_path / "out/sparse_25.npy"), sparse[:, 25])


def test_a_gzip_day_of_several_members_is_read_whole_in_small_blocks(tmp_path, monkeypatch):
    text = raw_click_logs.lines(criteo.Teacher(3, SMALL), _hashes(3), np.random.default_rng(2), 90)
    write_gz(tmp_path / "a.gz", text[:4000])
    write_gz(tmp_path / "b.gz", text[4000:])
    (tmp_path / "day_1.gz").write_bytes((tmp_path / "a.gz").read_bytes() + (tmp_path / "b.gz").read_bytes())
    monkeypatch.setattr(click_logs, "BLOCK_BYTES", 1000)  # smaller than a line: blocks grow to whole lines
    assert b"".join(block for block, _ in click_logs.DayLines(tmp_path / "day_1.gz")) == text
    summary = click_logs.read_day(tmp_path / "day_1.gz", tmp_path / "out", Checkpoint(tmp_path / "out", {"x": 1}))
    assert summary["rows"] == 90 and summary["cut_stream_dropped_bytes"] == 0


def test_a_killed_day_resumes_after_its_last_block_to_the_same_files(tmp_path, monkeypatch):
    text = raw_click_logs.lines(criteo.Teacher(2, SMALL), _hashes(2), np.random.default_rng(1), 400)
    write_gz(tmp_path / "day_0.gz", text)
    monkeypatch.setattr(click_logs, "BLOCK_BYTES", 4096)
    whole = click_logs.read_day(tmp_path / "day_0.gz", tmp_path / "whole", Checkpoint(tmp_path / "whole", {"x": 1}))
    saves = itertools.count(1)
    with killed_at_a_save(monkeypatch, lambda values: next(saves) == 5):
        click_logs.read_day(tmp_path / "day_0.gz", tmp_path / "part", Checkpoint(tmp_path / "part", {"x": 1}))
    resumed = Checkpoint(tmp_path / "part", {"x": 1})
    assert 0 < resumed.get("rows") < 400
    again = click_logs.read_day(tmp_path / "day_0.gz", tmp_path / "part", resumed)
    assert again == whole
    for name, path in click_logs.day_part_files(tmp_path / "whole").items():
        assert (tmp_path / "part" / path.name).read_bytes() == path.read_bytes(), name


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"1\t2\t3\n", "a Criteo line has 40 tab-separated fields"),
        (EDGE_LINES.splitlines()[0].replace(b"68fd1e64", b"68fd1e6z") + b"\n", "categorical value '68fd1e6z' is not hexadecimal"),
    ],
)
def test_a_malformed_line_stops_with_the_file_and_what_a_line_holds(tmp_path, line, message):
    (tmp_path / "day_4").write_bytes(EDGE_LINES + line)
    with pytest.raises(UserError, match=message) as err:
        click_logs.read_day(tmp_path / "day_4", tmp_path / "out", Checkpoint(tmp_path / "out", {"x": 1}))
    assert "day_4" in str(err.value) and "\n" not in str(err.value)


def test_a_missing_day_file_names_the_folder_and_the_expected_files(tmp_path):
    with pytest.raises(UserError, match=r"has neither day_5 nor day_5.gz; the raw Criteo 1TB click logs are day_0..day_23"):
        click_logs.raw_day_file(tmp_path, 5)


# ---- step 2 ----


def test_contiguous_ids_number_each_value_by_its_first_appearance_over_the_days_and_resume_per_day(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    days = [rng.integers(-(2**31), 2**31 - 1, size=n, dtype=np.int64).astype(np.int32) % 97 * 44_000_000 for n in rng.integers(50, 90, 24)]
    days = [day.astype(np.int32) for day in days]
    sources = []
    for d, day in enumerate(days):
        np.save(tmp_path / f"in_{d}.npy", day)
        sources.append(tmp_path / f"in_{d}.npy")
    expected = oracle_contiguous([day.reshape(-1, 1) for day in days])
    monkeypatch.setattr(click_logs, "NUMBERING_CHUNK_ROWS", 16)
    outputs = [tmp_path / "out" / f"day_{d}.npy" for d in range(24)]
    (tmp_path / "out").mkdir()
    with killed_at_a_save(monkeypatch, lambda values: values.get("days") == 9):
        click_logs.contiguous_ids(sources, outputs, Checkpoint(tmp_path / "scratch", {"x": 1}))
    resumed = Checkpoint(tmp_path / "scratch", {"x": 1})
    assert resumed.get("days") == 8
    summary = click_logs.contiguous_ids(sources, outputs, resumed)
    for d in range(24):
        assert np.array_equal(np.load(outputs[d]), expected[d][:, 0]), d
    assert summary == {"vocabulary": 97, "largest_id": 98}


# ---- step 3 ----


def test_the_sharded_shuffle_moves_rows_as_the_reference_s_float32_shuffle_with_its_rounding(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    rows = [int(n) for n in rng.integers(30, 60, criteo.DAYS)]
    dense = [rng.random((n, 13), dtype=np.float32) for n in rows]
    sparse = [rng.integers(2, 2**30, (n, 26)).astype(np.int32) for n in rows]  # ids past 2**24 round in float32
    labels = [rng.integers(0, 2, (n, 1)).astype(np.int32) for n in rows]
    expected = oracle_shuffle(dense, sparse, labels)
    monkeypatch.setattr(click_logs, "CHUNK_ROWS", 7)
    training = rows[: from_raw.TRAINING_DAYS]
    destination = tmp_path / "destination.npy"
    click_logs.shuffle_destinations(training, 0, destination, Checkpoint(tmp_path / "order", {"x": 1}))
    buckets = {}
    for d in range(from_raw.TRAINING_DAYS):
        part = {"dense": dense[d], "labels": labels[d], **{f"sparse_{k}": sparse[d][:, k] for k in range(26)}}
        files = [tmp_path / f"scatter_{d}" / f"to_{e}.npy" for e in range(from_raw.TRAINING_DAYS)]
        (tmp_path / f"scatter_{d}").mkdir()
        sizes = click_logs.scatter_day(d, training, np.load(destination, mmap_mode="r"), part, files, Checkpoint(tmp_path / f"s{d}", {"x": 1}))
        assert sum(sizes) == rows[d]
        buckets[d] = files
    for e in range(from_raw.TRAINING_DAYS):
        out = from_raw.one_hot_files(tmp_path / f"gather_{e}", e)
        (tmp_path / f"gather_{e}").mkdir()
        click_logs.gather_day(training[e], [buckets[d][e] for d in range(from_raw.TRAINING_DAYS)], out, Checkpoint(tmp_path / f"g{e}", {"x": 1}))
        want_dense, want_sparse, want_labels = expected[e]
        assert np.array_equal(np.load(out["dense"]), want_dense), e
        assert np.array_equal(np.load(out["sparse"]), want_sparse), e
        assert np.array_equal(np.load(out["labels"]), want_labels), e
    assert not np.array_equal(expected[0][1], sparse[0]), "the rounding and the shuffle changed something"


def test_a_killed_scatter_resumes_after_its_last_chunk(tmp_path, monkeypatch):
    rows = [40] * from_raw.TRAINING_DAYS
    monkeypatch.setattr(click_logs, "CHUNK_ROWS", 8)
    click_logs.shuffle_destinations(rows, 0, tmp_path / "destination.npy", Checkpoint(tmp_path / "order", {"x": 1}))
    destination = np.load(tmp_path / "destination.npy", mmap_mode="r")
    rng = np.random.default_rng(5)
    part = {
        "dense": rng.random((40, 13), dtype=np.float32),
        "labels": np.ones((40, 1), np.int32),
        **{f"sparse_{k}": np.arange(40, dtype=np.int32) + k for k in range(26)},
    }

    def scatter(folder: str, checkpoint: Checkpoint) -> list[bytes]:
        files = [tmp_path / folder / f"to_{e}.npy" for e in range(from_raw.TRAINING_DAYS)]
        (tmp_path / folder).mkdir(exist_ok=True)
        click_logs.scatter_day(3, rows, destination, part, files, checkpoint)
        return [file.read_bytes() for file in files]

    whole = scatter("whole", Checkpoint(tmp_path / "w", {"x": 1}))
    with killed_at_a_save(monkeypatch, lambda values: values.get("rows") == 24):
        scatter("part", Checkpoint(tmp_path / "p", {"x": 1}))
    resumed = Checkpoint(tmp_path / "p", {"x": 1})
    assert resumed.get("rows") == 16
    assert scatter("part", resumed) == whole


# ---- every shard in order, against the reference's steps ----


def _hashes(seed: int) -> list[np.ndarray]:
    teacher = criteo.Teacher(seed, SMALL)
    return [np.random.default_rng([seed, 99]).choice(2**32, n, replace=False).astype(np.uint32) for n in teacher.sizes]


def run_every_shard(raw: Path, root: Path, scale: str = "tiny") -> Path:
    shards = root / "shards"
    for shard in from_raw.shards(scale):
        from_raw.prepare_shard(shard, {"click_logs": raw, "shards": shards}, shards / shard, scale)
    return shards


def test_every_shard_in_order_gives_the_reference_s_one_hot_days_and_multi_hot_files(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    raw_click_logs.generate(raw, 77, SMALL)
    monkeypatch.setattr(from_raw, "training_rows", lambda scale: from_raw.TRAINING_DAYS * SMALL.rows_per_train_day)
    shards = run_every_shard(raw, tmp_path)
    # the reference's steps, whole arrays in memory
    days = []
    for d in range(criteo.DAYS):
        text = zlib.decompressobj(zlib.MAX_WBITS | 32).decompress((raw / f"day_{d}.gz").read_bytes())
        if d == raw_click_logs.CUT_DAY:
            text = text[: text.rfind(b"\n") + 1]
        days.append(oracle_day(text))
    contiguous = oracle_contiguous([sparse for _, _, sparse in days])
    shuffled = oracle_shuffle([dense for _, dense, _ in days], contiguous, [labels for labels, _, _ in days])
    sizes, hot = published.num_embeddings("tiny"), from_raw.multi_hot_sizes("tiny")
    np.random.seed(0)  # multi_hot.py's tables: seed 0, per feature the id then randint(0, n, (n, hot - 1))
    tables = [
        np.concatenate([np.arange(n)[:, None], np.random.randint(0, n, size=(n, h - 1))], axis=1).astype(np.int32) for n, h in zip(sizes, hot, strict=True)
    ]
    for d in range(criteo.DAYS):
        one_hot = from_raw.one_hot_files(shards / f"one_hot_day_{d}", d)
        want_dense, want_sparse, want_labels = shuffled[d]
        assert np.array_equal(np.load(one_hot["dense"]), want_dense) and np.array_equal(np.load(one_hot["labels"]), want_labels), d
        assert np.array_equal(np.load(one_hot["sparse"]), want_sparse), d
        names = criteo.day_files(d)
        final = shards / f"multihot_day_{d}"
        for k in (0, 7, 20, 25):
            want = tables[k][want_sparse[:, k] % sizes[k]]
            assert np.array_equal(np.asarray(criteo.load_multi_hot(final / names["sparse"], k)), want), (d, k)
        assert np.array_equal(np.load(final / names["dense"]), want_dense)
    assert not (tmp_path / "scratch").exists() or not any((tmp_path / "scratch").iterdir()), "every shard removed its scratch"
    layout = from_raw.layout("tiny")
    assert set(layout) == set(published.layout("tiny")), "the runs read the same tree either way"
    assert all((shards / target).is_file() for target in layout.values())


def test_click_logs_of_another_size_stop_before_the_shuffle_with_what_to_do(tmp_path):
    raw = tmp_path / "raw"
    raw_click_logs.generate(raw, 78, SMALL)
    shards = tmp_path / "shards"
    for shard in from_raw.shards("tiny")[: from_raw.shards("tiny").index("shuffle_order")]:
        from_raw.prepare_shard(shard, {"click_logs": raw, "shards": shards}, shards / shard, "tiny")
    with pytest.raises(UserError) as err:
        from_raw.prepare_shard("shuffle_order", {"click_logs": raw, "shards": shards}, shards / "shuffle_order", "tiny")
    message = str(err.value)
    assert "raw days 0-22 hold 2,760 rows; the MLPerf Criteo 1TB training set has 1,104,000" in message
    assert "use the default preparation (the published dataset)" in message
    assert (shards / "contiguous_25" / "day_23.npy").is_file(), "the earlier shards stay"


# ---- the config switch ----


def test_the_config_picks_the_preparation_its_shards_inputs_and_commands(workdir):
    default = make_plan(workdir)
    assert default.of("dlrm_dcnv2").preparation() == "default" and default.of("dlrm_dcnv2").shard_names() == published.shards("tiny")
    chosen = make_plan(workdir, preparation={"dlrm_dcnv2": "from_raw"})
    assert chosen.of("dlrm_dcnv2").shard_names() == from_raw.shards("tiny") and len(from_raw.shards("full")) == 124
    assert chosen.of("dlrm_dcnv2").preprocess_inputs("raw_day_3") == {
        "click_logs": "resources/tiny/datasets/criteo_1tb_click_logs",
        "click_logs_verified": "resources/tiny/verified/criteo_1tb_click_logs.json",
    }
    inputs = chosen.of("dlrm_dcnv2").preprocess_inputs("scatter_day_4")
    assert inputs["shard_raw_day_4"] == "resources/tiny/prepared/dlrm_dcnv2/shards/raw_day_4" and "shard_shuffle_order" in inputs
    assert chosen.of("dlrm_dcnv2").preprocess_args("scatter_day_4") == (
        "--input click_logs=resources/tiny/datasets/criteo_1tb_click_logs"
        " --verified click_logs=resources/tiny/verified/criteo_1tb_click_logs.stamps.json"
        " --input shards=resources/tiny/prepared/dlrm_dcnv2/shards --preparation from_raw"
    )
    assert chosen.of("dlrm_dcnv2").preparation_args() == "--preparation from_raw" and default.of("dlrm_dcnv2").preparation_args() == ""
    assert chosen.of("dlrm_dcnv2").shard_resources("contiguous_3") == {"mem_mb": 2000, "runtime": 10}
    with pytest.raises(ConfigError) as err:
        make_plan(workdir, preparation={"dlrm_dcnv2": "from_tsv"})
    assert str(err.value).startswith("config: preparation.dlrm_dcnv2: dlrm_dcnv2 has no preparation 'from_tsv'; it offers default (prepare.py); from_raw (")
    with pytest.raises(ConfigError, match=r"config: preparation.nope: names no benchmark"):
        make_plan(workdir, preparation={"nope": "from_raw"})
    with pytest.raises(ConfigError, match=r"config: preparation.bert: bert has no preparation 'from_raw'; it offers default \(prepare.py\)$"):
        make_plan(workdir, preparation={"bert": "from_raw"})


def test_full_scale_resources_bound_each_kind_of_shard():
    kinds = {from_raw._kind(shard)[0] for shard in from_raw.shards("full")}
    assert kinds == set(from_raw.FULL_RESOURCES)
    assert max(r["mem_mb"] for r in from_raw.FULL_RESOURCES.values()) <= 48_000, "no shard needs the reference's 700 GB"
    assert multihot.CHUNK_ROWS <= 1 << 22 and click_logs.CHUNK_ROWS <= 1 << 22 and click_logs.NUMBERING_CHUNK_ROWS <= 1 << 24


def test_an_inversion_whose_output_was_lost_starts_again_rather_than_resume_into_an_empty_file(tmp_path, monkeypatch):
    monkeypatch.setattr(click_logs, "CHUNK_ROWS", 8)
    rows = [30, 25, 40]
    click_logs.shuffle_destinations(rows, 0, tmp_path / "whole.npy", Checkpoint(tmp_path / "a", {"x": 1}))
    with killed_at_a_save(monkeypatch, lambda values: values.get("inverted") == 24):
        click_logs.shuffle_destinations(rows, 0, tmp_path / "lost.npy", Checkpoint(tmp_path / "b", {"x": 1}))
    (tmp_path / "lost.npy").unlink()  # the checkpoint says 16 rows are inverted, but their file is gone
    resumed = Checkpoint(tmp_path / "b", {"x": 1})
    assert resumed.get("inverted") == 16
    click_logs.shuffle_destinations(rows, 0, tmp_path / "lost.npy", resumed)
    assert np.array_equal(np.load(tmp_path / "lost.npy"), np.load(tmp_path / "whole.npy"))
