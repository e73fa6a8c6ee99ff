"""flux1's rehearsal: ``torchrun ... -m torchtitan.experiments.flux.train`` of torchtitan 9603aa83 (the text_to_image
submodule of mlcommons/training aa344c7), one torchrun per node on two nodes of the box.

Real code mode: torchtitan's own modules import here (tyro and torchdata are in the dev requirements), so the probe
runs the reference's code at the pinned commit with the job's argv, in the order ``train.py`` and ``Trainer.__init__``
run it, up to ``device_module.set_device`` (torchtitan/train.py:73-76, the first GPU step):

- ``ConfigManager().parse_args`` (train.py:615-616): the toml of ``--job.config_file``, the flux job config of
  ``experimental.custom_args_module``, the command line over the toml (tyro), and ``_validate_config``;
- ``ParallelDims`` (train.py:81-89) with ``WORLD_SIZE``: its own check that the degrees multiply to the world; the
  data-parallel rank and degree as the ``dp`` mesh gives them (replicate x shard, no cp/tp/pp);
- the flux train spec's ``build_dataloader_fn`` and ``build_val_dataloader_fn`` (train.py:127-132, flux/train.py:83-92):
  ``FluxDataset`` resolves the dataset name to its path (``--training.dataset_path`` / the registry default),
  ``load_from_disk`` opens it, ``split_dataset_by_node`` gives this rank its part, and one sample goes through the
  reference's data processor (``deserialize_numpy_array`` of every array cell);
- ``np.load`` of ``encoder.empty_encodings_path`` + ``/t5_empty.npy`` and ``/clip_empty.npy`` (flux/train.py:148-156);
- the log: ``mllog.config(filename=<job.dump_folder>/mlperf_compliance.log)`` as ``MLPerfLogger`` calls it
  (flux/train.py:55-62, mlperf_logging.py:42-48), which the round patch sends to ``$COMPLIANCE_FILE``.

``tiktoken`` (the llama tokenizers that ``torchtitan/__init__`` registers), ``einops`` (the model code) and tensorboard
(``torch.utils.tensorboard``) are the real ones at torchtitan's pins (requirements-dev.txt). What does not install here
is replaced by an inert stand-in module, named in the probe's checks: ``mlperf_common`` (NVIDIA's git-pinned logging
wrapper, not on PyPI; the probe configures mllog as MLPerfLogger does instead). The Dockerfile's pinned git blob ids
must be those of the files here (the image it builds FROM is that commit).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import types
from pathlib import Path

from tests.rehearsal import probe as probing
from tests.rehearsal.spec import ROOT, Rehearsal

REHEARSAL = Rehearsal(
    benchmark="flux1",
    # torchtitan's Dockerfile: WORKDIR /workspace/flux; COPY . . (the reference image our Dockerfile starts FROM)
    image_files={"/workspace/flux": "torchtitan-9603aa8"},
    entry=("-m torchtitan.experiments.flux.train",),
    nodes=2,
)

FLUX = "torchtitan/experiments/flux"
PUBLISHED = {
    # dataset id: (rows, data files, key prefix, with the 0-7 timestep grid)
    "flux1_cc12m_preprocessed": (1_099_776, 4762, "cc12m-", False),
    "flux1_coco_preprocessed": (29_696, 129, "coco-", True),
}
"""The published ``save_to_disk`` folders: the reference's TRAIN_SAMPLES/EVAL_SAMPLES (mlperf_logging.py:58-59) in the
data files the R2 ``.md5`` lists name (r2-infra training/metadata/flux-1-{cc12m,coco}-preprocessed.md5:
``data-<i>-of-04762.arrow`` and ``data-<i>-of-00129.arrow``, plus ``state.json`` and ``dataset_info.json``)."""
TINY_SHAPES = {"t5_encodings": (1, 1), "clip_encodings": (1,), "mean": (1, 1, 1), "logvar": (1, 1, 1)}
"""Each cell's array: the published ranks (T5 (256, 4096), CLIP (768,), mean/logvar (16, 32, 32)) with one element."""
STAND_INS = ("mlperf_common", "mlperf_common.frameworks", "mlperf_common.frameworks.pyt", "mlperf_common.logging")


def published(dataset_id: str, folder: Path) -> None:
    """The published layout with the published row counts; every cell a valid one-element array, the same bytes in each
    row, so the Arrow streams are written zstd-compressed (pyarrow's IPC reader, under ``load_from_disk``, decompresses)
    and the 1,099,776 rows take seconds and tens of MB."""
    if dataset_id == "flux1_empty_encodings":
        import numpy as np

        np.save(folder / "t5_empty.npy", np.zeros((1, *TINY_SHAPES["t5_encodings"]), np.float16))
        np.save(folder / "clip_empty.npy", np.zeros((1, *TINY_SHAPES["clip_encodings"]), np.float16))
        return
    if dataset_id not in PUBLISHED:
        raise ValueError(f"flux1 does not read {dataset_id}")
    _write_save_to_disk_folder(folder, *PUBLISHED[dataset_id])


