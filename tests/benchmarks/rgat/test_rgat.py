"""rgat pieces without Snakemake: the IGBH-shaped generator, the COO->CSC conversion, the split, the sampler."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mlperf_wf.acquire import prepare
from mlperf_wf.benchmarks.rgat import igbh, trainer
from mlperf_wf.benchmarks.rgat import prepare as prep
from mlperf_wf.config.registry import load_dataset
from mlperf_wf.errors import UserError

ROOT = Path(__file__).resolve().parents[3]
SMALL = igbh.GraphShape(papers=600, authors=300, institutes=10, fos=16, classes=4, feature_dim=8)


@pytest.fixture(scope="module")
def small_graph(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("igbh")
    igbh.generate(data, seed=3, shape=SMALL)
    return data


@pytest.fixture(scope="module")
def prepared(small_graph, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("prepared")
    for shard in prep.shards("tiny"):
        prep.prepare_shard(shard, {"data": small_graph}, root / "shards" / shard, "tiny")
        prepare.record_shard(root / "shards" / shard)
    prepare.assemble(prep.layout("tiny"), root / "shards", root / "dataset")
    return root / "dataset"


def test_generated_graph_has_the_published_igbh_layout_and_formats(small_graph):
    published = {f.path for f in load_dataset("igbh_full", ROOT).files}
    written = {p.relative_to(small_graph).as_posix() for p in small_graph.rglob("*") if p.is_file()}
    assert written <= published, written - published
    # IGBH-full has journal/conference too; the tiny graph has the four core node types and their relations
    assert {p for p in published - written if "journal" not in p and "conference" not in p} == set()
    processed = small_graph / igbh.ROOT
    cites = np.load(processed / "paper__cites__paper/edge_index.npy")
    assert cites.dtype == np.int64 and cites.shape == (SMALL.papers * SMALL.cites_per_paper, 2)
    assert np.load(processed / "paper/node_label_2K.npy").dtype == np.float32
    assert np.load(processed / "author/node_feat.npy").shape == (SMALL.authors, SMALL.feature_dim)


def test_generator_is_deterministic_per_seed():
    a, b, c = igbh.make_graph(1, SMALL), igbh.make_graph(1, SMALL), igbh.make_graph(2, SMALL)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["paper__cites__paper/edge_index.npy"], c["paper__cites__paper/edge_index.npy"])


def test_paper_features_alone_stay_far_below_the_target():
    """The data design: a classifier of a paper's own features cannot reach 0.72; neighbours are needed."""
    graph = igbh.make_graph(5101)
    x = torch.from_numpy(graph["paper/node_feat.npy"])
    y = torch.from_numpy(graph["paper/node_label_2K.npy"]).long()
    train, val = slice(0, 24000), slice(24000, None)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, int(y.max()) + 1))
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    best = 0.0
    for _ in range(150):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(model(x[train]), y[train]).backward()
        optimiser.step()
        with torch.no_grad():
            best = max(best, float((model(x[val]).argmax(1) == y[val]).float().mean()))
    assert 0.3 < best < 0.6


def _reference_csc(src: np.ndarray, dst: np.ndarray, n_dst: int) -> list[list[int]]:
    buckets: list[list[int]] = [[] for _ in range(n_dst)]
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        buckets[d].append(s)
    return buckets


def test_coo_to_csc_streams_in_chunks_and_keeps_input_order(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 50, 1000), rng.integers(0, 40, 1000)
    monkeypatch.setattr(prep, "CHUNK_ROWS", 64)  # many chunks: the scatter must carry its fill pointers across them
    chunks = [(src[i : i + 64], dst[i : i + 64]) for i in range(0, 1000, 64)]
    indptr, indices = prep.coo_to_csc(lambda skip: iter(chunks[skip:]), 40, prep.Checkpoint(tmp_path / "scratch", {"data": 1}))
    expected = _reference_csc(src, dst, 40)
    assert indptr.tolist() == np.cumsum([0] + [len(b) for b in expected]).tolist()
    assert [indices[indptr[d] : indptr[d + 1]].tolist() for d in range(40)] == expected


def test_coo_to_csc_rejects_an_out_of_range_destination(tmp_path):
    with pytest.raises(UserError, match="out of range"):
        prep.coo_to_csc(lambda skip: iter([(np.array([0]), np.array([7]))][skip:]), 5, prep.Checkpoint(tmp_path / "scratch", {"data": 1}))


class Killed(Exception):
    pass


