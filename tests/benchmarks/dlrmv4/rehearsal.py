"""dlrmv4's rehearsal: ``python -m generative_recommenders.dlrm_v4.train.train_ranker`` of recommendation_v4 (a67b8459).

TorchRec and fbgemm-gpu do not install here (ROCm builds), so the probe runs the reference's own code that needs only
gin-config, polars, torch and mlperf-logging, from its files at the pinned commit:

- ``train_ranker.py``'s ``get_args`` and ``main`` on the job's arguments and environment (``GPUS_PER_NODE`` or
  ``torch.cuda.device_count()``, ``NNODES``, ``NODE_RANK``, ``MASTER_ADDR``/``MASTER_PORT``, the gin file), with
  ``mp.start_processes`` caught: the probe then spawns those processes itself (spawn, as the reference), each forming
  the world over gloo with global rank ``NODE_RANK x GPUS_PER_NODE + local rank``;
- ``_main_func``'s first phase (once, as rank 0 of the node; the other ranks differ only by their rank, and their
  logger writes nothing): ``gin.parse_config_file(yambda_5b.gin, skip_unknown=True)``, ``apply_env_bootstrap``,
  ``mlperf_checkpoint_present($CKPT_PATH)`` and the reference's ``get_mlperf_logger`` (``$MLPERF_LOGGING``,
  ``$MLPERF_LOG_PATH``) with its ``cache_clear``/``init_start`` lines and, where the reference logs them after its
  first GPU step (``log_run_start``), its ``submission_info`` (with the round patch);
- every ``@env_*()`` binding of ``yambda_5b.gin``, resolved by the reference's own ``env_path``/``env_int``/
  ``env_float``/``env_str``/``env_str_map`` (``dlrm_v4/utils.py``) in its gin scope with the job's environment: the
  data root ``DLRM_DATA_PATH`` must be set (its default is a path of the authors' cluster), and every variable the
  benchmark's ``full.env`` exports must reach the container and parse as the reference parses it;
- the files ``DLRMv4YambdaDataset`` opens under that root (``get_dataset``: ``processed_5b``, ``shared_metadata``)
  with ``HISTORY_LENGTH``/``MIN_HISTORY`` as gin resolves them: the cache's ``_READY`` (else the first rank would
  build the 190 GB cache into the read-only mount), ``store_meta.json``, each ``_FlatEventStore._MMAP_COLS`` column
  through the reference's ``_load_npy_readonly``, the positions file ``_positions_filename`` names and its
  ``anchor_ts_`` twin (else built into the mount), and the reference's own ``_load_metadata`` (with polars at its pin),
  which reads the mappings and refuses them unless ``item_popularity.npy`` has as many entries.
"""

from __future__ import annotations

import argparse
import ast
import json
import mmap
import os
import re
import socket
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Optional, Union

import numpy as np

from tests.rehearsal.spec import Rehearsal

REHEARSAL = Rehearsal(
    benchmark="dlrmv4",
    image_files={"/workspace/recommendation_v4": "mlcommons-training-a67b8459/recommendation_v4"},
    entry=("-m generative_recommenders.dlrm_v4.train.train_ranker",),
    nodes=1,
    launchers=("pyxis",),  # its ROCm image needs /dev/kfd and /dev/dri, which the box's Docker node lacks
    # R:Dockerfile:81-83, the reference image's own ENV (our Dockerfile builds on it)
    image_env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "HSTU_HAMMER_KERNEL": "TRITON", "DLRM_DATA_PATH": "/data/mlperf_dlrm_v4"},
)

PACKAGE = Path("generative_recommenders") / "dlrm_v4"
TRAIN_RANKER = PACKAGE / "train" / "train_ranker.py"
ENV_FUNCTIONS = ("env_path", "env_str", "env_str_map", "env_int", "env_float")


