"""gpt3's rehearsal: ``srun ... python -u pretrain_gpt.py`` of retired_benchmarks/gpt3/megatron-lm (aa344c7) on the box.

The reference's ``megatron`` package does not import here (``megatron/__init__.py`` imports NVIDIA's mlperf-common,
and the model needs apex and CUDA), so the probe runs the reference's own files that do run here, loaded alone from
the pinned tree at ``/workspace/llm``: ``megatron/arguments.py`` (``parse_args`` and ``validate_args`` on the job's
argv and environment, with ``pretrain_gpt.py``'s ``args_defaults``: this is where the world's size meets TP x PP),
and ``megatron/tokenizer/gpt2_tokenization.py`` (the ``GPT2Tokenizer`` that ``set_global_variables`` builds from
``--vocab-file``/``--merge-file``). With the parsed values it checks every file the reference opens before its first
GPU step: each ``--train-data-path``/``--valid-data-path`` prefix's ``.idx`` (its mmap header) and ``.bin``
(megatron/data/indexed_dataset.py), and the external checkpoint under ``--load`` as ``load_external_checkpoint``
reads it with ``--use-distributed-checkpointing`` (checkpointing.py:525-545: ``metadata.json`` must say a zarr
distributed checkpoint, dist_checkpointing/core.py:25-36; ``common.pt``, serialization.py:64-67; one zarr array
folder per parameter). ``--exit-duration-in-mins`` is checked against the job's time limit less run_gpt3.sh's 15
minutes (:43-45). The log is ``$COMPLIANCE_FILE``, where the round patch points mlperf-logging's mllog.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.util
import io
import json
import math
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace

from tests.rehearsal.probe import ProbeFailure
from tests.rehearsal.spec import Rehearsal

REHEARSAL = Rehearsal(
    benchmark="gpt3",
    image_files={"/workspace/llm": "mlcommons-training-aa344c7/retired_benchmarks/gpt3/megatron-lm"},
    entry=("pretrain_gpt.py",),
    nodes=2,
    image_build=("make -C megatron/data",),
    # Megatron fits TP to the world (arguments.py: min(TP, world), then PP = min(PP, world / TP)): TP 2 gives a pipeline
    # of two stages across the box's two nodes, as the reference's TP 8 x PP 8 spans nodes with its pipeline
    # --train-samples: the data stage builds the index maps for real, and 20 M samples of 2048 tokens from the published
    # layout's tiny datasets would be a document index of billions of epochs
    arguments={"--tensor-model-parallel-size": "2", "--train-samples": "16"},
)

DATASET_TARBALL = "dataset_c4_spm.tar"
"""What the R2 ``.md5`` of gpt-3-megatron-preprocessed-dataset lists (README.md:40-42, 169-172)."""
DATASET_FOLDER = "preprocessed_c4_spm"
"""The folder the tarball unpacks to (README.md:41-42)."""
CHECKPOINT_TARBALL = "checkpoint_megatron_fp32.tar"
"""What the R2 ``.md5`` of gpt-3-megatron-fp32-checkpoint lists (README.md:66-69, 175-178)."""
CHECKPOINT_FOLDER = "ckpt4000_fp32"
"""The folder the tarball unpacks to (README.md:68)."""
PREFIXES = ("c4_en_6_c4_spm_text_document", "c4_en_7_c4_spm_text_document", "c4_en_validation_subset_c4_spm_text_document")
"""The datasets of checksums/dataset_checksum.log."""
ZARR_ARRAYS = ("language_model.embedding.position_embeddings.weight", "optimizer.state.exp_avg.language_model.embedding.position_embeddings.weight")
"""Two of the checkpoint's per-parameter zarr arrays, named as README.md:96-101 names them."""
EXIT_MARGIN_MINUTES = 15
"""run_gpt3.sh:43-45: the run stops 15 minutes before the job's time limit to save its checkpoint."""


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1_700_000_000
    tar.addfile(info, io.BytesIO(data))


