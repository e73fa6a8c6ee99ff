"""gpt_oss_20b's rehearsal: ``env ./run_and_time.sh`` of small_llm_moe_pretraining/primus (aa344c7) on one node of the
box (pyxis, and docker).

Probe mode: Primus and its Megatron-LM do not install here (the image clones them; neither is in our reference copy),
so the shell script runs for real (``run_and_time.sh``: its ``torchrun`` branch, as one task per node takes it) and
the probe takes over in the first Python process of the reference that the script's torchrun starts, ``src/train.py``
(the entry), on every rank. It reads the reference's own files at the pinned commit for every variable and path:

- ``run_and_time.sh``: every ``${VAR}`` it expands must be set (``set -e`` without ``-u``: an empty one would reach
  torchrun), and the world its torchrun line forms (``--nproc_per_node=${GPUS_PER_NODE}``, ``--nnodes=${NNODES}``)
  must be the plan's geometry, i.e. one rank per allocated GPU;
- ``src/train.py``: ``$EXP`` must exist (main, lines 109-112); ``DATA_PATH`` sets ``HF_HOME`` (setup_environment);
- ``$EXP`` (conf/gpt_oss_20B-pretrain-nvidia.yaml) with Primus's ``${VAR:default}`` interpolation from the job's
  environment: the module's ``overrides`` give the data paths (after the round patch's own ``relocate_data``, which
  points the yaml's ``/data/`` at ``MLPERF_WF_DATA_DIR`` and ``data_cache_path`` at ``MLPERF_WF_DATA_CACHE``: each
  prefix's ``.bin`` and ``.idx`` must exist, the cache folder be writable), the tokenizer (``tokenizer_model``:
  ``transformers.AutoTokenizer.from_pretrained``, as Primus's HF tokenizers load it) and the parallel sizes, which must
  fit the world as Megatron's ``initialize_model_parallel`` requires (``WORLD_SIZE`` divisible by TP x PP and by
  EP x TP x PP, ``num_experts`` by EP, ``global_batch_size`` by ``micro_batch_size`` x the data-parallel size);
- the log: primus_mllog writes ``MLLOG_OUTPUT_FILE`` (``ENABLE_MLLOG=1``); the round patch sends it to
  ``$COMPLIANCE_FILE``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.rehearsal.spec import Rehearsal

REHEARSAL = Rehearsal(
    benchmark="gpt_oss_20b",
    # Dockerfile.nvidia: WORKDIR /workspace/code; COPY . . (the reference folder)
    image_files={"/workspace/code": "mlcommons-training-aa344c7/small_llm_moe_pretraining/primus"},
    entry=("src/train.py",),
    nodes=1,
    launchers=("pyxis", "docker"),
)

PRIMUS_VARIABLE = re.compile(r"\$\{(\w+):([^}]*)\}")
"""Primus's yaml interpolation (primus/core/utils/yaml_utils.py): ``${VAR:default}``, the environment's value or the default."""


def published(dataset_id: str, folder: Path) -> None:
    """llama31_8b's published C4 and tokenizer folder (the catalog's file lists), tiny contents, as that benchmark's
    rehearsal writes them (the campaign writes a dataset two benchmarks share once)."""
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
        raise ValueError(f"gpt_oss_20b does not read {dataset_id}")


def probe(ctx) -> None:
    _run_and_time(ctx)
    exp = ctx.variable("EXP", "src/train.py:109 (the experiment yaml)")
    ctx.path(exp, "src/train.py:111-112 raises FileNotFoundError without it", kind="file")
    ctx.variable("DATA_PATH", "src/train.py:68,114 (--data_path; HF_HOME=<DATA_PATH>/huggingface)")
    overrides = _primus_overrides(ctx, exp)
    _data(ctx, overrides)
    _tokenizer(ctx, overrides)
    _parallel_sizes(ctx, overrides)
    _log(ctx)


def _run_and_time(ctx) -> None:
    """Every variable run_and_time.sh expands, and the world its torchrun line formed."""
    script = ctx.path("run_and_time.sh", "the job's command", kind="file").read_text()
    for name in sorted(set(re.findall(r"\$\{(\w+)\}", script))):
        ctx.variable(name, "run_and_time.sh expands it (set -e, no -u: unset would reach torchrun empty)")
    gpus, nodes = int(ctx.env["GPUS_PER_NODE"]), int(ctx.env["NNODES"])
    ctx.equal("WORLD_SIZE", int(ctx.variable("WORLD_SIZE", "torchrun's world")), nodes * gpus, "torchrun --nproc_per_node=$GPUS_PER_NODE --nnodes=$NNODES")
    local = int(ctx.variable("LOCAL_WORLD_SIZE", "torchrun's processes on this node"))
    ctx.equal("LOCAL_WORLD_SIZE (torchrun --nproc_per_node=$GPUS_PER_NODE)", local, REHEARSAL.gpus_per_node, "one rank per GPU the plan allocates on a node")


def _primus_overrides(ctx, exp: str) -> dict:
    """The pre_trainer module's overrides of the experiment yaml, interpolated as Primus does from the environment."""
    import yaml

    text = Path(exp).read_text()
    for name, default in PRIMUS_VARIABLE.findall(text):
        ctx.record("variable", name, f"{exp}: ${{{name}:{default}}}", True, ctx.env.get(name, f"(default {default})"))
    resolved = PRIMUS_VARIABLE.sub(lambda found: ctx.env.get(found.group(1), found.group(2)), text)
    module = yaml.safe_load(resolved)["modules"]["pre_trainer"]
    ctx.equal("modules.pre_trainer.framework", module.get("framework"), "megatron", "src/train.py builds MLPerfMegatronPretrainTrainer")
    return dict(module["overrides"])


