"""deepseekv3_671b's rehearsal: ``srun python pretrain_deepseek_v3_671b.py`` (one task per GPU) of
llm_moe_pretraining/nemo (aa344c7) on two nodes of the box.

Megatron-Bridge, megatron-core, Transformer Engine and mlperf-common do not install here, so the probe runs the
reference's own functions compiled from ``pretrain_deepseek_v3_671b.py`` at the pinned commit, with stand-ins for the
Megatron-Bridge config classes they fill: ``get_parser`` on the job's arguments, then ``create_config`` (with its
``get_data`` and ``get_tokenizer_config``) under the job's environment (``PREPROCESSED_PATH``, ``START_EVAL_AT_ITER``).
Every path the resulting config names is then checked the way Megatron-Bridge v0.3.0 (the Dockerfile's
MBRIDGE_REVISION) opens it before the first GPU step: the blend's ``.bin``/``.idx`` pairs, the ``path_to_cache``
folder, the tokenizer folder (opened for real with transformers' ``AutoTokenizer``, as its ``HuggingFaceTokenizer``
does), and the checkpoint: ``checkpoint.load`` at ``ckpt_step`` 0 must hold ``iter_0000000`` (checkpointing.py
``_resolve_checkpoint_iteration`` raises otherwise), marked as megatron-core's ``torch_dist`` format
(``metadata.json``), with the ``run_config.yaml`` it reads the saved TP/PP from, ``common.pt``, and the
torch.distributed.checkpoint metadata the shards are read through (``.metadata``, read here with torch's reader).
The world is the plan's srun (RANK/WORLD_SIZE from SLURM), checked against the reference's ``--nodes`` and
``--gpus_per_node``. The log is the round patch's: mllog configured with ``$COMPLIANCE_FILE``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import yaml

from tests.rehearsal.spec import Rehearsal

SCRIPT = "pretrain_deepseek_v3_671b.py"

REHEARSAL = Rehearsal(
    benchmark="deepseekv3_671b",
    image_files={"/workspace/code": "mlcommons-training-aa344c7/llm_moe_pretraining/nemo"},
    entry=(SCRIPT,),
    nodes=2,
    # the reference Dockerfile's ENV (llm_moe_pretraining/nemo/Dockerfile:69), which our Dockerfile's PYTHONPATH extends
    image_env={"PYTHONPATH": "/workspace/Megatron-Bridge/src:/workspace/Megatron-Bridge/3rdparty/Megatron-LM"},
)


def published(dataset_id: str, folder: Path) -> None:
    """The catalog's tiny generator in the dataset's folder, plus every file the catalog's ``files`` names that the
    generator does not write (licences, the tokenizer repository's weights: tiny placeholders under their names)."""
    from mlperf_wf.config import registry

    dataset = registry.load_dataset(dataset_id)
    if dataset.tiny is None:
        raise ValueError(f"deepseekv3_671b reads {dataset_id}, which has no tiny generator")
    scratch = folder.parent / f".{dataset_id}-generated"
    dataset.tiny.function()(scratch, seed=dataset.tiny.seed)
    for path in scratch.rglob("*"):
        if path.is_file():
            target = folder / path.relative_to(scratch)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, target)
    shutil.rmtree(scratch)
    for listed in dataset.files:
        target = folder / listed.path
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_placeholder(listed.path, dataset_id))
    if dataset.files:
        names = {listed.path for listed in dataset.files}
        for path in list(folder.rglob("*")):
            if path.is_file() and str(path.relative_to(folder)) not in names:
                path.unlink()  # the published list is the whole folder


def _placeholder(path: str, dataset_id: str) -> str:
    """Tiny contents under a published name: JSON where the name says JSON (a Llama config for ``config.json``)."""
    if path.endswith("config.json"):
        return json.dumps({"model_type": "llama", "rehearsal_placeholder": dataset_id})
    if path.endswith(".json"):
        return json.dumps({"rehearsal_placeholder": dataset_id})
    return f"rehearsal placeholder of {path} ({dataset_id})\n"


class _StandIn(SimpleNamespace):
    """A Megatron-Bridge config object: the attributes the reference sets."""


def _reference_config(ctx):
    """The reference's own parser and create_config (pretrain_deepseek_v3_671b.py at aa344c7) with the job's argv and env."""
    layouts = []
    recipe = _StandIn(
        model=_StandIn(),
        train=_StandIn(),
        optimizer=_StandIn(),
        scheduler=_StandIn(),
        rng=_StandIn(),
        checkpoint=_StandIn(),
        logger=_StandIn(),
        dataset=None,
        tokenizer=None,
    )
    get_parser = ctx.reference_function(SCRIPT, "get_parser", {"argparse": argparse})
    args = get_parser().parse_args(ctx.argv)
    shared = {"os": os, "GPTDatasetConfig": _StandIn, "TokenizerConfig": _StandIn}
    get_data = ctx.reference_function(SCRIPT, "get_data", shared)
    get_tokenizer_config = ctx.reference_function(SCRIPT, "get_tokenizer_config", shared)
    create_config = ctx.reference_function(
        SCRIPT,
        "create_config",
        {
            **shared,
            "get_data": get_data,
            "get_tokenizer_config": get_tokenizer_config,
            "deepseek_v3_pretrain_config": lambda: recipe,
            "set_deepseek_v3_pipeline_model_parallel_layout": layouts.append,
        },
    )
    return args, create_config(args)