def write_dataset_tarball(path: Path, documents: int = 160) -> None:
    """``dataset_c4_spm.tar``: ``preprocessed_c4_spm/<prefix>.{bin,idx}`` as tiny Megatron indexed datasets."""
    import tempfile

    import numpy as np

    from mlperf_wf.language_models.markov_corpus import write_indexed

    rng = np.random.default_rng(2401)
    with tempfile.TemporaryDirectory() as scratch, tarfile.open(path, "w") as tar:
        for prefix in PREFIXES:
            docs = [rng.integers(0, 128, size=int(rng.integers(20, 60))).tolist() for _ in range(documents)]
            for written in write_indexed(Path(scratch) / prefix, docs, dtype=np.uint16):
                _add(tar, f"{DATASET_FOLDER}/{written.name}", written.read_bytes())


def write_checkpoint_tarball(path: Path) -> None:
    """``checkpoint_megatron_fp32.tar``: ``ckpt4000_fp32/`` with ``metadata.json``, ``common.pt`` and zarr arrays."""
    import torch

    common = io.BytesIO()
    torch.save({"checkpoint_version": 3.0, "iteration": 4000}, common)
    with tarfile.open(path, "w") as tar:
        _add(tar, f"{CHECKPOINT_FOLDER}/metadata.json", json.dumps({"sharded_backend": "zarr"}).encode())
        _add(tar, f"{CHECKPOINT_FOLDER}/common.pt", common.getvalue())
        for array in ZARR_ARRAYS:
            zarray = {"chunks": [2048, 12288], "dtype": "<f4", "shape": [2048, 12288], "zarr_format": 2, "order": "C", "compressor": None}
            _add(tar, f"{CHECKPOINT_FOLDER}/{array}/.zarray", json.dumps(zarray).encode())
            _add(tar, f"{CHECKPOINT_FOLDER}/{array}/0.0", bytes(64))


def write_vocabulary(folder: Path) -> None:
    """vocab.json and merges.txt as Hugging Face's gpt2 repository holds them (a tiny byte-level BPE)."""
    from mlperf_wf.benchmarks.gpt3 import tokenizer

    tokenizer.generate(folder, seed=4102)


def published(dataset_id: str, folder: Path) -> None:
    """Each dataset as the R2 downloader (or, for the vocabulary, the README's curl lines) leaves it."""
    if dataset_id == "c4_gpt3_spm_preprocessed":
        write_dataset_tarball(folder / DATASET_TARBALL)
    elif dataset_id == "gpt3_megatron_fp32_checkpoint":
        write_checkpoint_tarball(folder / CHECKPOINT_TARBALL)
    elif dataset_id == "gpt2_bpe_vocabulary":
        write_vocabulary(folder)
    else:
        raise ValueError(f"gpt3 does not read {dataset_id}")


def published_files() -> dict[str, list[str]]:
    """Top-level names each R2 catalog entry of gpt3 publishes (its ``.md5`` list), for the catalog test."""
    return {"c4_gpt3_spm_preprocessed": [DATASET_TARBALL], "gpt3_megatron_fp32_checkpoint": [CHECKPOINT_TARBALL]}


def _reference_module(ctx, path: str, name: str):
    """One file of the reference, loaded alone from the image (its package's ``__init__`` does not import here)."""
    resolved = ctx.path(path, f"the reference's {path}", kind="file")
    spec = importlib.util.spec_from_file_location(name, resolved)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _job_time_limit_minutes(ctx) -> int | None:
    """The job's time limit as SLURM gives it (``squeue %l``: [days-]hh:mm:ss), as run_gpt3.sh reads ``%L``."""
    job = os.environ.get("SLURM_JOB_ID")
    try:
        shown = subprocess.run(["squeue", "-h", "-j", job, "-o", "%l"], capture_output=True, text=True, timeout=20, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError, TypeError):
        ctx.record("value", "job time limit", "squeue -o %l (run_gpt3.sh:43 reads the job's time from squeue)", True, "squeue unavailable: not checked")
        return None
    days, _, clock = shown.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return int(days or 0) * 1440 + parts[0] * 60 + parts[1]


