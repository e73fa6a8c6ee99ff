"""dlrm_dcnv2's rehearsal: ``torchrun dlrm_main.py`` of recommendation_v2/torchrec_dlrm (aa344c7) on the box.

TorchRec 0.3.2 and fbgemm-gpu do not import with this machine's torch, so the probe runs the reference's own code
that does not need them, compiled from its files at the pinned commit: ``dlrm_main.parse_args`` (with its
``InteractionType``) on the job's arguments, then ``main``'s own post-processing and checks (comma lists to int lists,
its asserts on the multi-hot options, ``LOCAL_RANK`` and ``init_process_group``'s ``env://`` variables), and
``data/multi_hot_criteo.py``'s ``MultiHotCriteoIterDataPipe._load_from_npz`` on every member of every day's
``day_<d>_sparse_multi_hot.npz``. The files are those ``data/dlrm_dataloader.py:_get_in_memory_dataloader`` names
for the train (days 0..22) and val/test (day 23) stages under ``--synthetic_multi_hot_criteo_path``, the dense and
label arrays opened with ``np.load(mmap_mode="r")`` as the loader does with ``--mmap_mode``. The table sizes of the
command must be those the prepared tree records (``tables.json``). The log goes through the reference's own
``mlperf_logging_utils.submission_info`` and mllog (with the round patch, which writes rank 0's events to
``$COMPLIANCE_FILE``), as ``main`` starts (lines 660-661, 704).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import zipfile
from enum import Enum
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from tests.rehearsal.spec import Rehearsal

REHEARSAL = Rehearsal(
    benchmark="dlrm_dcnv2",
    image_files={"/workspace/torchrec_dlrm": "mlcommons-training-aa344c7/recommendation_v2/torchrec_dlrm"},
    entry=("dlrm_main.py",),
    nodes=1,
    launchers=("pyxis", "docker"),
)

DAYS = 24
"""torchrec.datasets.criteo.DAYS: days 0..22 train, day 23 validation and test."""
CAT_FEATURE_COUNT = 26
"""torchrec.datasets.criteo.CAT_FEATURE_COUNT (len(DEFAULT_CAT_NAMES))."""
DENSE_FEATURES = 13
ROWS_PER_DAY = 8
GLOBAL_BATCH = 65536
"""README.MD's GLOBAL_BATCH_SIZE (8 GPUs x --batch_size 8192)."""


def published(dataset_id: str, folder: Path) -> None:
    """criteo_multihot_v3.0_reference: the 24 days' dense, labels and multi-hot files (tiny rows, published shapes)."""
    if dataset_id != "criteo_1tb_multihot_reference":
        raise ValueError(f"dlrm_dcnv2 does not read {dataset_id}")
    from mlperf_wf.benchmarks.dlrm_dcnv2.prepare import MULTI_HOT_SIZES_FULL, NUM_EMBEDDINGS_FULL

    rng = np.random.default_rng(1515)
    for day in range(DAYS):
        np.save(folder / f"day_{day}_dense.npy", rng.random((ROWS_PER_DAY, DENSE_FEATURES), dtype=np.float32))
        np.save(folder / f"day_{day}_labels.npy", rng.integers(0, 2, (ROWS_PER_DAY, 1), dtype=np.int32))
        members = {
            str(feature): rng.integers(0, min(rows, 1000), (ROWS_PER_DAY, hot), dtype=np.int32)
            for feature, (rows, hot) in enumerate(zip(NUM_EMBEDDINGS_FULL, MULTI_HOT_SIZES_FULL, strict=True))
        }
        np.savez(folder / f"day_{day}_sparse_multi_hot.npz", **members)  # uncompressed, as the materialization writes


def _reference_definition(ctx, script: str, name: str, namespace: dict, within: str | None = None):
    """A class or function of the reference's file (a method of class ``within``), compiled alone from its source."""
    path = ctx.path(script, f"the reference's {name}", kind="file")
    body = ast.parse(path.read_text(), str(path)).body
    if within:
        body = next(node.body for node in body if isinstance(node, ast.ClassDef) and node.name == within)
    found = [node for node in body if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name]
    if not found:
        ctx.fail(f"{script} has no {name} at the pinned commit")
    scope = {"__name__": f"reference:{script}", **namespace}
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), scope)  # the reference's own code
    return scope[name]


def _numpy_of_the_image():
    """numpy as the reference's _load_from_npz uses it: numpy 1.x (the image's) has ``np.lib.format._read_array_header``,
    which numpy 2 (this machine's) keeps in ``numpy.lib._format_impl``."""
    if hasattr(np.lib.format, "_read_array_header"):
        return np
    from numpy.lib import _format_impl

    header = SimpleNamespace(read_magic=np.lib.format.read_magic, _read_array_header=_format_impl._read_array_header)
    return SimpleNamespace(memmap=np.memmap, lib=SimpleNamespace(format=header))


