"""rgat's rehearsal: ``python train_rgnn_multi_gpu.py`` of retired_benchmarks/rgat (aa344c7) on the box.

graphlearn-for-pytorch (GLT 0.2.2, CUDA-only wheels) and torch_geometric do not import here, so the probe runs the
reference's own code from its files at the pinned commit without them: the module-level logger line and the
``__main__`` block of ``train_rgnn_multi_gpu.py`` (the reference's argparse parser on the job's arguments, its
``--path`` default and ``glt.utils.ensure_dir``, its mllog lines, ``world_size = torch.cuda.device_count()``) up to
``glt.data.Dataset``, GLT's graph and feature stores (the first GPU step: ``ZERO_COPY`` graph, pinned features); and
``dataset.py``'s own ``float2half`` and ``IGBHeteroDataset`` with the parsed flags (``--dataset_size full --layout
CSC --use_fp16 --in_memory 1``), every ``np.load``/``np.memmap``/``torch.load`` recorded and opened. At size ``full``
``dataset.py`` maps the labels with IGBH-full's paper count (``np.memmap(..., shape=(269346174,))``), which the tiny
file cannot hold: the probe maps the rows the file has and checks it is a raw float32 array (no ``.npy`` header, as
the reference reads it). ``torch.cuda.device_count()`` is the GPUs the job gives the container: SLURM's
``CUDA_VISIBLE_DEVICES`` for ``--gres=gpu:N`` under pyxis (enroot's NVIDIA hook exposes those). Under ``docker run
--gpus all`` the container sees every GPU of the node; the box's Docker node has no GPU a container can see, so there
the plan's GPUs per node stand in (recorded as such). The probe then spawns that many processes as the reference
does (``torch.multiprocessing.spawn``), each forming the world with ``run_training_proc``'s own rendezvous
(``MASTER_ADDR``/``MASTER_PORT`` as it sets them) over gloo.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import os
import random
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Literal

import numpy as np

from tests.rehearsal.spec import Rehearsal

REHEARSAL = Rehearsal(
    benchmark="rgat",
    image_files={"/workspace/repository": "mlcommons-training-aa344c7/retired_benchmarks/rgat"},
    entry=("train_rgnn_multi_gpu.py",),
    nodes=1,
    launchers=("pyxis", "docker"),
)

SCRIPT = "train_rgnn_multi_gpu.py"
FEATURE_WIDTH = 1024
"""IGBH's node features are 1024 float32 wide."""
NODES = {"paper": 96, "author": 80, "institute": 12, "fos": 16, "journal": 8, "conference": 6}
"""Tiny node counts of the published layout."""
RAW = ("paper/node_feat.npy", "author/node_feat.npy", "paper/node_label_19.npy", "paper/node_label_2K.npy")
"""Published IGBH-full files that are raw float32 dumps (no .npy header): dataset.py np.memmap's them at size full."""
EDGES = {
    "paper__cites__paper": ("paper", "paper"),
    "paper__written_by__author": ("paper", "author"),
    "author__affiliated_to__institute": ("author", "institute"),
    "paper__topic__fos": ("paper", "fos"),
    "paper__published__journal": ("paper", "journal"),
    "paper__venue__conference": ("paper", "conference"),
}
FIRST_GPU_STEP = "glt.data"
"""The first statement of the reference's __main__ block that the probe does not run (GLT's dataset stores)."""


def published(dataset_id: str, folder: Path) -> None:
    """IGBH-full as R2 publishes it (the catalog's 22 files, download_igbh_full.sh's tree), tiny contents."""
    if dataset_id != "igbh_full":
        raise ValueError(f"rgat does not read {dataset_id}")
    rng = np.random.default_rng(5101)
    root = folder / "full" / "processed"
    for node_type, count in NODES.items():
        (root / node_type).mkdir(parents=True, exist_ok=True)
        features = rng.standard_normal((count, FEATURE_WIDTH), dtype=np.float32)
        if f"{node_type}/node_feat.npy" in RAW:
            features.tofile(root / node_type / "node_feat.npy")
        else:
            np.save(root / node_type / "node_feat.npy", features)
        np.save(root / node_type / f"{node_type}_id_index_mapping.npy", np.arange(count, dtype=np.int64))
    for name, classes in (("node_label_19.npy", 19), ("node_label_2K.npy", 2983)):
        rng.integers(0, classes, NODES["paper"]).astype(np.float32).tofile(root / "paper" / name)
    for folder_name, (src, dst) in EDGES.items():
        (root / folder_name).mkdir(parents=True, exist_ok=True)
        edges = np.stack([rng.integers(0, NODES[src], 4 * NODES[src]), rng.integers(0, NODES[dst], 4 * NODES[src])], axis=1)
        np.save(root / folder_name / "edge_index.npy", edges.astype(np.int64))
    (root / "LICENSE.txt").write_text("Tiny stand-in for the rehearsal.\n")
    (root / "NOTICE.txt").write_text("Tiny stand-in for the rehearsal.\n")