PARSED: dict[str, SimpleNamespace] = {}
"""The job's arguments as the reference parsed them in this process (``probe``), for its stages past start-up."""


def probe(ctx) -> None:
    arguments = _reference_module(ctx, "megatron/arguments.py", "reference_megatron_arguments")
    sys.argv = ["pretrain_gpt.py", *ctx.argv]
    args = arguments.parse_args(None, False)
    PARSED["args"] = args
    ctx.equal("args.world_size", args.world_size, int(ctx.variable("WORLD_SIZE", "megatron/arguments.py:57 reads the world size")), "parse_args")
    ctx.variable("RANK", "megatron/arguments.py:56 reads the rank")
    arguments.validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"})  # pretrain_gpt.py's args_defaults
    ctx.record(
        "value",
        "parallelism",
        "validate_args: TP x PP x DP = world",
        True,
        f"TP {args.tensor_model_parallel_size} PP {args.pipeline_model_parallel_size} DP {args.data_parallel_size}",
    )
    for flag, blend in (("--train-data-path", args.train_data_path), ("--valid-data-path", args.valid_data_path)):
        for prefix in blend[1::2]:
            header = ctx.opens(f"{prefix}.idx", f"{flag}: megatron/data/indexed_dataset.py reads the index", size=9)
            ctx.equal(f"{prefix}.idx header", header, b"MMIDIDX\x00\x00", "MMapIndexedDataset's magic")
            ctx.opens(f"{prefix}.bin", f"{flag}: megatron/data/indexed_dataset.py maps the tokens")
    tokenization = _reference_module(ctx, "megatron/tokenizer/gpt2_tokenization.py", "reference_gpt2_tokenization")
    ctx.opens(args.vocab_file, "--vocab-file (GPT2BPETokenizer)")
    ctx.opens(args.merge_file, "--merge-file (GPT2BPETokenizer)")
    bpe = tokenization.GPT2Tokenizer(args.vocab_file, args.merge_file, errors="replace", special_tokens=[], max_len=None)
    ctx.record("value", "<|endoftext|>", "the tokenizer's EOD (README.md:44-47)", "<|endoftext|>" in bpe.encoder, f"{len(bpe.encoder)} entries")
    ctx.equal("--use-ext-ckpt --use-distributed-checkpointing", (args.use_ext_ckpt, args.use_distributed_checkpointing), (True, True), "run_gpt3.sh:99-106")
    metadata = json.loads(ctx.opens(os.path.join(args.load, "metadata.json"), "--load: dist_checkpointing's metadata.json (core.py:25-36)", size=4096))
    ctx.equal("metadata.json sharded_backend", metadata.get("sharded_backend"), "zarr", "the zarr strategy loads the arrays")
    ctx.opens(os.path.join(args.load, "common.pt"), "--load: dist_checkpointing's common.pt (serialization.py:64-67)")
    ctx.glob(os.path.join(args.load, "*", ".zarray"), "--load: one zarr array per parameter (README.md:96-110)")
    ctx.path(os.path.dirname(args.save), "--save's parent (the results mount)", kind="dir")
    limit = _job_time_limit_minutes(ctx)
    if limit is not None:
        ctx.equal("--exit-duration-in-mins", args.exit_duration_in_mins, limit - EXIT_MARGIN_MINUTES, "run_gpt3.sh:43-45: the job's time less 15 minutes")
    ctx.mllog_to(ctx.variable("COMPLIANCE_FILE", "the round patch points mllog there"), "mlperf_wf_gpt3 sends megatron's mllogger to $COMPLIANCE_FILE")
    _import_megatron(ctx, args)


CONVERGED_LOSS = 2.68
"""A validation loss under the reference's target of 2.69 (training.py:964)."""
CONVERGED_ITERATION = 4016
"""The iteration at which the rehearsed run reaches the target."""


