"""Data preparation for rgat (IGBH): the reference's ``compress_graph.py`` and ``split_seeds.py`` as shards.

The reference converts every edge type from COO to CSC (``CSC/<etype>/indptr.pt``
and ``indices.pt``, with the reverse relations and a symmetrised ``cites`` with
self loops), casts every node type's features to fp16 (``<type>/node_feat_fp16.pt``)
and draws the train/validation seeds (``train_idx.pt``/``val_idx.pt``, torch seed 42,
60 % train, 0.5 % validation of the labelled papers). Here each of those arrays is one
shard: its own Snakemake job, cached on its own, so a killed preparation redoes only
the shards that had not finished, and a second workflow directory reuses them.

The conversion streams: two passes over the COO array in chunks (a degree count, then
a scatter into a memory-mapped ``indices``), so memory grows with the number of
destination nodes, not edges (5.8 B edges at full scale), and the fp16 cast reads
and writes in row chunks. Both checkpoint into ``prepared/<benchmark>/scratch/<shard>``,
so a shard killed after hours resumes at its last checkpoint instead of its start. ``layout`` maps the shards into the reference's folder
tree (``full/processed/...``), which the reference container reads with
``--path {data} --dataset_size full --layout CSC --use_fp16``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlperf_wf.acquire.prepare import Checkpoint, scratch_for, source_identity
from mlperf_wf.errors import UserError

ROOT = "full/processed"
"""Where the published files live in the dataset, and the prepared tree the reference reads."""
FEATURE_DIM_RAW = 1024
"""IGBH-large/full store paper and author features as raw float32 rows of this width (no .npy header)."""
SPLIT_SEED = 42
"""split_seeds.py --random_seed default."""
TRAIN_FRACTION = 0.6
"""split_seeds.py: the first 60 % of the shuffled labelled papers train."""
VALIDATION_FRACTION = {"full": 0.005, "tiny": 0.2}
"""split_seeds.py --validation_frac default (788,380 seeds at full scale); the tiny graph is
10^4 times smaller, so it validates on a larger share to keep the accuracy estimate stable."""
LABELLED_PAPERS_FULL = 157_675_969
"""Papers with a node_label_2K label in IGBH-full (split_seeds.py); the others are unlabelled."""
CHUNK_ROWS = 1 << 22
"""Edges (or feature rows) per streamed chunk."""


@dataclass(frozen=True)
class Relation:
    """One CSC edge type of the prepared graph, made from a published COO file."""

    src: str
    name: str
    dst: str
    source_file: str
    """Published ``<a>__<rel>__<b>`` folder the edges come from."""
    reverse: bool = False
    """Swap the published columns (the rev_* types the reference adds)."""
    symmetric_with_self_loops: bool = False
    """cites: drop self loops, add one per node, then both directions (as the reference)."""

    @property
    def key(self) -> str:
        return f"{self.src}__{self.name}__{self.dst}"


def _relations(published: list[tuple[str, str, str]]) -> list[Relation]:
    out = []
    for src, name, dst in published:
        folder = f"{src}__{name}__{dst}"
        if (src, name, dst) == ("paper", "cites", "paper"):
            out.append(Relation(src, name, dst, folder, symmetric_with_self_loops=True))
            continue
        out.append(Relation(src, name, dst, folder))
        out.append(Relation(dst, f"rev_{name}", src, folder, reverse=True))
    return out


_PUBLISHED_TINY = [("paper", "cites", "paper"), ("paper", "written_by", "author"), ("author", "affiliated_to", "institute"), ("paper", "topic", "fos")]
_PUBLISHED_FULL = [*_PUBLISHED_TINY, ("paper", "published", "journal"), ("paper", "venue", "conference")]
NODE_TYPES = {"tiny": ["paper", "author", "institute", "fos"], "full": ["paper", "author", "institute", "fos", "journal", "conference"]}
RELATIONS = {"tiny": _relations(_PUBLISHED_TINY), "full": _relations(_PUBLISHED_FULL)}
"""The tiny graph has IGBH's four core node types; journal and conference exist only in IGBH-large/full."""