def published(dataset_id: str, folder: Path) -> None:
    """Yambda-5b as R2 publishes it (the catalog's 19 files): the tiny generator's tree, without its NOTICE."""
    if dataset_id != "yambda_5b":
        raise ValueError(f"dlrmv4 does not read {dataset_id}")
    from mlperf_wf.benchmarks.dlrmv4 import yambda

    yambda.generate(folder, seed=6100)
    (folder / "NOTICE.txt").unlink()


def _tree(ctx, script: Path) -> ast.Module:
    path = ctx.path(script, f"the reference's {script}", kind="file")
    return ast.parse(path.read_text(), str(path))


def _compiled(ctx, script: Path, nodes: list, namespace: dict) -> dict:
    scope = {"__name__": ".".join(script.with_suffix("").parts), **namespace}  # its module's name (gin registers by it)
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(ctx.cwd / script), "exec"), scope)  # the reference's own code
    return scope


def _top(tree: ast.Module, *names: str) -> list:
    def name(node) -> str:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            return node.name
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
        return ""

    return [node for node in tree.body if name(node) in names]


def _free_port() -> int:
    """torchrec.test_utils.get_free_port: a port the OS hands out."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe_socket:
        probe_socket.bind(("", 0))
        return probe_socket.getsockname()[1]


def _visible_gpus(ctx) -> int:
    """torch.cuda.device_count() in the container (main falls back to it when GPUS_PER_NODE is unset or 0)."""
    visible = ctx.env.get("CUDA_VISIBLE_DEVICES", ctx.env.get("ROCR_VISIBLE_DEVICES"))
    if visible is not None:
        return len([device for device in visible.split(",") if device])
    return REHEARSAL.gpus_per_node  # docker: every GPU of the node; the box's container sees none


def _launch(ctx) -> dict:
    """train_ranker.main as the reference runs it, up to mp.start_processes (caught: its arguments)."""
    tree = _tree(ctx, TRAIN_RANKER)
    started: dict = {}

    def start_processes(function, args, nprocs, join, start_method):
        started.update(function=function.__name__, args=args, nprocs=nprocs, start_method=start_method)

    gpus = _visible_gpus(ctx)
    namespace = {
        "argparse": argparse,
        "os": os,
        "logger": SimpleNamespace(info=print, warning=print),
        "torch": SimpleNamespace(cuda=SimpleNamespace(device_count=lambda: gpus)),
        "mp": SimpleNamespace(start_processes=start_processes),
        "get_free_port": _free_port,
        "__file__": str(ctx.cwd / TRAIN_RANKER),
        "_main_func": SimpleNamespace(__name__="_main_func"),
    }
    scope = _compiled(ctx, TRAIN_RANKER, _top(tree, "SUPPORTED_CONFIGS", "get_args", "main"), namespace)
    sys.argv = [str(TRAIN_RANKER), *ctx.argv]
    scope["main"]()
    args = scope["get_args"]()
    ctx.equal("--dataset", args.dataset, "yambda-5b", "run_and_time.sh's dataset (parse_known_args ignores a misspelt flag)")
    ctx.equal("--mode", args.mode, "streaming-train-eval", "run_and_time.sh's mode (the only one that logs MLPerf events)")
    if not started:
        ctx.fail("train_ranker.main did not reach mp.start_processes")
    world_size, node_rank, gpus_per_node, master_addr, master_port, gin_file, mode = started["args"]
    ctx.equal("processes train_ranker.main spawns", started["nprocs"], gpus_per_node, "one per GPU of the node")
    ctx.equal("GPUS_PER_NODE", gpus_per_node, gpus, "the GPUs the job gives the container")
    ctx.opens(gin_file, "train_ranker.main's gin file (SUPPORTED_CONFIGS)")
    ctx.record("value", "world", "train_ranker.main", True, f"{world_size} ranks, node {node_rank}, {gpus_per_node} per node, {master_addr}:{master_port}")
    started.update(world_size=world_size, node_rank=node_rank, gpus_per_node=gpus_per_node, master=(master_addr, master_port), gin=gin_file, mode=mode)
    return started


def _env_functions(ctx) -> dict:
    """The reference's gin-configurable env_* readers (dlrm_v4/utils.py), registered with gin as it registers them."""
    import gin

    tree = _tree(ctx, PACKAGE / "utils.py")
    return _compiled(ctx, PACKAGE / "utils.py", _top(tree, *ENV_FUNCTIONS), {"gin": gin, "os": os, "Dict": dict, "Optional": Optional})