class MLLoggerLikeMLPerfCommon:
    """What megatron's ``mllogger`` (NVIDIA mlperf-common's ``MLLoggerWrapper``, megatron/__init__.py:33-36) does with a
    line: a barrier of the whole world first where ``sync``, then the line from global rank 0 only where ``unique``;
    ``log_run_stop`` is an ``end`` of ``run_stop`` with ``sync=True``. mlperf-common does not install here; ``emit(kind,
    key, value, metadata)`` writes a line."""

    def __init__(self, emit: Callable[[str, str | None, object, dict | None], None]) -> None:
        from mlperf_logging.mllog import constants

        self.constants = constants
        self._emit = emit

    def _log(self, kind: str, key: str | None = None, value: object = None, unique: bool = True, sync: bool = False, metadata: dict | None = None, **_: object):
        import torch.distributed as dist

        if sync:
            dist.barrier()
        if not unique or dist.get_rank() == 0:
            self._emit(kind, key, value, metadata)

    def start(self, *args, **kwargs):
        self._log("start", *args, **kwargs)

    def end(self, *args, **kwargs):
        self._log("end", *args, **kwargs)

    def event(self, *args, **kwargs):
        self._log("event", *args, **kwargs)

    def log_run_stop(self, status, **kwargs):
        self.end(key=self.constants.RUN_STOP, unique=True, sync=True, metadata=dict(status=status, **kwargs))


def fill_training_module(module: ModuleType, training_py: Path, logger: object, run_args: object, pipeline_stages: int | None = None) -> None:
    """``megatron.training``'s ``evaluate_and_print_results``, the reference's own (compiled alone from ``training_py``),
    in ``module``, with what it calls; ``evaluate`` returns what the reference's returns on each rank at the target: the
    loss on the ranks of the last pipeline stage, nothing elsewhere (training.py:879-885). Stages as Megatron's
    ``initialize_model_parallel`` makes them: rank r is in stage r // (world / stages); ``pipeline_stages`` defaults to
    one per rank."""
    import torch
    import torch.distributed as dist

    tree = ast.parse(training_py.read_text())
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "evaluate_and_print_results"]
    world = dist.get_world_size()
    last, stages = world - 1, pipeline_stages or world
    per_stage = world // stages

    def evaluate(*_args, **_kwargs):
        on_last_stage = dist.get_rank() // per_stage == stages - 1
        return ({"lm loss": torch.tensor([CONVERGED_LOSS], dtype=torch.float64)} if on_last_stage else {}), None

    module.__dict__.update(
        math=math,
        mllogger=logger,
        get_args=lambda: run_args,
        get_tensorboard_writer=lambda: None,
        evaluate=evaluate,
        is_last_rank=lambda: dist.get_rank() == last,
        print_rank_last=lambda message: print(message) if dist.get_rank() == last else None,
        print_rank_0=lambda message: print(message) if dist.get_rank() == 0 else None,
    )
    exec(compile(ast.Module(body=found, type_ignores=[]), str(training_py), "exec"), module.__dict__)  # the reference's own function


def converged_run_args(seq_length: int = 2048, global_batch_size: int = 1536, ext_lr_steps: int = 6144000, train_samples: int = 20000000) -> SimpleNamespace:
    """What ``evaluate_and_print_results`` and the round patch read of ``get_args()`` at the target, 16 steps in."""
    return SimpleNamespace(
        consumed_train_samples=ext_lr_steps + 16 * global_batch_size,
        ext_lr_steps=ext_lr_steps,
        seq_length=seq_length,
        tokens_per_batch=global_batch_size * seq_length,
        train_samples=train_samples,
        log_validation_ppl_to_tensorboard=True,
    )


def _print_rank_0(message: str) -> None:
    """megatron's ``print_rank_0``."""
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_rank() == 0:
        print(message, flush=True)


