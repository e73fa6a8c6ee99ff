"""The starting checkpoint as MLCommons publishes it converted: a Megatron-Bridge distributed checkpoint (tiny stand-in).

The reference loads ``/checkpoint`` weights-only at step 0 (pretrain_deepseek_v3_671b.py:198-205: ``load =
"/checkpoint"``, ``ckpt_step = 0``, ``load_optim = load_rng = False``). Megatron-Bridge v0.3.0 (the Dockerfile's
MBRIDGE_REVISION) then opens ``<load>/iter_0000000`` (``_resolve_checkpoint_iteration`` with ``ckpt_step``: the folder
must exist), recognises it as megatron-core's ``torch_dist`` format by its ``metadata.json``, reads its
``run_config.yaml`` (the saved tensor/pipeline sizes) and ``common.pt``, and loads the shards (``.metadata`` and
``__<rank>_<n>.distcp``, torch.distributed.checkpoint) into the model. The reference README (:127-133, :187-196) has
the Hugging Face checkpoint converted to this format by hand (``run_conversion.sh``, a 16-GPU job); R2 also publishes
the conversion itself, ``deepseekv3_checkpoint_bf16_megatron_bridge`` (r2-infra training/metadata, 524 files):

    latest_checkpointed_iteration.txt      "0\\n" (megatron's tracker)
    latest_train_state.pt                  Megatron-Bridge's tracker
    iter_0000000/.metadata, __<r>_<n>.distcp (256 writers x 2), metadata.json, common.pt, train_state.pt,
                 run_config.yaml, run_config.yaml.bak, modelopt_run_config.yaml, tokenizer/{tokenizer.json,
                 tokenizer_config.json, special_tokens_map.json}

The stand-in writes the same names for the tiny DeepSeek-V3 of :mod:`starting_checkpoint` (one writer: ``__0_0.distcp``),
its weights in bfloat16 through torch.distributed.checkpoint, and :func:`load` reads them back the way Megatron-Bridge
does (the iteration folder ``ckpt_step`` names, the format marker, the run config, the shards). Deviations: the
shards hold the Hugging Face parameter names (the tiny tier trains transformers' model, not Megatron's), and the run
config's ``model`` section carries the Hugging Face configuration the tiny model is built from.
"""

from __future__ import annotations

import json
from pathlib import Path

from mlperf_wf.benchmarks.deepseekv3_671b import starting_checkpoint
from mlperf_wf.errors import UserError

STEP = 0
"""The reference's ``ckpt_step`` (pretrain_deepseek_v3_671b.py:204)."""
ITERATION_FOLDER = f"iter_{STEP:07d}"
"""Megatron-Bridge's ``get_checkpoint_name(load, 0)`` (utils/checkpoint_utils.py: ``iter_{:07d}``)."""
MEGATRON_TRACKER = "latest_checkpointed_iteration.txt"
BRIDGE_TRACKER = "latest_train_state.pt"
FORMAT_MARKER = "metadata.json"
"""megatron-core's dist_checkpointing marker: ``check_is_distributed_checkpoint`` reads it."""
TORCH_DIST = {"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch", "common_backend_version": 1}
RUN_CONFIG = "run_config.yaml"


def _train_state() -> dict:
    import torch

    return {
        "step": torch.tensor(STEP),
        "consumed_train_samples": torch.tensor(0),
        "skipped_train_samples": torch.tensor(0),
        "consumed_valid_samples": torch.tensor(0),
        "floating_point_operations_so_far": torch.tensor(0.0),
        "do_train": torch.tensor(True),
        "do_valid": torch.tensor(True),
        "do_test": torch.tensor(False),
    }


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write the seeded initial tiny DeepSeek-V3 in the published Megatron-Bridge layout."""
    import torch
    import torch.distributed.checkpoint as dcp
    import yaml
    from transformers import DeepseekV3ForCausalLM

    from mlperf_wf.language_models import llama31_tokenizer as tokenizer

    torch.manual_seed(seed)
    config = starting_checkpoint.config()
    model = DeepseekV3ForCausalLM(config).to(torch.bfloat16)
    iteration = out_dir / ITERATION_FOLDER
    iteration.mkdir(parents=True, exist_ok=True)
    dcp.save({name: tensor.detach().clone() for name, tensor in model.state_dict().items()}, checkpoint_id=str(iteration))
    (iteration / FORMAT_MARKER).write_text(json.dumps(TORCH_DIST))
    torch.save({}, iteration / "common.pt")
    torch.save(_train_state(), iteration / "train_state.pt")
    torch.save(_train_state(), out_dir / BRIDGE_TRACKER)
    (out_dir / MEGATRON_TRACKER).write_text(f"{STEP}\n")
    run_config = {
        "model": {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "hf_config": config.to_dict()},
        "checkpoint": {"save_optim": False, "save_rng": False, "fully_parallel_save": True},
    }
    text = yaml.safe_dump(run_config, sort_keys=True)
    for name in (RUN_CONFIG, "run_config.yaml.bak", "modelopt_run_config.yaml"):
        (iteration / name).write_text(text)
    words = tokenizer.build()
    words.save_pretrained(iteration / "tokenizer")
    for extra in ("README.md", "chat_template.jinja"):
        (iteration / "tokenizer" / extra).unlink(missing_ok=True)
    # newer transformers no longer write it; the published folder has one
    special = {"bos_token": words.bos_token, "eos_token": words.eos_token, "pad_token": words.pad_token}
    (iteration / "tokenizer" / "special_tokens_map.json").write_text(json.dumps(special))
    return sorted(p for p in out_dir.rglob("*") if p.is_file())


def load(folder: Path):
    """The checkpoint's model in float32 for training, read as Megatron-Bridge reads the published conversion."""
    import torch.distributed.checkpoint as dcp
    import yaml
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    iteration = folder / ITERATION_FOLDER
    if not iteration.is_dir():
        raise UserError(
            f"{iteration}: no such folder; the starting checkpoint must be the Megatron-Bridge conversion "
            f"(deepseekv3_checkpoint_bf16_megatron_bridge), loaded at ckpt_step {STEP}"
        )
    marker = iteration / FORMAT_MARKER
    found = json.loads(marker.read_text()).get("sharded_backend") if marker.is_file() else None
    if found != "torch_dist":
        raise UserError(f"{marker}: sharded_backend {found!r}; allowed: 'torch_dist' (megatron-core's distributed checkpoint)")
    model_config = (yaml.safe_load((iteration / RUN_CONFIG).read_text()) or {}).get("model", {}).get("hf_config", {})
    if model_config.get("model_type") != "deepseek_v3" or model_config.get("num_hidden_layers", 0) <= model_config.get("first_k_dense_replace", 0):
        raise UserError(
            f"{iteration / RUN_CONFIG}: model.hf_config model_type {model_config.get('model_type')!r} with "
            f"{model_config.get('num_hidden_layers')} layers; allowed: deepseek_v3 with at least one MoE layer after first_k_dense_replace"
        )
    model = DeepseekV3ForCausalLM(DeepseekV3Config.from_dict(model_config)).float()
    state = model.state_dict()
    dcp.load(state, checkpoint_id=str(iteration))
    model.load_state_dict(state)
    model.train()
    return model
