"""llama31_405b's rehearsal: ``python3 pretrain_llama31.py ...`` of large_language_model_pretraining/nemo (aa344c7)
on two nodes of the box, one container per node, as the plan starts it.

NeMo and NeMo-Run do not install here. The probe runs the reference's own code where it can: ``get_parser``,
``slurm_executor`` (whose ``run.SlurmExecutor`` the round patch replaces with NeMo-Run's ``LocalExecutor``) and
``get_data`` compiled from ``pretrain_llama31.py`` at the pinned commit; NeMo-Run's ``Executor``/``LocalExecutor``
and its torchrun component compiled from NeMo-Run 34259bd (the commit NeMo 24.12 pins), with the image's round
patches applied to them through their import hooks. The script's own main block is re-typed where it sets up the
executors (lines 357-372, 418-426) and adds the tasks (486-530). Each task's torchrun command is then the one
NeMo-Run writes, and the real torchrun starts it on each node:

- ``build_data_index`` (``data_index_executor``: one node, one process): opens every dataset ``get_data`` names
  (moved by the patch from ``/preproc_data`` to the prepared tree) and builds the sample index in
  ``index_mapping_dir`` (moved from ``/npy_index`` into the run folder), which is one folder for all nodes;
- the training task: its processes are the ranks. Each checks torchrun's world against the recipe's trainer
  (``num_nodes=--nodes``, ``devices=--gpus_per_node``: Lightning refuses any other world), the index it reads,
  the datasets, the tokenizer (transformers' AutoTokenizer on the mounted folder), the starting checkpoint
  (``--initial_ckpt_path`` with ``--use_ckpt --resume_from_hf``: NeMo's RestoreConfig reads ``context/`` and
  ``weights/``), and logs through the reference's own ``MLLogger`` (callbacks.py) with the round patch.
"""

from __future__ import annotations

import math
import os
import typing
from pathlib import Path

from tests.rehearsal import llama31 as _llama31
from tests.rehearsal import nemo_run as _nemo_run
from tests.rehearsal.spec import Rehearsal

REFERENCE = "mlcommons-training-aa344c7/large_language_model_pretraining/nemo"
MEGATRON_CORE = "0.10.0"
"""The megatron-core release of the reference's image (its data stage imports it in the rehearsal)."""
REHEARSAL = Rehearsal(
    benchmark="llama31_405b",
    # the Dockerfile's clone (cp -r .../nemo /workspace/llama31); NeMo-Run's source stands for the base image's install
    image_files={"/workspace/llama31": REFERENCE, "/opt/NeMo-Run": "nemo-run-34259bd"},
    entry=("pretrain_llama31.py", "-m"),
    nodes=2,
    # the base image's megatron-core (0.10.0: the release mcore.patch was made on), the Dockerfile's patch applied
    image_env=_llama31.megatron_core_env(MEGATRON_CORE),
)


def published(dataset_id: str, folder: Path) -> None:
    """The three inputs as MLCommons publishes them (names from the catalog's published lists), tiny contents."""

    if dataset_id == "c4_mixtral_8x22b_preprocessed":
        from mlperf_wf.benchmarks.llama31_405b import c4_corpus

        c4_corpus.generate(folder, seed=405)
    elif dataset_id == "mixtral_8x22b_tokenizer":
        from mlperf_wf.benchmarks.llama31_405b import tokenizer

        tokenizer.generate(folder, seed=0)
        (folder / "README.md").unlink(missing_ok=True)
        (folder / "special_tokens_map.json").write_text('{"bos_token": "<s>", "eos_token": "</s>"}\n')
        for name in ("tokenizer.model", "tokenizer.model.v1"):  # SentencePiece files the fast tokenizer does not read
            (folder / name).write_bytes(b"rehearsal: sentencepiece model\n")
    elif dataset_id == "llama31_405b_checkpoint":
        # the NeMo 2 checkpoint members distribute: context/ (io.json, model.yaml) and weights/ (torch_dist)
        for name in ("context/io.json", "context/model.yaml", "weights/metadata.json", "weights/.metadata", "weights/common.pt", "weights/__0_0.distcp"):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text("{}\n" if name.endswith(".json") else "rehearsal\n")
    else:
        raise ValueError(f"llama31_405b does not read {dataset_id}")


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
    ctx.equal("--num_pars 1 with --continual_ckpt_path", args.num_pars == 1 and args.continual_ckpt_path is None, False, "pretrain_llama31.py:326")
    started = int(ctx.env.get("MLPERF_WF_NNODES", "1"))  # the workflow's multi_node_args: the nodes it started a container on
    ctx.equal("--nodes", args.nodes, started, "the recipe's num_nodes (--nodes) is the number of nodes the workflow started")
    nemo_run = _nemo_run.load()
    slurm_executor = ctx.reference_function("pretrain_llama31.py", "slurm_executor", {"run": nemo_run.run, "Optional": typing.Optional})
    executor = slurm_executor(  # pretrain_llama31.py:329-343
        user=args.user,
        host=args.host,
        remote_job_dir=args.job_dir,
        account=args.account,
        partition=args.partition,
        nodes=args.nodes,
        devices=args.gpus_per_node,
        time=args.time,
        custom_mounts=list(args.mounts.split(",")),
        custom_env_vars=({e.split("=")[0]: e.split("=")[1] for e in args.envvars.split(",")} if args.envvars is not None else None),
        container_image=args.image,
        dependencies=args.dependencies,
        retries=args.max_retries,
    )
    data_index_executor = executor.clone()  # pretrain_llama31.py:421-426
    data_index_executor.launcher = None
    data_index_executor.nodes = 1
    data_index_executor.ntasks_per_node = 1
    data_index_executor.retries = 1
    data_index_executor.time = "01:00:00"
    seed = args.seeds[0]
    exp_name = f"{args.size}{args.tag}_0_seed_{seed}"  # pretrain_llama31.py:404, 474
    ending = f"-{args.ckpt_start_step + args.max_steps}-steps" if args.max_steps is not None else ""
    training = f"{exp_name}_0_{args.ckpt_start_step}{ending}"  # pretrain_llama31.py:482-486, 530
    _llama31.run_tasks(ctx, nemo_run, [(_llama31.DATA_INDEX_TASK, data_index_executor), (training, executor)])


def _datamodule(ctx, args, data_module) -> object:
    """The task's PreTrainingDataModule: the reference's ``get_data`` (pretrain_llama31.py:349-356), its seed set
    per experiment (:471-472)."""
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
    if args.use_ckpt:
        # resume_from_hf: AutoResume(restore_config=RestoreConfig(path=--initial_ckpt_path)) (pretrain_llama31.py:497)
        checkpoint = Path(args.initial_ckpt_path)
        ctx.path(checkpoint / "context", "NeMo 2 checkpoint context (RestoreConfig)", kind="dir")
        ctx.opens(checkpoint / "weights" / "metadata.json", "NeMo 2 checkpoint weights (torch_dist metadata)")
    ctx.variable("MLPERF_WF_NEMO_OUTPUTS", "the recipe's dir=/outputs, moved into the run folder by the round patch")
    callbacks = _llama31.reference_logger(ctx, Path(os.getcwd()))
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