def _emit_through_mllog(kind: str, key: str | None, value: object, metadata: dict | None) -> None:
    """A line through mlperf-logging's mllog, wherever the round patch pointed it (mlperf-common logs through mllog)."""
    from mlperf_logging import mllog

    getattr(mllog.get_mllogger(), kind)(key=key, value=value, metadata=metadata)


class MegatronStandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``megatron`` (its ``mllogger`` and ``get_args``) and ``megatron.training`` (:func:`fill_training_module`), found by
    the import system as the reference's own would be, so the image's import hooks patch them."""

    def __init__(self, training_py: Path, run_args: SimpleNamespace, pipeline_stages: int) -> None:
        self.training_py = training_py
        self.run_args = run_args
        self.pipeline_stages = pipeline_stages

    PACKAGES = ("megatron", "megatron.mpu")
    """Stand-ins whose ``__init__`` does not import here (mlperf-common, apex, CUDA layers), but whose folders are the
    reference's: their other modules (``megatron.data.*``, ``megatron.mpu.initialize``) load from the pinned tree."""

    def find_spec(self, fullname: str, path: object, target: ModuleType | None = None):
        if fullname in (*self.PACKAGES, "megatron.training"):
            return importlib.util.spec_from_loader(fullname, self, is_package=fullname in self.PACKAGES)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module: ModuleType) -> None:
        if module.__name__ == "megatron":
            module.__path__ = [str(self.training_py.parent)]
            module.mllogger = MLLoggerLikeMLPerfCommon(_emit_through_mllog)
            module.get_args = lambda: self.run_args
            module.print_rank_0 = _print_rank_0
        elif module.__name__ == "megatron.mpu":
            # megatron/mpu/__init__.py re-exports initialize.py's group functions (and CUDA layers, which are not needed)
            module.__path__ = [str(self.training_py.parent / "mpu")]
            groups = importlib.import_module("megatron.mpu.initialize")
            module.__dict__.update({name: value for name, value in vars(groups).items() if not name.startswith("_")})
        else:
            # as training.py's `from megatron import mllogger`: what the round patch made of it
            fill_training_module(module, self.training_py, sys.modules["megatron"].mllogger, self.run_args, self.pipeline_stages)


def _import_megatron(ctx, args) -> None:
    """``import megatron`` as pretrain_gpt.py does at its start: the round patch wraps its ``mllogger`` and points mllog at
    the run's result file on every rank, before anything is logged."""
    training_py = Path(ctx.path("megatron/training.py", "the reference's megatron/training.py", kind="file"))
    run_args = converged_run_args(args.seq_length, args.global_batch_size, getattr(args, "ext_lr_steps", 0) or 0, getattr(args, "train_samples", 0) or 0)
    if "megatron" in sys.modules:
        raise ProbeFailure(f"megatron was imported before pretrain_gpt.py imports it: {sys.modules['megatron']}")
    # before the path finders (the reference's own package does not import here: six, mlperf-common, apex), after the
    # image's import hooks, which find a watched module with the finders after them and wrap its loader
    hooks = [i for i, finder in enumerate(sys.meta_path) if type(finder).__name__ == "_AfterImportFinder"]
    sys.meta_path.insert(hooks[0] + 1 if hooks else 0, MegatronStandIn(training_py, run_args, args.pipeline_model_parallel_size))
    import megatron

    wrapped = type(megatron.mllogger).__name__
    ctx.equal("megatron.mllogger", wrapped, "RoundLogger", "mlperf_wf_gpt3 wraps megatron's mllogger when megatron is imported")


INDEX_MAPS_VARIABLE = "MLPERF_WF_INDEX_MAPS"
"""Where the round patch sends Megatron's index maps (src/mlperf_wf/benchmarks/gpt3/container/patches/mlperf_wf_gpt3.py)."""