def _write_save_to_disk_folder(folder: Path, rows: int, files: int, key_prefix: str, timesteps: bool) -> None:
    import numpy as np
    import pyarrow as pa

    from mlperf_wf.benchmarks.flux1 import encodings

    cells = {name: encodings.serialize(np.zeros(shape, np.float32)) for name, shape in TINY_SHAPES.items()}
    # a one-row folder through datasets itself gives the schema (with its metadata) and the two JSON files' form
    model = folder.parent / f".{folder.name}-one-row"
    encodings.save_folder({"__key__": ["k"], **{n: [c] for n, c in cells.items()}, "timestep": [0 if timesteps else None]}, model)
    with pa.memory_map(str(model / "data-00000-of-00001.arrow")) as source:
        schema = pa.ipc.open_stream(source).schema
    state = json.loads((model / "state.json").read_text())
    shutil.copy(model / "dataset_info.json", folder / "dataset_info.json")
    shutil.rmtree(model)
    per_file, larger = divmod(rows, files)
    most = per_file + 1
    columns = {
        name: pa.Array.from_buffers(pa.binary(), most, [None, pa.py_buffer(np.arange(most + 1, dtype=np.int32) * len(cell)), pa.py_buffer(cell * most)])
        for name, cell in cells.items()
    }
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    names, start = [], 0
    for index in range(files):
        count = most if index < larger else per_file
        keys = pa.array([f"{key_prefix}{i:07d}" for i in range(start, start + count)])
        timestep = pa.array(np.arange(start, start + count, dtype=np.int32) % 8) if timesteps else pa.nulls(count, pa.int32())
        batch = pa.record_batch([keys, *(columns[n].slice(0, count) for n in encodings.ARRAY_COLUMNS), timestep], schema=schema)
        names.append(f"data-{index:05d}-of-{files:05d}.arrow")
        with pa.OSFile(str(folder / names[-1]), "wb") as sink, pa.ipc.new_stream(sink, schema, options=options) as writer:
            writer.write_batch(batch)
        start += count
    state["_data_files"] = [{"filename": name} for name in names]
    (folder / "state.json").write_text(json.dumps(state, indent=2))