def _check_world(ctx, args) -> None:
    names = ("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    found = next((name for name in names if name in ctx.env), names[0])
    nodes = int(ctx.variable(found, "the nodes of srun's step (srun --nodes)"))
    world = int(ctx.variable("WORLD_SIZE", "torch.distributed's world (RANK/WORLD_SIZE from SLURM, as run_deepseek.py's srun --mpi=pmix)"))
    ctx.equal("--nodes", args.nodes, nodes, "the reference logs and sizes data parallelism with --nodes (pretrain:90)")
    ctx.equal("--nodes x --gpus_per_node", args.nodes * args.gpus_per_node, world, "one task per GPU (run_deepseek.py:171 ntasks_per_node)")
    model_parallel = args.tensor_parallel_size * args.pipeline_parallel_size * args.context_parallel_size
    ctx.equal("world % (TP x PP x CP)", world % model_parallel, 0, "data parallelism is world / (TP x PP x CP) (pretrain:87-92)")
    data_parallel = world // model_parallel
    ctx.equal("GBS % (DP x MBS)", args.gbs % (data_parallel * args.mbs), 0, "gradient accumulation = GBS / DP / MBS (pretrain:91-92)")
    # EP 64 x PP 4 needs the 256 GPUs of the default geometry (64 x 4); the box's 4 ranks cannot place it, so it is
    # recorded, not enforced: Megatron would refuse it at its first parallel-state step on a 4-GPU allocation.
    needed = args.expert_model_parallel_size * args.expert_tensor_parallel_size * args.pipeline_parallel_size
    ctx.record("value", "EP x ETP x PP", "expert parallel groups fit the world at full geometry", True, f"{needed} GPUs; this world {world}")


def _check_checkpoint(ctx, checkpoint) -> None:
    """Megatron-Bridge v0.3.0's load of ``checkpoint.load`` at ``ckpt_step`` (training/checkpointing.py:1892-1930,
    :177-199, :1424-1434)."""
    ctx.equal("checkpoint.load_optim / load_rng", (checkpoint.load_optim, checkpoint.load_rng), (False, False), "weights only (pretrain:201-202)")
    iteration = ctx.path(
        os.path.join(checkpoint.load, f"iter_{checkpoint.ckpt_step:07d}"),
        f"ckpt_step={checkpoint.ckpt_step}: Megatron-Bridge's _resolve_checkpoint_iteration needs the iteration folder (a Megatron-Bridge checkpoint)",
        kind="dir",
    )
    marker = json.loads(ctx.opens(iteration / "metadata.json", "megatron-core's check_is_distributed_checkpoint", size=4096))
    ctx.equal("metadata.json sharded_backend", marker.get("sharded_backend"), "torch_dist", "_get_checkpoint_format: torch_dist")
    run_config = yaml.safe_load((iteration / "run_config.yaml").read_text()) if (iteration / "run_config.yaml").is_file() else None
    ctx.path(iteration / "run_config.yaml", "the saved run config (TP/PP compatibility, checkpointing.py:1424-1434)", kind="file")
    model = (run_config or {}).get("model", {})
    ctx.equal(
        "run_config.yaml model has tensor/pipeline sizes",
        all(key in model for key in ("tensor_model_parallel_size", "pipeline_model_parallel_size")),
        True,
        "checkpointing.py:1432-1435 reads them",
    )
    ctx.opens(iteration / "common.pt", "megatron-core's common state (load_common)")
    ctx.opens(iteration / ".metadata", "torch.distributed.checkpoint's metadata (the torch_dist shards)")
    from torch.distributed.checkpoint import FileSystemReader

    shards = FileSystemReader(str(iteration)).read_metadata()
    ctx.record(
        "value",
        f"{iteration}/.metadata",
        "torch.distributed.checkpoint reads the shard index",
        bool(shards.state_dict_metadata),
        f"{len(shards.state_dict_metadata)} tensors",
    )
    ctx.glob(str(iteration / "__*_*.distcp"), "the torch_dist shard files")


def probe(ctx) -> None:
    args, config = _reference_config(ctx)
    _check_world(ctx, args)
    for prefixes, _weights in config.dataset.blend_per_split:
        for prefix in prefixes:
            for suffix in (".bin", ".idx"):
                ctx.opens(prefix + suffix, "GPTDatasetConfig blend_per_split (get_data, pretrain:53-62): megatron-core's IndexedDataset")
    ctx.path(config.dataset.path_to_cache, "GPTDataset's index cache (path_to_cache, pretrain:70), written by rank 0", kind="dir")
    from transformers import AutoTokenizer

    tokenizer = ctx.path(config.tokenizer.tokenizer_model, "TokenizerConfig.tokenizer_model (pretrain:126)", kind="dir")
    loaded = AutoTokenizer.from_pretrained(str(tokenizer), **config.tokenizer.hf_tokenizer_kwargs)
    ctx.record("value", str(tokenizer), "Megatron-Bridge's HuggingFaceTokenizer: AutoTokenizer.from_pretrained", len(loaded) > 0, f"{len(loaded)} tokens")
    _check_checkpoint(ctx, config.checkpoint)
    first = 42 + 24576 // args.gbs
    ctx.equal("train.start_eval_at_iter", getattr(config.train, "start_eval_at_iter", None), first, "START_EVAL_AT_ITER (pretrain:170-172) = 42 + 24576/GBS")
    ctx.path("/mlperf-outputs", "run_deepseek_v3_671b.sh:148 lets MLLoggers be constructed locally", kind="dir")
    log = ctx.variable("COMPLIANCE_FILE", "the round patch configures mllog with the run's result file")
    ctx.mllog_to(log, "mllog (callback.py's MLLoggerWrapper) with the round patch's result file")