def past_start_up(ctx) -> None:
    """The reference's data stage on every rank, for real, under the job's mounts (the first thing ``pretrain`` does
    after ``run_start``, training.py:161-167): its own model-parallel groups (megatron/mpu/initialize.py, gloo), its C++
    dataset helper compiled by rank 0 as ``_compile_dependencies`` does (initialize.py:110-114: ``make`` in
    megatron/data), then on each tensor-parallel rank 0 (training.py:995) pretrain_gpt.py's own
    ``train_valid_test_datasets_provider`` with the sample counts training.py:999-1008 gives it: Megatron's
    ``GPTDataset`` opens every prefix and rank 0 builds and writes the index maps (gpt_dataset.py:307-397, through the
    image's round patch), the blend's indices come from the helper, and every builder loads the maps. A write into the
    read-only data fails here with the file and the reference's line. The one GPU operation on the way,
    ``torch.cuda.LongTensor`` for the all-reduce that stands for a barrier (gpt_dataset.py:404), is a CPU tensor."""
    import glob

    import torch
    import torch.distributed as dist

    args = PARSED["args"]
    mpu = importlib.import_module("megatron.mpu")
    mpu.initialize_model_parallel(args.tensor_model_parallel_size, args.pipeline_model_parallel_size)
    dataset_utils = importlib.import_module("megatron.data.dataset_utils")
    if dist.get_rank() == 0:
        dataset_utils.compile_helper()
    dist.barrier()  # the other ranks import the helper only after rank 0 built it (initialize.py's barriers that follow)
    torch.cuda.LongTensor = lambda values: torch.tensor(values, dtype=torch.long)  # the GPU's place in the data stage
    if mpu.get_tensor_model_parallel_rank() != 0:
        return
    gpt_dataset = importlib.import_module("megatron.data.gpt_dataset")
    namespace = {"get_args": lambda: args, "print_rank_0": _print_rank_0, "build_train_valid_test_datasets": gpt_dataset.build_train_valid_test_datasets}
    provider = ctx.reference_function("pretrain_gpt.py", "train_valid_test_datasets_provider", namespace)
    ctx.equal("--eval-iters", args.eval_iters, -1, "run_gpt3.sh:69: the whole validation subset, so training.py:999-1001 asks [train, -1, -1]")
    train, valid, _ = provider([args.train_samples, -1, -1])
    built = len(train) >= args.train_samples and len(valid) > 0
    ctx.record("value", "datasets", "pretrain_gpt.py's provider built them", built, f"{len(train)} train, {len(valid)} valid samples")
    for name, dataset in (("train", train), ("valid", valid)):
        sample = dataset[0]["text"]
        expected = args.seq_length + (1 if args.use_seq_len_plus_one_tokens else 0)  # run_gpt3.sh: --no-seq-len-plus-one-tokens
        ctx.equal(f"a {name} sample", len(sample), expected, "GPTDataset.__getitem__ through the index maps")
    folder = ctx.variable(INDEX_MAPS_VARIABLE, "the round patch sends the index maps there (the data is mounted read-only)")
    written = glob.glob(os.path.join(folder, "**", "*_indexmap_*.npy"), recursive=True)
    # three maps per dataset: two blended train prefixes and the validation prefix
    ctx.record("glob", f"{folder}/**/*_indexmap_*.npy", "the index maps, in the run's writable folder", len(written) == 9, f"{len(written)} files")


def at_the_target(ctx) -> None:
    """The reference's ``evaluate_and_print_results`` at the target on every rank of the job's world, as patched by the
    image's round patch at import; every rank must stop (``sys.exit(0)``) after rank 0 logged ``run_stop`` ``success``."""
    import megatron.training

    try:
        megatron.training.evaluate_and_print_results(f"iteration {CONVERGED_ITERATION}", None, None, [], CONVERGED_ITERATION, None, False)
        ended = "returned: the run would train on"
    except SystemExit as stop:
        ended = f"exited {stop.code}"
    ctx.equal("the end of a converged run", ended, "exited 0", "mlperf_wf_gpt3: every rank stops after run_stop success")