def _relation(scale: str, key: str) -> Relation:
    for relation in RELATIONS[scale]:
        if relation.key == key:
            return relation
    raise UserError(f"rgat: no edge type {key!r} at scale {scale}; known: {[r.key for r in RELATIONS[scale]]}")


def shards(scale: str) -> list[str]:
    """Every shard of the preparation: one per edge type, per node type's features, labels and the split."""
    return [f"csc__{r.key}" for r in RELATIONS[scale]] + [f"feat__{t}" for t in NODE_TYPES[scale]] + ["labels", "split"]


def layout(scale: str) -> dict[str, str]:
    """Prepared-tree path -> ``<shard>/<file>``: the reference's ``full/processed`` folder."""
    tree = {}
    for relation in RELATIONS[scale]:
        for name in ("indptr.pt", "indices.pt"):
            tree[f"{ROOT}/CSC/{relation.key}/{name}"] = f"csc__{relation.key}/{name}"
    for node_type in NODE_TYPES[scale]:
        tree[f"{ROOT}/{node_type}/node_feat_fp16.pt"] = f"feat__{node_type}/node_feat_fp16.pt"
    for name in ("node_label_2K.npy", "node_label_19.npy"):
        tree[f"{ROOT}/paper/{name}"] = f"labels/{name}"
    for name in ("train_idx.pt", "val_idx.pt"):
        tree[f"{ROOT}/{name}"] = f"split/{name}"
    return tree


def resources(shard: str, scale: str) -> dict[str, int]:
    """Scheduler resources of one shard (full scale: the paper arrays are the big ones)."""
    if scale == "tiny":
        return {"mem_mb": 2000, "runtime": 10}
    if shard in ("feat__paper", "feat__author", "csc__paper__cites__paper"):
        return {"mem_mb": 64000, "runtime": 1440}
    return {"mem_mb": 32000, "runtime": 720}


# ---- reading the published arrays ----


