"""llama2_70b_lora's rehearsal: ``accelerate launch --config_file configs/default_config.yaml scripts/train.py`` on the box.

The reference's own code runs here (its pinned packages are in ``.venv-reference``: transformers 4.38.1, accelerate
0.27.2, peft 0.8.2, datasets 2.17.1), so nothing is re-read from its files:

- the launcher is the real ``accelerate launch`` 0.27.2 (``.venv-reference/bin`` first on the image's ``PATH``) with
  the reference's own config file (``distributed_type: DEEPSPEED``): its ``deepspeed_launcher`` runs torchrun in
  process and starts the node's ranks. DeepSpeed 0.13.2 does not import with torch 2.13, so the image holds a
  stand-in package (``rehearsal_image/deepspeed``) with only what the launcher checks;
- in every rank the probe imports the reference's ``scripts/train.py`` (its imports: datasets, transformers,
  ``mlperf_logging_utils`` and ``utils``, with the round patch applied at their import), parses the job's arguments
  with the reference's ``HfArgumentParser(ScriptArguments)`` and runs the reference's ``main(args)`` itself;
- the GPU steps are taken over where ``main`` reaches them: DeepSpeed's NCCL world (``accelerate/state.py``:
  ``deepspeed.comm.init_distributed``, reached from ``TrainingArguments``) becomes a gloo world of the launcher's
  ranks, ``torch.cuda.set_device(cuda:<local rank>)`` is checked against the GPUs the job gives the node, the 70B
  load (``utils.create_and_prepare_model``: ``AutoModelForCausalLM.from_pretrained``) loads the checkpoint's
  config with transformers and opens every weight shard its index names instead of loading them, and ``Trainer``
  (DeepSpeed's engine) is where the probe stops;
- between them the reference's own code runs for real: ``LoraLogger`` (``$COMPLIANCE_FILE``), ``TrainingArguments``
  with the launcher's ``ACCELERATE_*`` environment (its ``DeepSpeedPlugin``), peft's ``LoraConfig``, the
  ``load_dataset("parquet", ...)`` of the mounted prepared data and ``MLPerfCallback``;
- its log: the callback's ``on_train_begin`` (with the round patch) writes the start-of-run lines from rank 0.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

from tests.rehearsal.probe import ProbeFailure
from tests.rehearsal.spec import ROOT, Rehearsal

REFERENCE_VENV_BIN = ROOT / ".venv-reference" / "bin"
"""The reference's pinned packages (``make .venv-reference/bin/activate``): the image's Python and accelerate."""
IMAGE_SOFTWARE = Path(__file__).parent / "rehearsal_image"
"""Stand-ins for the base image's software that cannot run here (DeepSpeed)."""
STAND_INS = "/opt/rehearsal-stand-ins"

REHEARSAL = Rehearsal(
    benchmark="llama2_70b_lora",
    image_files={"/workspace/ft-llm": "mlcommons-training-aa344c7/llama2_70b_lora"},
    image_tools={STAND_INS: str(IMAGE_SOFTWARE.relative_to(ROOT))},
    entry=("scripts/train.py",),
    nodes=1,
    launchers=("pyxis", "docker"),
    image_env={
        # nvcr.io/nvidia/pytorch:24.01-py3 puts its Python (where the Dockerfile pip-installs requirements.txt) first
        "PATH": f"{REFERENCE_VENV_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTHONPATH": STAND_INS,
    },
)

CHECKPOINT_MODULE = '''"""A stand-in for the published checkpoint's modeling_llama.py (the rehearsal's tiny contents; tests only)."""

from transformers import LlamaForCausalLM as LlamaForCausalLM
'''


def published(dataset_id: str, folder: Path) -> None:
    """GovReport as MLCommons publishes it (pre-tokenized parquet) and the checkpoint under its catalog file names."""
    if dataset_id == "scrolls_gov_report_8k":
        import pyarrow as pa
        import pyarrow.parquet as pq

        for split, rows in (("train", 6), ("validation", 3)):
            ids = [[1, *range(10 + row, 30 + row), 2] for row in range(rows)]
            table = pa.table({"input_ids": ids, "attention_mask": [[1] * len(i) for i in ids], "labels": [[-100] * 5 + i[5:] for i in ids]})
            pq.write_table(table, folder / f"{split}-00000-of-00001.parquet")
    elif dataset_id == "llama2_70b_fused_qkv":
        import json

        import numpy as np
        from safetensors.numpy import save_file

        from mlperf_wf.config import registry  # the project's venv (published runs there; the probe in the image's Python)

        names = [entry.path for entry in registry.load_dataset(dataset_id).files]
        shards = sorted(name for name in names if name.startswith("model-") and name.endswith(".safetensors"))
        config = {
            "architectures": ["LlamaForCausalLM"],
            "auto_map": {"AutoModelForCausalLM": "modeling_llama.LlamaForCausalLM"},
            "model_type": "llama",
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_attention_heads": 2,
            "num_hidden_layers": len(shards),
            "num_key_value_heads": 2,
            "vocab_size": 64,
            "torch_dtype": "bfloat16",
        }
        weight_map = {}
        for index, shard in enumerate(shards):
            name = f"model.layers.{index}.self_attn.qkv_proj.weight"
            save_file({name: np.zeros((3, 2), dtype=np.float32)}, str(folder / shard))
            weight_map[name] = shard
        for name in names:
            target = folder / name
            if name == "config.json":
                target.write_text(json.dumps(config, indent=1) + "\n")
            elif name == "model.safetensors.index.json":
                target.write_text(json.dumps({"metadata": {"total_size": 24 * len(shards)}, "weight_map": weight_map}, indent=1) + "\n")
            elif name == "generation_config.json":
                target.write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}) + "\n")
            elif name == "modeling_llama.py":
                target.write_text(CHECKPOINT_MODULE)
            elif not target.exists():
                target.write_text(f"{name} (rehearsal stand-in)\n")
    else:
        raise ValueError(f"llama2_70b_lora does not read {dataset_id}")