def _resolve_gin(ctx, gin_file: str) -> dict[str, object]:
    """Every @scope/env_*() binding of the gin file, resolved in its scope with the job's environment."""
    import gin

    text = Path(gin_file).read_text()
    bindings = sorted(set(re.findall(r"^((?:(\w+)/)?(env_\w+))\.key\s*=", text, re.M)))
    functions = _env_functions(ctx)
    from generative_recommenders.dlrm_v4.train._env_bootstrap import apply_env_bootstrap  # the reference's (gin only)

    gin.parse_config_file(gin_file, skip_unknown=True)  # _main_func's phase 1
    apply_env_bootstrap()
    values: dict[str, object] = {}
    for _, scope, function in bindings:
        with gin.config_scope(scope or None):
            key = gin.query_parameter(f"{scope + '/' if scope else ''}{function}.key")
            try:
                values[key] = functions[function]()
            except ValueError as error:
                ctx.fail(f"{Path(gin_file).name}: {function}({key}) cannot parse ${key}={ctx.env.get(key)!r} ({error})")
        ctx.record("variable", key, f"{scope or ''}/{function} in {Path(gin_file).name}", True, f"{values[key]!r} ({'set' if key in ctx.env else 'default'})")
    return values


def _benchmark_env(nodes: int, gpus_per_node: int) -> dict[str, str]:
    """The definition's full.env as the plan fills it for this run's geometry (the batch split, the RCP's values)."""
    from mlperf_wf.config import registry
    from mlperf_wf.plan.launch import Launch, definition_env

    return definition_env(registry.load_benchmark("dlrmv4"), Launch("pyxis", nodes=nodes, gpus_per_node=gpus_per_node))


def _dataset(ctx, values: dict[str, object]) -> None:
    """What DLRMv4YambdaDataset opens under the data root, with gin's history_length and min_history."""
    yambda = PACKAGE / "datasets" / "yambda.py"
    tree = _tree(ctx, yambda)
    store = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "_FlatEventStore")
    dataset = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "DLRMv4YambdaDataset")
    columns = ast.literal_eval(next(n for n in store.body if isinstance(n, ast.Assign) and n.targets[0].id == "_MMAP_COLS").value)
    positions_filename = next(n for n in dataset.body if isinstance(n, ast.FunctionDef) and n.name == "_positions_filename")
    positions_filename.decorator_list = []
    load_metadata = next(n for n in dataset.body if isinstance(n, ast.FunctionDef) and n.name == "_load_metadata")
    import polars

    scope = _compiled(
        ctx,
        yambda,
        [*_top(tree, "_load_npy_readonly"), positions_filename, load_metadata],
        {"np": np, "os": os, "Path": Path, "Union": Union, "_mmap_mod": mmap, "pl": polars},
    )
    root = str(values["DLRM_DATA_PATH"])
    processed, metadata = os.path.join(root, "processed_5b"), os.path.join(root, "shared_metadata")  # utils.get_dataset
    history = int(values["HISTORY_LENGTH"])
    min_history = values["MIN_HISTORY"]
    cache = os.path.join(processed, f"hstu_cache_L{history}")
    ctx.path(os.path.join(cache, "_READY"), "_ensure_cache_built: without it rank 0 builds the cache from train_sessions.parquet into the mount", "file")
    meta = json.loads(ctx.opens(os.path.join(cache, "store_meta.json"), "_FlatEventStore.load_mmap", size=1 << 20))
    for key in ("num_users", "total_events"):
        ctx.equal(f"store_meta.json has {key}", key in meta, True, "_FlatEventStore.load_mmap reads it")
    lengths = {}
    for column in columns:
        path = ctx.path(os.path.join(cache, f"{column}.npy"), "_FlatEventStore.load_mmap: _load_npy_readonly", "file")
        lengths[column] = len(scope["_load_npy_readonly"](path))
    ctx.equal("events in flat_item_ids.npy", lengths["flat_item_ids"], int(meta["total_events"]), "store_meta.json's total_events")
    name = scope["_positions_filename"](history, int(min_history) if min_history is not None else history)
    for file in (name, name.replace("positions_", "anchor_ts_", 1)):
        path = ctx.path(os.path.join(cache, file), "built into the cache folder when absent (a read-only mount here)", "file")
        scope["_load_npy_readonly"](path)
    for kind in ("artist", "album"):
        ctx.path(os.path.join(metadata, f"{kind}_item_mapping.parquet"), "_load_metadata: pl.read_parquet", "file")
    ctx.path(os.path.join(processed, "item_popularity.npy"), "_load_metadata: item_popularity.npy beside the sessions", "file")
    dataset_state = SimpleNamespace(_processed_dir=processed)
    try:
        scope["_load_metadata"](dataset_state, metadata)  # the reference's own reading, with polars at its pin
    except ValueError as refused:  # the mappings and item_popularity.npy disagree
        ctx.fail(f"_load_metadata: {refused}")
    ctx.equal("polars' version", polars.__version__, "1.33.1", "recommendation_v4/requirements.txt's polars-u64-idx pin")
    ctx.record("value", "_load_metadata", "the reference's item mappings, read with polars", True, f"{dataset_state.num_items} items")


