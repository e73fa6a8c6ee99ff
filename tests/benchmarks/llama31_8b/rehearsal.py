"""llama31_8b's rehearsal: ``python3 pretrain_llama31.py ...`` of small_llm_pretraining/nemo (aa344c7) on one node.

NeMo and NeMo-Run do not install here. As for llama31_405b (:mod:`tests.rehearsal.llama31`), the probe
runs the reference's own ``get_parser``, ``local_executor`` and ``get_data`` compiled from ``pretrain_llama31.py``
at the pinned commit, with NeMo-Run's ``LocalExecutor`` and torchrun component compiled from NeMo-Run's source
(34259bd; the reference's Dockerfile.h200 installs NeMo-Run v0.4.0, whose local one-node command is the same), and
starts each task's torchrun with the command NeMo-Run writes. The main block is re-typed where it sets up the
executors (lines 334-355, 446-451) and names the tasks (486-556). The tasks check what they open: the datasets
under ``$PREPROCESSED_PATH`` (``get_data``, line 213), the index folder ``/npy_index`` (scratch), the tokenizer
(transformers' AutoTokenizer on the mounted folder), the recipe's ``/outputs`` (scratch), ``$GBS`` (line 180,
against ``--gbs``), and the training ranks' world against the recipe's ``--nodes`` x ``--gpus_per_node``. The log
goes through the reference's own ``MLLogger`` (callbacks.py) with the round patch.
"""

from __future__ import annotations

import math
import typing
from pathlib import Path

from tests.rehearsal import llama31 as _llama31
from tests.rehearsal import nemo_run as _nemo_run
from tests.rehearsal.spec import Rehearsal

REFERENCE = "mlcommons-training-aa344c7/small_llm_pretraining/nemo"
MEGATRON_CORE = "0.11.0"
"""The megatron-core release of the reference's image (its data stage imports it in the rehearsal)."""
REHEARSAL = Rehearsal(
    benchmark="llama31_8b",
    # Dockerfile.h200 copies the reference folder to /workspace/code; NeMo-Run's source stands for its pip install
    image_files={"/workspace/code": REFERENCE, "/opt/NeMo-Run": "nemo-run-34259bd"},
    entry=("pretrain_llama31.py", "-m"),
    nodes=1,
    # Dockerfile.h200 builds megatron-core core_r0.11.0 (PyPI 0.11.0) over the base image's
    image_env=_llama31.megatron_core_env(MEGATRON_CORE),
)


def published(dataset_id: str, folder: Path) -> None:
    """The datasets as MLCommons publishes them (the catalog's published file lists), tiny contents."""
    from mlperf_wf.config import registry

    if dataset_id == "c4_llama31_8b_preprocessed":
        from mlperf_wf.language_models import c4_corpus

        c4_corpus.generate(folder, seed=5200)
    elif dataset_id == "llama31_8b_tokenizer":
        from mlperf_wf.language_models import llama31_tokenizer as tokenizer

        tokenizer.generate(folder, seed=0)
        texts = {"special_tokens_map.json": '{"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}\n', "config.json": '{"model_type": "llama"}\n'}
        for entry in registry.load_dataset(dataset_id).files or []:
            path = folder / entry.path
            if not path.exists():  # the model files the tokenizer folder also holds: names only
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(texts.get(entry.path, "{}\n" if entry.path.endswith(".json") else "rehearsal\n"))
    else:
        raise ValueError(f"llama31_8b does not read {dataset_id}")


def probe(ctx) -> None:
    if _llama31.is_task_process():
        task = ctx.argument("-n")
        handed = _llama31.launcher_handed(ctx)
        args = _llama31.parse(ctx, handed["argv"])
        if task == _llama31.DATA_INDEX_TASK:
            _llama31.data_index_task(ctx, lambda data_module: _datamodule(ctx, args, data_module))
        _training_rank(ctx, args)
        return
    _launcher(ctx)


def _launcher(ctx) -> typing.NoReturn:
    """pretrain_llama31.py's main block up to ``exp.run`` (the executors and the tasks), then the tasks' torchruns."""
    args = _llama31.parse(ctx, ctx.argv)
    ctx.equal("--run_slurm", args.run_slurm, False, "the workflow runs in its own allocation: the script's LocalExecutor (lines 334, 350-355)")
    ctx.equal("$GBS", int(ctx.variable("GBS", "val_check_interval = eval_every / int(os.getenv('GBS')) (line 180)")), args.gbs, "GBS is --gbs")
    nemo_run = _nemo_run.load()
    local_executor = ctx.reference_function("pretrain_llama31.py", "local_executor", {"run": nemo_run.run, "Optional": typing.Optional})
    executor = local_executor(  # pretrain_llama31.py:351-355
        custom_env_vars=({e.split("=")[0]: e.split("=")[1] for e in args.envvars.split(",")} if args.envvars is not None else None),
        devices=args.gpus_per_node,
        retries=args.max_retries,
    )
    data_index_executor = executor.clone()  # pretrain_llama31.py:447-451
    data_index_executor.launcher = "torchrun"
    data_index_executor.nodes = 1
    data_index_executor.ntasks_per_node = 1
    data_index_executor.retries = 1
    seed = args.seeds[0]
    exp_name = f"{args.size}{args.tag}_0_seed_{seed}"  # pretrain_llama31.py:480-486
    max_steps = args.max_steps  # :455-457: never None past this point
    training = f"{exp_name}_0_{args.ckpt_start_step}-{args.ckpt_start_step + max_steps}-steps"  # :491-494, 556
    _llama31.run_tasks(ctx, nemo_run, [(_llama31.DATA_INDEX_TASK, data_index_executor), (training, executor)])


def _datamodule(ctx, args, data_module) -> object:
    """The task's PreTrainingDataModule: the reference's ``get_data`` (lines 360-366), its seed set per experiment."""
    ctx.variable("PREPROCESSED_PATH", "get_data reads the dataset folder from os.getenv (line 213)")
    get_data = ctx.reference_function("pretrain_llama31.py", "get_data", _llama31.run_config_namespace(data_module))
    module = get_data(gbs=args.gbs, mbs=args.mbs, seq_length=8192, tokenizer_path=args.tokenizer_path, seed=1234, use_full_dataset=args.use_full_dataset)
    built = module.target(**module.kwargs)
    built.seed = args.seeds[0]
    return built


past_start_up = _llama31.past_start_up


def _training_rank(ctx, args) -> None:
    _llama31.world(ctx, args.nodes, args.gpus_per_node)
    data_module = _llama31.data_classes(ctx)
    module = _datamodule(ctx, args, data_module)
    _llama31.index_was_built(ctx, module.index_mapping_dir)
    _llama31.TRAINING_DATA["module"] = module  # read through its index once the world formed (past_start_up)
    _llama31.tokenizer(ctx, module.tokenizer.kwargs["pretrained_model_name"])
    ctx.path("/outputs", "the recipe's dir=/outputs (pretrain_llama31.py:138): NeMo's experiment folder (scratch mount)", kind="dir")
    callbacks = _llama31.reference_logger(ctx, Path.cwd())
    _llama31.log_init(  # the MLPerfCallback the script adds (its keyword arguments)
        ctx,
        callbacks,
        global_batch_size=args.gbs,
        micro_batch_size=args.mbs,
        sequence_length=8192,
        init_global_step=args.ckpt_start_step,
        eval_every=math.ceil(args.eval_every / args.gbs),
        configs={},
    )