def test_a_killed_csc_conversion_resumes_at_its_last_checkpoint(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, 30, 2000), rng.integers(0, 20, 2000)
    chunks = [(src[i : i + 50], dst[i : i + 50]) for i in range(0, 2000, 50)]  # 40 chunks
    monkeypatch.setattr(prep, "CHECKPOINT_EVERY", 8)
    passes = []

    def dying(skip):  # the scatter pass dies in chunk 21
        passes.append(skip)
        for number, chunk in enumerate(chunks[skip:], start=skip + 1):
            if len(passes) == 2 and number == 21:
                raise Killed
            yield chunk

    with pytest.raises(Killed):
        prep.coo_to_csc(dying, 20, prep.Checkpoint(tmp_path / "scratch", {"data": 1}))
    resumed = prep.Checkpoint(tmp_path / "scratch", {"data": 1})
    assert resumed.get("degrees_done") == 1 and resumed.get("chunks_scattered") == 16

    def poisoned(skip):  # chunks scattered before the checkpoint must not be asked for again: garbage there proves it
        for number, (s_chunk, d_chunk) in enumerate(chunks, start=1):
            if number > skip:
                yield (np.full_like(s_chunk, 999), d_chunk) if number <= 16 else (s_chunk, d_chunk)

    indptr, indices = prep.coo_to_csc(poisoned, 20, resumed)
    expected = _reference_csc(src, dst, 20)
    assert [indices[indptr[d] : indptr[d + 1]].tolist() for d in range(20)] == expected
    # data changed since the checkpoint: start afresh instead of mixing
    assert prep.Checkpoint(tmp_path / "scratch", {"data": 2}).get("chunks_scattered") == 0