def probe(ctx) -> None:
    from tests.rehearsal import probe as probing

    launch = _launch(ctx)
    sys.path.insert(0, str(ctx.cwd))
    values = _resolve_gin(ctx, launch["gin"])
    root = ctx.variable("DLRM_DATA_PATH", "yambda_5b.gin's DATA_PATH (data/env_path; its default is a path of the authors' cluster)")
    ctx.equal("gin DATA_PATH", values["DLRM_DATA_PATH"], root, "make_train_test_dataloaders/get_dataset.new_path_prefix")
    ctx.path(root, "the data root", kind="dir")
    nodes = launch["world_size"] // launch["gpus_per_node"]
    for name, value in _benchmark_env(nodes, launch["gpus_per_node"]).items():
        ctx.equal(f"${name} in the container", ctx.env.get(name), str(value), "benchmark.yaml full.env (run_and_time.sh's exports and the gin knobs)")
    _dataset(ctx, values)

    from generative_recommenders.dlrm_v4.train.mlperf_logging_utils import get_mlperf_logger, mlperf_checkpoint_present  # with the round patch

    resume = mlperf_checkpoint_present(ctx.env.get("CKPT_PATH", ""))
    ctx.equal("a checkpoint in $CKPT_PATH", resume, False, "a run starts cold (init_start, run_start logged once)")
    rank = launch["node_rank"] * launch["gpus_per_node"]  # local rank 0 of this node
    log_path = ctx.variable("MLPERF_LOG_PATH", "get_mlperf_logger's log file (rank 0)")
    logger = get_mlperf_logger(rank=rank, fresh=not resume) if launch["mode"] == "streaming-train-eval" else None
    if logger is None:
        ctx.fail("get_mlperf_logger returned None: MLPERF_LOGGING off or mlperf_logging missing, the run would log nothing")
    ctx.equal("$MLPERF_LOG_PATH", log_path, ctx.env.get("COMPLIANCE_FILE"), "the run's result file ($COMPLIANCE_FILE)")
    logger.event(key=logger.constants.CACHE_CLEAR, value=True)
    logger.start(key=logger.constants.INIT_START)
    logger.submission_info()  # the reference logs it in log_run_start, after setup and make_model (GPU steps)
    ctx.record("log", log_path, "MLPerfLogger (rank 0) writes $MLPERF_LOG_PATH", True)
    host, port = launch["master"]
    probing.spawn_world(ctx, launch["gpus_per_node"], launch["world_size"], rank, host, port)