class _FirstGpuStep(Exception):
    """The reference reached DeepSpeed's engine (``Trainer``): the probe takes over from here."""


def _launch_words() -> list[str]:
    """The ``accelerate launch`` command line of this rank's launcher (torchrun runs inside it: the parent process)."""
    try:
        words = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []
    return [word.decode(errors="replace") for word in words if word]


def _gpus_of_this_node(ctx) -> int | None:
    """The GPUs the job gives this node (CUDA_VISIBLE_DEVICES as SLURM or the container runtime sets it)."""
    visible = [device for device in ctx.env.get("CUDA_VISIBLE_DEVICES", "").split(",") if device]
    if visible:
        return len(visible)
    on_node = ctx.env.get("SLURM_GPUS_ON_NODE", "")
    return int(on_node) if on_node.isdigit() else None


def _check_launch(ctx) -> None:
    """The accelerate config the launcher read, and the world it started against the job's GPUs."""
    words = _launch_words()
    config_file = words[words.index("--config_file") + 1] if "--config_file" in words[:-1] else ""
    if not config_file:
        ctx.fail(f"this rank's launcher is not accelerate launch --config_file ... (parent command: {' '.join(words)[:300]})")
    config = yaml.safe_load(ctx.opens(config_file, "accelerate launch --config_file", size=1 << 20))
    ctx.equal("distributed_type of the accelerate config", config.get("distributed_type"), "DEEPSPEED", "the reference trains with DeepSpeed ZeRO-3")
    ctx.equal("ACCELERATE_USE_DEEPSPEED", ctx.env.get("ACCELERATE_USE_DEEPSPEED"), "true", "accelerate's deepspeed_launcher started this rank")
    stage = str(config.get("deepspeed_config", {}).get("zero_stage"))
    ctx.equal("ACCELERATE_DEEPSPEED_ZERO_STAGE", ctx.env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE"), stage, "the config's zero_stage reaches the ranks")
    local_world = int(ctx.env.get("LOCAL_WORLD_SIZE", "0"))
    gpus = _gpus_of_this_node(ctx)
    named = words[words.index("--num_processes") + 1] if "--num_processes" in words[:-1] else None
    ctx.record(
        "value",
        "processes of the launch",
        "--num_processes of the command, else the config's num_processes",
        True,
        f"{named or config.get('num_processes')} ({'command' if named else config_file})",
    )
    if gpus is not None:
        ctx.equal(
            "ranks accelerate started on this node (LOCAL_WORLD_SIZE)",
            local_world,
            gpus,
            f"one rank per GPU of the node (without --num_processes accelerate starts {config_file}'s num_processes: {config.get('num_processes')})",
        )
    nodes = int(ctx.env.get("SLURM_NNODES", "1"))
    ctx.equal("WORLD_SIZE", int(ctx.env.get("WORLD_SIZE", "0")), nodes * local_world, "ranks of every node of the job, one world")


class _StandIns:
    """What takes the place of the reference's GPU steps while its ``main`` runs."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.trainer_kwargs: dict = {}
        self.lora_config = None

    def init_distributed(self, dist_backend: str = "nccl", auto_mpi_discovery: bool = True, **kwargs) -> None:
        """DeepSpeed's NCCL world (accelerate/state.py): the launcher's world, with gloo."""
        import datetime

        import torch.distributed as dist

        self.ctx.record("value", "deepspeed.comm.init_distributed", "accelerate's PartialState forms DeepSpeed's world", True, f"backend {dist_backend}")
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))

    def set_device(self, device) -> None:
        """``torch.cuda.set_device(cuda:<LOCAL_RANK>)``: the GPU must be one the job gives this node."""
        import torch

        index = torch.device(device).index if not isinstance(device, int) else device
        gpus = _gpus_of_this_node(self.ctx)
        held = gpus is None or (index is not None and index < gpus)
        self.ctx.record("value", f"torch.cuda.set_device({device})", "accelerate's PartialState picks this rank's GPU", held, f"{gpus} GPUs on the node")
        if not held:
            raise ProbeFailure(f"torch.cuda.set_device({device}): the job gives this node {gpus} GPUs (CUDA_VISIBLE_DEVICES), no cuda:{index}")

    def from_pretrained(self, model_path: str, **kwargs):
        """``AutoModelForCausalLM.from_pretrained`` of the 70B checkpoint: its config and every shard, not the weights."""
        import json
        import types

        from transformers import AutoConfig

        ctx = self.ctx
        config = AutoConfig.from_pretrained(model_path, trust_remote_code=kwargs.get("trust_remote_code", False))
        ctx.record(
            "value", f"{model_path}/config.json", "transformers' AutoConfig of the checkpoint", True, f"{config.model_type}, {config.num_hidden_layers} layers"
        )
        module = (getattr(config, "auto_map", None) or {}).get("AutoModelForCausalLM", "")
        if module:
            ctx.opens(os.path.join(model_path, module.split(".")[0] + ".py"), "the checkpoint's model code (trust_remote_code, auto_map)")
        index = json.loads(ctx.opens(os.path.join(model_path, "model.safetensors.index.json"), "the safetensors index", size=1 << 24))
        for shard in sorted(set(index["weight_map"].values())):
            ctx.opens(os.path.join(model_path, shard), "a weight shard the index names")
        ctx.record("value", "from_pretrained arguments", "utils.create_and_prepare_model", True, ", ".join(f"{k}={v}" for k, v in sorted(kwargs.items())))
        stand_in = types.SimpleNamespace(config=config, gradient_checkpointing_enable=lambda **_: None, print_trainable_parameters=lambda: None)
        return stand_in

    def get_peft_model(self, model, peft_config, *args, **kwargs):
        self.lora_config = peft_config
        self.ctx.record(
            "value",
            "peft LoraConfig",
            "utils.create_and_prepare_model",
            True,
            f"r={peft_config.r}, alpha={peft_config.lora_alpha}, targets={sorted(peft_config.target_modules)}",
        )
        return model

    def trainer(self, **kwargs):
        self.trainer_kwargs = kwargs
        raise _FirstGpuStep


def probe(ctx) -> None:
    scripts = ctx.path("scripts/train.py", "accelerate launch's training script", kind="file").parent
    sys.path.insert(0, str(scripts))  # as Python does for the script it runs
    _check_launch(ctx)
    import deepspeed.comm
    import torch
    import train as reference  # scripts/train.py; mlperf_logging_utils and utils with the round patch
    import utils as reference_utils

    args = reference.HfArgumentParser(reference.ScriptArguments).parse_args_into_dataclasses()[0]
    ctx.record(
        "value",
        "the reference's HfArgumentParser(ScriptArguments)",
        "scripts/train.py __main__",
        True,
        f"max_seq_length={args.max_seq_length}, seed={args.seed}",
    )
    ctx.equal("--seed", args.seed, int(ctx.env.get("SEED", "-1")), "the run's seed reaches the reference")

    stand_ins = _StandIns(ctx)
    deepspeed.comm.init_distributed = stand_ins.init_distributed
    torch.cuda.set_device = stand_ins.set_device
    reference_utils.AutoModelForCausalLM = type("AutoModelForCausalLM", (), {"from_pretrained": staticmethod(stand_ins.from_pretrained)})
    reference_utils.get_peft_model = stand_ins.get_peft_model
    reference.Trainer = stand_ins.trainer
    try:
        reference.main(args)
    except _FirstGpuStep:
        pass
    else:
        ctx.fail("scripts/train.py main() returned without reaching Trainer")
    kwargs = stand_ins.trainer_kwargs
    training_arguments = kwargs["args"]
    plugin = training_arguments.deepspeed_plugin
    ctx.equal("DeepSpeedPlugin zero_stage (TrainingArguments)", getattr(plugin, "zero_stage", None), 3, "accelerate's environment reaches transformers")
    for split, rows in (("train", kwargs["train_dataset"]), ("validation", kwargs["eval_dataset"])):
        ctx.opens(os.path.join(args.dataset_path, f"{split}-00000-of-00001.parquet"), f"load_dataset('parquet') {split} file")
        ctx.record(
            "value", f"{split} rows", "datasets.load_dataset('parquet') of --dataset_path", len(rows) > 0, f"{len(rows)} rows, columns {rows.column_names}"
        )
        if "input_ids" not in rows.column_names:
            ctx.fail(f"{args.dataset_path}: the {split} parquet has no input_ids column (the reference trains on pre-tokenized rows)")
    ctx.path(Path(args.output_dir).parent, "--output_dir's parent (TrainingArguments output_dir)", kind="dir")

    from transformers import TrainerControl, TrainerState

    (callback,) = kwargs["callbacks"]
    callback.on_train_begin(training_arguments, TrainerState(), TrainerControl())  # LoraLogger writes from rank 0 only
    log = os.environ.get("COMPLIANCE_FILE", "")
    ctx.record("log", log, "LoraLogger writes $COMPLIANCE_FILE (else mlperf_compliance.log in the working folder)", bool(log))