def _definitions(ctx, script: str, names: set[str], namespace: dict) -> dict:
    """Top-level functions and classes of the reference's ``script``, compiled alone from its pinned source."""
    path = ctx.path(script, f"the reference's {script}", kind="file")
    body = [node for node in ast.parse(path.read_text(), str(path)).body if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in names]
    missing = names - {node.name for node in body}
    if missing:
        ctx.fail(f"{script} has no {', '.join(sorted(missing))} at the pinned commit")
    scope = {"__name__": f"reference:{script}", **namespace}
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), scope)  # the reference's own code
    return scope


class _Recorded:
    """A module as the reference's code sees it, every file it opens checked first (the rest is the module itself)."""

    def __init__(self, module, **overrides) -> None:
        self._module = module
        self.__dict__.update(overrides)

    def __getattr__(self, name):
        return getattr(self._module, name)


def _numpy(ctx):
    def load(path, *args, **kwargs):
        ctx.path(path, "dataset.py: np.load", kind="file")
        return np.load(path, *args, **kwargs)

    def memmap(path, dtype="uint8", mode="r+", shape=None, **kwargs):
        ctx.path(path, "dataset.py: np.memmap", kind="file")
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        row = np.dtype(dtype).itemsize * int(np.prod(shape[1:], dtype=np.int64))
        size = os.path.getsize(path)
        with open(path, "rb") as stream:
            header = stream.read(6)
        ctx.equal(f"{path}: a .npy header", header == b"\x93NUMPY", False, "dataset.py maps it as raw float32 from byte 0 (a header would shift every value)")
        ctx.equal(f"{path}: bytes modulo one {dtype} row", size % row, 0, "np.memmap of whole rows")
        ctx.record("value", f"np.memmap {path}", "dataset.py at size full", True, f"asks {shape}; the tiny file holds {size // row} rows, mapped as such")
        return np.memmap(path, dtype=dtype, mode=mode, shape=(size // row, *shape[1:]), **kwargs)

    return _Recorded(np, load=load, memmap=memmap)


def _torch(ctx, gpus: int):
    import torch

    def load(path, *args, **kwargs):
        ctx.path(path, "dataset.py: torch.load", kind="file")
        return torch.load(path, *args, **kwargs)

    # the image's CUDA: torch.cuda.device_count() is the GPUs the container sees
    cuda = SimpleNamespace(is_available=lambda: gpus > 0, device_count=lambda: gpus, synchronize=lambda: None)
    return _Recorded(torch, load=load, cuda=cuda)


def _glt() -> SimpleNamespace:
    """What the __main__ block calls of graphlearn_torch before its dataset stores (GLT 0.2.2's utils/common.py)."""
    import torch

    def ensure_dir(dir_path: str) -> None:
        if not os.path.exists(dir_path):
            os.makedirs(dir_path)

    def seed_everything(seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

    return SimpleNamespace(utils=SimpleNamespace(ensure_dir=ensure_dir, common=SimpleNamespace(seed_everything=seed_everything)))


def _visible_gpus(ctx) -> int:
    visible = ctx.env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = len([device for device in visible.split(",") if device])
        ctx.record("value", "torch.cuda.device_count()", "the GPUs the job gives the container (CUDA_VISIBLE_DEVICES from --gres)", True, str(count))
        return count
    if any(name.startswith("SLURM_") for name in ctx.env):
        ctx.fail("train_rgnn_multi_gpu.py:324 spawns torch.cuda.device_count() ranks, but the job set no CUDA_VISIBLE_DEVICES (no --gres=gpu?)")
    count = REHEARSAL.gpus_per_node
    ctx.record("assumed", "torch.cuda.device_count()", "docker run --gpus all: every GPU of the node; the box's container sees none", True, str(count))
    return count


def _rendezvous(ctx, tree: ast.Module) -> dict[str, str]:
    """The MASTER_ADDR/MASTER_PORT that run_training_proc sets before init_process_group."""
    found = {}
    function = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "run_training_proc")
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript) and isinstance(node.value, ast.Constant):
            key = node.targets[0].slice
            if isinstance(key, ast.Constant) and key.value in ("MASTER_ADDR", "MASTER_PORT"):
                found[key.value] = str(node.value.value)
    if set(found) != {"MASTER_ADDR", "MASTER_PORT"}:
        ctx.fail(f"{SCRIPT}: run_training_proc sets no constant MASTER_ADDR/MASTER_PORT at the pinned commit ({found})")
    return found


def probe(ctx) -> None:
    import sys

    from tests.rehearsal import probe as probing

    gpus = _visible_gpus(ctx)
    script = ctx.path(SCRIPT, "the reference's entry script", kind="file")
    tree = ast.parse(script.read_text(), str(script))
    torch_as_seen = _torch(ctx, gpus)
    numpy_as_seen = _numpy(ctx)
    reference = _definitions(
        ctx,
        "dataset.py",
        {"float2half", "IGBHeteroDataset"},
        {"np": numpy_as_seen, "torch": torch_as_seen, "osp": os.path, "Literal": Literal, "download_dataset": _no_download(ctx)},
    )

    sys.path.insert(0, str(ctx.cwd))
    import mlperf_logging.mllog.constants as mllog_constants
    from mlperf_logging_utils import get_mlperf_logger, submission_info  # the reference's, with the round patch

    logger_line = [node for node in tree.body if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "mllogger"]
    main = next(node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test))
    index = next((i for i, node in enumerate(main.body) if FIRST_GPU_STEP in ast.unparse(node)), None)
    if not logger_line or index is None:
        ctx.fail(f"{SCRIPT} has no module-level mllogger or no {FIRST_GPU_STEP} in its __main__ block at the pinned commit")
    scope = {
        "__name__": "__main__",
        "__file__": str(script.resolve()),
        "argparse": argparse,
        "datetime": datetime,
        "time": time,
        "os": os,
        "osp": os.path,
        "np": np,
        "torch": torch_as_seen,
        "glt": _glt(),
        "mllog_constants": mllog_constants,
        "get_mlperf_logger": get_mlperf_logger,
        "submission_info": submission_info,
        "IGBHeteroDataset": reference["IGBHeteroDataset"],
    }
    sys.argv = [SCRIPT, *ctx.argv]
    try:
        # the reference's own module-level logger and __main__ block, up to its first GPU step
        exec(compile(ast.Module(body=[*logger_line, *main.body[:index]], type_ignores=[]), str(script), "exec"), scope)
    except SystemExit as error:
        # dataset.py ends the process with exit() (status 0) where a CSC or split file is missing
        ctx.fail(f"the reference exited ({error.code!r}) before its first GPU step: see its message above")
    args, dataset, world_size = scope["args"], scope["igbh_dataset"], scope["world_size"]
    ctx.record("flags", "train_rgnn_multi_gpu.py argparse", "the reference's parser accepts the job's arguments", True, str(vars(args)))
    ctx.path(scope["root"], "glt.utils.ensure_dir(<repo>/../../data/igbh): the --path default, made before the parser runs", kind="dir")
    ctx.equal("etypes of the graph", len(dataset.etypes or []), 11 if args.dataset_size in ("large", "full") else 7, "dataset.py's CSC edge types")
    ctx.equal("paper labels", len(dataset.label), len(dataset.feat_dict["paper"]), "one label per paper feature row")
    papers = dataset.paper_nodes_num[args.dataset_size]
    for name in ("train_idx", "val_idx"):
        seeds = getattr(dataset, name)
        ctx.equal(f"{name} ids below {papers}", bool(seeds.numel()) and int(seeds.max()) < papers, True, "split_seeds.py draws labelled papers")
    ctx.equal("world_size (GPUs the reference spawns)", world_size, gpus, "train_rgnn_multi_gpu.py:324")
    rendezvous = _rendezvous(ctx, tree)
    probing.spawn_world(ctx, world_size, world_size, 0, rendezvous["MASTER_ADDR"], rendezvous["MASTER_PORT"])


def _no_download(ctx):
    def download_dataset(path, dataset_type, dataset_size):
        ctx.fail(f"dataset.py: {path}/{dataset_size}/processed does not exist, and the reference would download IGBH ({dataset_type}) there")

    return download_dataset