def _is_npy(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(6) == b"\x93NUMPY"


def load_array(path: Path, dtype: str = "float32", width: int | None = None) -> np.ndarray:
    """Memory-map a published array: a real .npy, or a raw dump (IGBH-large/full features and labels)."""
    if not path.is_file():
        raise UserError(f"{path}: missing; the verified IGBH dataset should contain it")
    if _is_npy(path):
        return np.load(path, mmap_mode="r")
    itemsize = np.dtype(dtype).itemsize * (width or 1)
    size = path.stat().st_size
    if size % itemsize:
        raise UserError(f"{path}: {size} bytes is not a whole number of {dtype} rows of width {width or 1}")
    shape = (size // itemsize, width) if width else (size // itemsize,)
    return np.memmap(path, dtype=dtype, mode="r", shape=shape)


def node_features(processed: Path, node_type: str) -> np.ndarray:
    return load_array(processed / node_type / "node_feat.npy", "float32", FEATURE_DIM_RAW)


def node_count(processed: Path, node_type: str) -> int:
    return int(node_features(processed, node_type).shape[0])


def _edges(processed: Path, folder: str) -> np.ndarray:
    edges = load_array(processed / folder / "edge_index.npy", "int64")
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise UserError(f"{processed / folder / 'edge_index.npy'}: shape {edges.shape}; IGBH edge lists are (E, 2)")
    return edges


def _chunks(relation: Relation, processed: Path, n_dst: int, skip: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(src, dst) chunks of the relation's COO edges, after the reference's transformations.

    The first ``skip`` chunks are left out, and a block of the edge file that holds only
    skipped chunks is not read: a resumed scatter does not read again what it had placed.
    """
    edges = _edges(processed, relation.source_file)
    per_block = 2 if relation.symmetric_with_self_loops else 1
    number = 0  # chunks up to and including the current block
    for start in range(0, len(edges), CHUNK_ROWS):
        number += per_block
        if number <= skip:
            continue
        block = np.asarray(edges[start : start + CHUNK_ROWS])
        a, b = block[:, 0], block[:, 1]
        if relation.symmetric_with_self_loops:
            keep = a != b
            pieces = [(b[keep], a[keep]), (a[keep], b[keep])]
        else:
            pieces = [(b, a)] if relation.reverse else [(a, b)]
        yield from pieces[max(0, skip - (number - per_block)) :]
    if relation.symmetric_with_self_loops:
        for start in range(0, n_dst, CHUNK_ROWS):
            number += 2
            if number <= skip:
                continue
            loops = np.arange(start, min(start + CHUNK_ROWS, n_dst), dtype=np.int64)
            # once per direction, as the reference concatenates both
            yield from [(loops, loops), (loops, loops)][max(0, skip - (number - 2)) :]


CHECKPOINT_EVERY = 64
"""Chunks between two checkpoints of the CSC scatter (the fill pointers are saved: 8 bytes per node)."""


def _save_array(path: Path, array: np.ndarray) -> None:
    partial = path.with_suffix(".partial.npy")
    np.save(partial, array)
    partial.replace(path)


def coo_to_csc(chunks: Callable[[int], Iterable[tuple[np.ndarray, np.ndarray]]], n_dst: int, scratch: Checkpoint) -> tuple[np.ndarray, np.ndarray]:
    """CSC (indptr over destinations, indices = sources) of streamed COO ``(src, dst)`` chunks.

    Two passes over ``chunks(skip)`` (the chunks after the first ``skip``): in-degrees, then a
    counting-sort scatter into a memory-mapped ``indices`` file in the scratch folder. Within one
    destination, sources keep their input order. Both passes checkpoint; a rerun after a kill
    asks only for the chunks not yet scattered.
    """
    degree_file = scratch.folder / "degree.npy"
    if scratch.get("degrees_done") and degree_file.is_file():
        degree = np.load(degree_file)
    else:
        degree = np.zeros(n_dst, dtype=np.int64)
        for _src, dst in chunks(0):
            if len(dst) and (dst.min() < 0 or dst.max() >= n_dst):
                raise UserError(f"{scratch.folder.name}: destination id out of range [0, {n_dst})")
            degree += np.bincount(dst, minlength=n_dst)
        _save_array(degree_file, degree)
        scratch.save(degrees_done=1, chunks_scattered=0)
    indptr = np.zeros(n_dst + 1, dtype=np.int64)
    np.cumsum(degree, out=indptr[1:])
    indices_file, fill_file = scratch.folder / "indices.npy", scratch.folder / "fill.npy"
    resume_at = scratch.get("chunks_scattered")
    if resume_at and indices_file.is_file() and fill_file.is_file():
        indices = np.lib.format.open_memmap(indices_file, mode="r+")
        fill = np.load(fill_file)
    else:
        resume_at = 0
        indices = np.lib.format.open_memmap(indices_file, mode="w+", dtype=np.int64, shape=(int(indptr[-1]),))
        fill = indptr[:-1].copy()
    chunk_number = resume_at
    for chunk_number, (src, dst) in enumerate(chunks(resume_at), start=resume_at + 1):
        order = np.argsort(dst, kind="stable")
        dst_sorted = dst[order]
        uniq, start, count = np.unique(dst_sorted, return_index=True, return_counts=True)
        rank = np.arange(len(dst_sorted)) - np.repeat(start, count)
        indices[fill[dst_sorted] + rank] = src[order]
        fill[uniq] += count
        if chunk_number % CHECKPOINT_EVERY == 0:
            indices.flush()
            _save_array(fill_file, fill)
            scratch.save(chunks_scattered=chunk_number)
    indices.flush()
    scratch.save(chunks_scattered=chunk_number)
    return indptr, indices


def _torch_save_array(array: np.ndarray, target: Path) -> None:
    """``torch.save`` a (possibly memory-mapped) array as the reference's .pt tensors."""
    import torch

    torch.save(torch.from_numpy(array), target)  # from a memmap: written from the mapped pages, not copied into RAM


# ---- the shards ----


def _prepare_csc(relation: Relation, processed: Path, out_dir: Path) -> dict:
    n_dst = node_count(processed, relation.dst)
    n_src = node_count(processed, relation.src)
    source = processed / relation.source_file / "edge_index.npy"
    scratch = Checkpoint(scratch_for(out_dir), source_identity(source))
    indptr, indices = coo_to_csc(lambda skip: _chunks(relation, processed, n_dst, skip), n_dst, scratch)
    if len(indices) and int(indices.max()) >= n_src:
        raise UserError(f"{relation.source_file}: source id {int(indices.max())} is out of range for {n_src} {relation.src} nodes")
    _torch_save_array(indptr, out_dir / "indptr.pt")
    _torch_save_array(indices, out_dir / "indices.pt")
    del indices
    scratch.done()
    return {"edge_type": relation.key, "destinations": n_dst, "edges": int(indptr[-1])}


def cast_to_half(source: np.ndarray, scratch: Checkpoint) -> np.ndarray:
    """``source`` as float16 in the scratch folder, in row chunks; a rerun continues after the last saved row."""
    target = scratch.folder / "node_feat_fp16.npy"
    rows_done = scratch.get("rows_done")
    if rows_done and target.is_file():
        half = np.lib.format.open_memmap(target, mode="r+")
    else:
        rows_done = 0
        half = np.lib.format.open_memmap(target, mode="w+", dtype=np.float16, shape=source.shape)
    step = max(1, CHUNK_ROWS // max(1, source.shape[1]))
    for start in range(rows_done, source.shape[0], step):
        stop = min(start + step, source.shape[0])
        half[start:stop] = source[start:stop]
        half.flush()
        scratch.save(rows_done=stop)
    return half


def _prepare_features(node_type: str, processed: Path, out_dir: Path) -> dict:
    source = node_features(processed, node_type)
    scratch = Checkpoint(scratch_for(out_dir), source_identity(processed / node_type / "node_feat.npy"))
    half = cast_to_half(source, scratch)
    _torch_save_array(half, out_dir / "node_feat_fp16.pt")
    del half
    scratch.done()
    return {"node_type": node_type, "rows": int(source.shape[0]), "width": int(source.shape[1])}


def _prepare_labels(processed: Path, out_dir: Path) -> dict:
    counts = {}
    for name in ("node_label_2K.npy", "node_label_19.npy"):
        source = processed / "paper" / name
        labels = load_array(source, "float32")
        counts[name] = int(labels.shape[0])
        shutil.copyfile(source, out_dir / name)
    return {"labels": counts}


def _prepare_split(processed: Path, out_dir: Path, scale: str) -> dict:
    import torch

    labelled = LABELLED_PAPERS_FULL if scale == "full" else int(load_array(processed / "paper" / "node_label_2K.npy").shape[0])
    generator = torch.Generator().manual_seed(SPLIT_SEED)
    shuffled = torch.randperm(labelled, generator=generator)
    n_train = int(labelled * TRAIN_FRACTION)
    n_val = int(labelled * VALIDATION_FRACTION[scale])
    torch.save(shuffled[:n_train].clone(), out_dir / "train_idx.pt")
    torch.save(shuffled[n_train : n_train + n_val].clone(), out_dir / "val_idx.pt")
    return {"labelled": labelled, "train": n_train, "validation": n_val, "seed": SPLIT_SEED}


def prepare_shard(shard: str, inputs: dict[str, Path], out_dir: Path, scale: str) -> dict:
    """Write one shard into ``out_dir`` from the verified IGBH dataset ``inputs['data']``."""
    if shard not in shards(scale):
        raise UserError(f"rgat: unknown shard {shard!r} at scale {scale}; known: {', '.join(shards(scale))}")
    processed = inputs["data"] / ROOT
    out_dir.mkdir(parents=True, exist_ok=True)
    kind, _, name = shard.partition("__")
    if kind == "csc":
        summary = _prepare_csc(_relation(scale, name), processed, out_dir)
    elif kind == "feat":
        summary = _prepare_features(name, processed, out_dir)
    elif shard == "labels":
        summary = _prepare_labels(processed, out_dir)
    else:
        summary = _prepare_split(processed, out_dir, scale)
    summary = {"shard": shard, "scale": scale, **summary}
    (out_dir / "shard.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