def _git_blob(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _stand_in(name: str) -> types.ModuleType:
    """An inert module: any attribute is an empty class (enough for imports and class bodies; never called before the
    first GPU step)."""
    module = types.ModuleType(name)
    module.__path__ = []

    def attribute(attr: str) -> type:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return type(attr, (), {})

    module.__getattr__ = attribute
    return module


REAL_MODULES = {"tiktoken": "0.9.0", "einops": "0.8.1", "tensorboard": "2.16.2"}
"""torchtitan's pins (.ci/docker/requirements.txt, .ci/docker/requirements-flux.txt): imported for real, never stood in
(tensorboard under ``torch.utils.tensorboard``, which torchtitan's metrics import)."""


def _install_stand_ins(ctx) -> None:
    import importlib.metadata
    import importlib.util

    for name, version in REAL_MODULES.items():
        found = importlib.util.find_spec(name)
        ctx.equal(f"{name} is the real package", found is not None and found.origin is not None, True, "torchtitan imports it (no stand-in)")
        ctx.equal(f"{name}'s version", importlib.metadata.version(name), version, "torchtitan's pin")

    missing = {name.split(".")[0] for name in STAND_INS if name.split(".")[0] not in sys.modules and importlib.util.find_spec(name.split(".")[0]) is None}
    for name in STAND_INS:
        if name.split(".")[0] in missing:
            sys.modules[name] = _stand_in(name)
            ctx.record("stand-in", name, "does not install here; an inert module replaces it", True)


def probe(ctx) -> None:
    dockerfile = (ROOT / "src/mlperf_wf/benchmarks" / "flux1" / "container" / "Dockerfile").read_text()
    for blob, name in re.findall(r'git hash-object ([\w/.]+)\)" = ([0-9a-f]{40})', dockerfile):
        pinned = ctx.path(f"{FLUX}/{blob}", "a file the Dockerfile pins", kind="file")
        ctx.equal(f"git blob of {FLUX}/{blob}", _git_blob(pinned), name, "src/mlperf_wf/benchmarks/flux1/container/Dockerfile's pin")
    sys.path.insert(0, str(ctx.cwd))  # python -m puts the working folder first, after start-up
    _install_stand_ins(ctx)

    from torchtitan.config_manager import ConfigManager

    config_file = ctx.argument("--job.config_file")
    if not config_file:
        ctx.fail("the job names no --job.config_file")
    ctx.opens(config_file, "--job.config_file (ConfigManager._maybe_load_toml)")
    job = ConfigManager().parse_args(list(ctx.argv))  # train.py:615-616, the reference's own parser and toml loading
    ctx.record("config", config_file, "torchtitan's ConfigManager parsed the job's argv over the toml", True)
    if job.experimental.custom_import:
        __import__(job.experimental.custom_import)
    ctx.path(job.job.dump_folder, "job.dump_folder (torchtitan's outputs, MLPerfLogger's folder)", kind="dir")
    ctx.equal("checkpoint.enable_checkpoint", job.checkpoint.enable_checkpoint, False, "no checkpoint is read or resumed")
    _data(ctx, job, *_geometry(ctx, job))
    _empty_encodings(ctx, job)
    _log(ctx, job)


def _geometry(ctx, job) -> tuple[int, int]:
    """The data-parallel degree and this rank's place in it, as the ``dp`` mesh gives them (no cp/tp/pp)."""
    from torchtitan.distributed.parallel_dims import ParallelDims

    world = int(ctx.variable("WORLD_SIZE", "torchrun's world (train.py:79)"))
    parallelism = job.parallelism
    try:
        dims = ParallelDims(  # train.py:81-89, its own check of the degrees against the world
            dp_shard=parallelism.data_parallel_shard_degree,
            dp_replicate=parallelism.data_parallel_replicate_degree,
            cp=parallelism.context_parallel_degree,
            tp=parallelism.tensor_parallel_degree,
            pp=parallelism.pipeline_parallel_degree,
            world_size=world,
            enable_loss_parallel=not parallelism.disable_loss_parallel,
        )
    except AssertionError as error:
        ctx.fail(f"torchtitan's ParallelDims refuses the job's degrees for WORLD_SIZE={world}: {error}")
    local = int(ctx.variable("LOCAL_WORLD_SIZE", "torchrun's ranks on this node"))
    ctx.equal("data_parallel_shard_degree", dims.dp_shard, local, "one torchrun per node: an FSDP shard group per node")
    ctx.equal("data_parallel_replicate_degree", dims.dp_replicate, int(ctx.env.get("SLURM_NNODES", "1")), "a replica per node")
    return dims.dp_replicate * dims.dp_shard, int(ctx.variable("RANK", "torchrun's global rank"))


def _data(ctx, job, degree: int, rank: int) -> None:
    import torchtitan.experiments.flux  # noqa: F401  registers the flux train spec
    from torchtitan.protocols import train_spec

    spec = train_spec.get_train_spec(job.model.name)
    for split, build, dataset, path in (
        ("training", spec.build_dataloader_fn, job.training.dataset, job.training.dataset_path),
        ("eval", spec.build_val_dataloader_fn, job.eval.dataset, job.eval.dataset_path),
    ):
        why = f"{split}.dataset {dataset} at {path or 'its registry default'} (FluxDataset, load_from_disk)"
        if path:
            ctx.path(path, why, kind="dir")
            state = json.loads(ctx.opens(os.path.join(path, "state.json"), f"{why}: state.json", size=1 << 22))
            named = {entry["filename"] for entry in state.get("_data_files", [])}
            present = {found.name for found in ctx.glob(os.path.join(path, "data-*.arrow"), f"{why}: its data files")}
            ctx.equal(f"{path}: data files state.json names, missing", sorted(named - present), [], why)
        loader = build(dp_world_size=degree, dp_rank=rank, tokenizer=None, job_config=job)
        sample, labels = next(iter(loader.dataset))  # the reference's data processor on this rank's first sample
        shapes = {name: tuple(value.shape) for name, value in sample.items() if hasattr(value, "shape")}
        ctx.record("sample", f"{split} rank {rank}/{degree}", why, True, f"{shapes}, labels {[tuple(t.shape) for t in labels]}")
        ctx.equal(f"{split} T5 and CLIP ranks", (len(shapes["t5_encodings"]), len(shapes["clip_encodings"])), (2, 1), why)


def _empty_encodings(ctx, job) -> None:
    import numpy as np

    folder = job.encoder.empty_encodings_path
    if not folder:
        return
    for name in ("t5_empty.npy", "clip_empty.npy"):
        path = ctx.path(folder + "/" + name, "encoder.empty_encodings_path (flux/train.py:148-156 np.load)", kind="file")
        np.load(path)


def _log(ctx, job) -> None:
    from mlperf_logging import mllog

    # MLPerfLogger.__init__ (mlperf_logging.py:42-48) with flux/train.py:55-62's filename; the round patch redirects it
    mllog.config(filename=os.path.join(job.job.dump_folder, "mlperf_compliance.log"), root_dir=str(ctx.cwd / FLUX))
    files = [probing.written_file(h) for h in mllog.get_mllogger().logger.handlers if hasattr(h, "baseFilename")]
    target = ctx.variable("COMPLIANCE_FILE", "the run's result file (the round patch's target)")
    ctx.equal("MLPerfLogger's log file", files[-1] if files else None, target, "flux1/container/patches: the log goes to $COMPLIANCE_FILE")
    ctx.mllog_to(target, "MLPerfLogger writes <job.dump_folder>/mlperf_compliance.log, redirected to $COMPLIANCE_FILE")