def test_edge_chunks_after_a_checkpoint_leave_the_skipped_blocks_unread(small_graph, monkeypatch):
    processed = small_graph / igbh.ROOT
    monkeypatch.setattr(prep, "CHUNK_ROWS", 500)  # cites: 8 blocks x 2 directions, then 2 x 2 self-loop chunks
    cites = prep._relation("tiny", "paper__cites__paper")
    everything = list(prep._chunks(cites, processed, SMALL.papers))
    assert len(everything) == 20
    real_edges = prep._edges
    blocks_read: list[int] = []

    class Watched:
        def __init__(self, array: np.ndarray) -> None:
            self.array = array

        def __len__(self) -> int:
            return len(self.array)

        def __getitem__(self, rows: slice) -> np.ndarray:
            blocks_read.append(rows.start)
            return self.array[rows]

    monkeypatch.setattr(prep, "_edges", lambda folder, name: Watched(real_edges(folder, name)))
    for skip in (0, 3, 4, 17):
        blocks_read.clear()
        tail = list(prep._chunks(cites, processed, SMALL.papers, skip))
        assert len(tail) == 20 - skip
        assert all(np.array_equal(x, y) for got, want in zip(tail, everything[skip:], strict=True) for x, y in zip(got, want, strict=True))
        assert blocks_read == [start for start in range(0, 8 * 500, 500) if start >= skip // 2 * 500]


def test_a_killed_fp16_cast_resumes_after_its_last_saved_row(tmp_path, monkeypatch):
    source = np.random.default_rng(2).standard_normal((100, 4)).astype(np.float32)
    monkeypatch.setattr(prep, "CHUNK_ROWS", 40)  # 10 rows per chunk

    class Dying(np.ndarray):
        def __getitem__(self, item):
            if isinstance(item, slice) and item.start == 60:
                raise Killed
            return np.asarray(self).__getitem__(item)

    with pytest.raises(Killed):
        prep.cast_to_half(source.view(Dying), prep.Checkpoint(tmp_path / "scratch", {"f": 1}))
    resumed = prep.Checkpoint(tmp_path / "scratch", {"f": 1})
    assert resumed.get("rows_done") == 60
    poisoned = source.copy()
    poisoned[:60] = 7.0  # rows already cast are not read again
    half = prep.cast_to_half(poisoned, resumed)
    assert np.array_equal(half, source.astype(np.float16))


def test_prepared_tree_is_the_reference_conversion(small_graph, prepared):
    """CSC per edge type as compress_graph.py builds it: reverse relations, and cites symmetrised with self loops."""
    processed = small_graph / igbh.ROOT
    tree = prepared / prep.ROOT
    cites = np.load(processed / "paper__cites__paper/edge_index.npy")
    a, b = cites[:, 0], cites[:, 1]
    keep = a != b
    loops = np.arange(SMALL.papers)
    a, b = np.concatenate([a[keep], loops]), np.concatenate([b[keep], loops])
    # reference: edge_dict[cites] = (cat[dst, src], cat[src, dst]) as (row, col); CSC groups by col
    rows, cols = np.concatenate([b, a]), np.concatenate([a, b])
    indptr = torch.load(tree / "CSC/paper__cites__paper/indptr.pt")
    indices = torch.load(tree / "CSC/paper__cites__paper/indices.pt")
    expected = _reference_csc(rows, cols, SMALL.papers)
    assert [sorted(indices[indptr[d] : indptr[d + 1]].tolist()) for d in range(SMALL.papers)] == [sorted(x) for x in expected]
    written = np.load(processed / "paper__written_by__author/edge_index.npy")
    rev_ptr = torch.load(tree / "CSC/author__rev_written_by__paper/indptr.pt")
    rev_idx = torch.load(tree / "CSC/author__rev_written_by__paper/indices.pt")
    expected = _reference_csc(written[:, 1], written[:, 0], SMALL.papers)  # authors -> papers
    assert [sorted(rev_idx[rev_ptr[p] : rev_ptr[p + 1]].tolist()) for p in range(SMALL.papers)] == [sorted(x) for x in expected]
    assert {p.name for p in (tree / "CSC").iterdir()} == {r.key for r in prep.RELATIONS["tiny"]}
    half = torch.load(tree / "paper/node_feat_fp16.pt")
    assert half.dtype == torch.float16 and torch.equal(half, torch.from_numpy(np.load(processed / "paper/node_feat.npy")).half())


def test_split_is_split_seeds_py(prepared):
    tree = prepared / prep.ROOT
    train, val = torch.load(tree / "train_idx.pt"), torch.load(tree / "val_idx.pt")
    assert len(train) == int(SMALL.papers * 0.6) and len(val) == int(SMALL.papers * prep.VALIDATION_FRACTION["tiny"])
    assert not set(train.tolist()) & set(val.tolist())
    shuffled = torch.randperm(SMALL.papers, generator=torch.Generator().manual_seed(42))
    assert torch.equal(train, shuffled[: len(train)])


def test_raw_igbh_full_arrays_are_read_without_a_header(tmp_path):
    """IGBH-large/full store paper/author features as raw float32 rows of 1024 (the reference memory-maps them)."""
    raw = tmp_path / "node_feat.npy"
    np.arange(3 * prep.FEATURE_DIM_RAW, dtype=np.float32).tofile(raw)
    loaded = prep.load_array(raw, "float32", prep.FEATURE_DIM_RAW)
    assert loaded.shape == (3, prep.FEATURE_DIM_RAW) and loaded[2, 0] == 2 * prep.FEATURE_DIM_RAW
    np.arange(10, dtype=np.float32).tofile(raw)
    with pytest.raises(UserError, match="not a whole number"):
        prep.load_array(raw, "float32", prep.FEATURE_DIM_RAW)


def test_full_scale_shards_cover_every_published_relation_and_node_type():
    names = prep.shards("full")
    assert len(names) == 19 and len(set(names)) == 19
    for relation in ("paper__published__journal", "journal__rev_published__paper", "conference__rev_venue__paper"):
        assert f"csc__{relation}" in names
    assert {"feat__journal", "feat__conference", "labels", "split"} <= set(names)


def test_assemble_links_are_relative_and_refuse_missing_shard_files(prepared, tmp_path):
    link = prepared / prep.ROOT / "CSC/paper__cites__paper/indptr.pt"
    assert link.is_symlink() and not Path(link.readlink()).is_absolute()
    with pytest.raises(UserError, match="shards lack"):
        prepare.assemble({"x.pt": "nowhere/x.pt"}, prepared.parent / "shards", tmp_path / "tree")


def test_sampler_draws_existing_distinct_edges_up_to_the_fan_out(prepared):
    graph = trainer.load_graph(prepared)
    indptr, indices = graph.csc[("paper", "cites", "paper")]
    nodes = torch.arange(0, 100)
    owner, sources = trainer.sample_in_neighbours(indptr, indices, nodes, 3, torch.Generator().manual_seed(0))
    for position, node in enumerate(nodes.tolist()):
        mine = sources[owner == position].tolist()
        neighbours = indices[indptr[node] : indptr[node + 1]].tolist()
        assert len(mine) == min(3, len(neighbours))
        remaining = list(neighbours)
        for s in mine:  # a sample without replacement of the neighbour list (a multiset: cites repeats self loops)
            remaining.remove(s)


def test_sampled_subgraph_starts_with_the_seeds(prepared):
    graph = trainer.load_graph(prepared)
    seeds = graph.train_idx[:16]
    node_ids, edge_index = trainer.sample_subgraph(graph, seeds, [4, 2], torch.Generator().manual_seed(0))
    assert torch.equal(node_ids["paper"][:16], seeds)
    for (src, _, dst), pairs in edge_index.items():
        assert int(pairs[0].max()) < len(node_ids[src]) and int(pairs[1].max()) < len(node_ids[dst])
