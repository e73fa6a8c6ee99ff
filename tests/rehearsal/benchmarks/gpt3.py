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

import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.rehearsal.spec import Rehearsal

REHEARSAL = Rehearsal(
    benchmark="gpt3",
    image_files={"/workspace/llm": "mlcommons-training-aa344c7/retired_benchmarks/gpt3/megatron-lm"},
    entry=("pretrain_gpt.py",),
    nodes=2,
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


def write_dataset_tarball(path: Path, documents: int = 8) -> None:
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


def probe(ctx) -> None:
    arguments = _reference_module(ctx, "megatron/arguments.py", "reference_megatron_arguments")
    sys.argv = ["pretrain_gpt.py", *ctx.argv]
    args = arguments.parse_args(None, False)
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