def _data(ctx, overrides: dict) -> None:
    """The data paths as Megatron opens them, after the round patch's relocation (its own function)."""
    from types import SimpleNamespace

    import mlperf_wf_gpt_oss_20b as patch  # the round patch, as the image's hooks import it

    config = SimpleNamespace(**{key: overrides.get(key) for key in (*patch.DATA_PATH_KEYS, "data_cache_path")})
    patch.relocate_data(config)
    for key in patch.DATA_PATH_KEYS:
        value = getattr(config, key)
        if value is None:
            continue
        for word in value if isinstance(value, list) else str(value).split():
            if re.fullmatch(r"[0-9.eE+-]+", word):
                continue  # a blend weight
            for suffix in (".bin", ".idx"):
                ctx.opens(word + suffix, f"{key} (Megatron's IndexedDataset opens <prefix>{suffix})")
    cache = ctx.path(config.data_cache_path or "", "data_cache_path (Megatron writes its sample and shuffle index there)", kind="dir")
    writable = os.access(cache, os.W_OK)
    ctx.record("path", str(cache), "data_cache_path must be writable (the data mount is read-only)", writable)
    if not writable:
        ctx.fail(f"data_cache_path {cache} is not writable in the container")


def _tokenizer(ctx, overrides: dict) -> None:
    ctx.equal("tokenizer_type", overrides.get("tokenizer_type"), "Llama3Tokenizer", "the yaml's tokenizer")
    path = str(overrides.get("tokenizer_model"))
    ctx.path(path, "tokenizer_model (${MODEL}: the Llama 3.1 tokenizer folder)", kind="dir")
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(path)
    ctx.record("path", path, "transformers.AutoTokenizer.from_pretrained loads it", True, type(loaded).__name__)


def _parallel_sizes(ctx, overrides: dict) -> None:
    """Megatron's checks of the parallel sizes against the world (initialize_model_parallel, the batch calculator)."""
    world = int(ctx.env["WORLD_SIZE"])
    tp, pp, ep = (int(overrides[key]) for key in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "expert_model_parallel_size"))
    ctx.equal(f"WORLD_SIZE {world} % (TP {tp} x PP {pp})", world % (tp * pp), 0, "Megatron: the model-parallel group divides the world")
    ctx.equal(f"WORLD_SIZE {world} % (EP {ep} x TP {tp} x PP {pp})", world % (ep * tp * pp), 0, "Megatron: the expert-parallel group divides the world")
    ctx.equal(f"num_experts {overrides['num_experts']} % EP {ep}", int(overrides["num_experts"]) % ep, 0, "each expert-parallel rank holds whole experts")
    data_parallel = world // (tp * pp)
    gbs, mbs = int(overrides["global_batch_size"]), int(overrides["micro_batch_size"])
    ctx.equal(f"global_batch_size {gbs} % (micro_batch_size {mbs} x DP {data_parallel})", gbs % (mbs * data_parallel), 0, "Megatron's microbatch calculator")


def _log(ctx) -> None:
    ctx.equal("ENABLE_MLLOG", ctx.variable("ENABLE_MLLOG", "primus_mllog logs only with it"), "1", "the reference's config_B200_1x8x1.sh:54")
    ctx.variable("MLLOG_OUTPUT_FILE", "primus_mllog's log file (config_B200_1x8x1.sh:55)")
    from mlperf_wf_mllog import result_file  # the round patch's target: the run's result file

    target = result_file()
    if not target:
        ctx.fail("COMPLIANCE_FILE is not set: primus_mllog would write MLLOG_OUTPUT_FILE, outside the run's result")
    ctx.path(os.path.dirname(target), "the result file's folder (the round patch creates the file there)", kind="dir")
    ctx.mllog_to(target, "primus_mllog writes MLLOG_OUTPUT_FILE; the round patch sends it to $COMPLIANCE_FILE")