def probe(ctx) -> None:
    interaction_type = _reference_definition(ctx, "dlrm_main.py", "InteractionType", {"Enum": Enum})
    parse_args = _reference_definition(ctx, "dlrm_main.py", "parse_args", {"argparse": argparse, "List": list, "InteractionType": interaction_type})
    args = parse_args(ctx.argv)
    for name, value in vars(args).items():  # main (dlrm_main.py:664-668)
        try:
            vars(args)[name] = list(map(int, value.split(",")))
        except (ValueError, AttributeError):
            pass
    ctx.record("flags", "dlrm_main.parse_args", "the reference's parser accepts the job's arguments", True)
    if args.multi_hot_sizes is not None or args.multi_hot_distribution_type is not None or args.in_memory_binary_criteo_path is not None:
        ctx.fail(
            "dlrm_main.py:679-689: --multi_hot_sizes, --multi_hot_distribution_type and --in_memory_binary_criteo_path do not go with the materialized dataset"
        )
    for name in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        ctx.variable(name, "dlrm_main.py:691 reads LOCAL_RANK; dist.init_process_group's env:// reads the rest")
    ctx.equal("--interaction_type", str(args.interaction_type), "dcn", "DLRM_DCN (dlrm_main.py:756)")
    tables = args.num_embeddings_per_feature
    ctx.equal(
        "tables in --num_embeddings_per_feature", len(tables or []), CAT_FEATURE_COUNT, "one EmbeddingBagConfig per DEFAULT_CAT_NAMES (dlrm_main.py:731-741)"
    )
    world = int(ctx.env["WORLD_SIZE"])
    ctx.record(
        "value",
        "global batch",
        "dlrm_main.py:707 logs WORLD_SIZE x --batch_size",
        True,
        f"{world} x {args.batch_size} = {world * args.batch_size} ({GLOBAL_BATCH} with README.MD's 8 GPUs)",
    )

    root = args.synthetic_multi_hot_criteo_path
    prepared = json.loads(ctx.opens(os.path.join(root, "tables.json"), "the table sizes the preparation checked the ids against", size=1 << 16))
    ctx.equal("--num_embeddings_per_feature", tables, prepared["num_embeddings_per_feature"], "every id of the prepared days lies inside its table")
    load_from_npz = _reference_definition(
        ctx, "data/multi_hot_criteo.py", "_load_from_npz", {"zipfile": zipfile, "np": _numpy_of_the_image()}, within="MultiHotCriteoIterDataPipe"
    )
    stages = {"train": range(DAYS - 1), "val/test": [DAYS - 1]}  # data/dlrm_dataloader.py:77-89
    for stage, days in stages.items():
        for day in days:
            why = f"MultiHotCriteoIterDataPipe ({stage}, --mmap_mode)"
            rows = set()
            for part in ("dense", "labels"):
                path = ctx.path(os.path.join(root, f"day_{day}_{part}.npy"), f"{why}: np.load(mmap_mode='r')", kind="file")
                rows.add(np.load(path, mmap_mode="r").shape[0])
            sparse = ctx.path(os.path.join(root, f"day_{day}_sparse_multi_hot.npz"), f"{why}: _load_from_npz", kind="file")
            hot = []
            for feature in range(CAT_FEATURE_COUNT):
                array = load_from_npz(None, str(sparse), f"{feature}.npy")
                rows.add(array.shape[0])
                hot.append(array.shape[1])
            ctx.equal(f"day {day}: rows of dense, labels and the 26 multi-hot members", len(rows), 1, "the loader slices the three arrays of a day together")
    ctx.record("value", "multi-hot sizes", "the loader's multi_hot_sizes (last day)", True, str(hot))

    sys.path.insert(0, str(ctx.cwd))
    import mlperf_logging.mllog as mllog  # the round patch configures it (rank 0 to $COMPLIANCE_FILE) at this import
    import mlperf_logging.mllog.constants as mllog_constants
    from mlperf_logging_utils import submission_info  # the reference's, with the round patch

    mllogger = mllog.get_mllogger()
    if int(ctx.env["RANK"]) == 0:  # main logs these on every rank; the patch keeps rank 0's
        mllogger.event(key=mllog_constants.CACHE_CLEAR, value=True)
        mllogger.start(key=mllog_constants.INIT_START)
        submission_info(mllogger, mllog_constants.DLRM_DCNv2, "reference_implementation")
    ctx.record(
        "log", os.environ.get("COMPLIANCE_FILE", ""), "mllog writes rank 0's events to $COMPLIANCE_FILE (round patch)", bool(os.environ.get("COMPLIANCE_FILE"))
    )
