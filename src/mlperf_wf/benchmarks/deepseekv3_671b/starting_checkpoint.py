"""Seeded stand-in of the DeepSeek-V3 BF16 starting checkpoint, in the published Hugging Face format.

The reference never trains DeepSeek-V3 from scratch: every run loads ``/checkpoint`` weights-only
(pretrain_deepseek_v3_671b.py:198-205: ``load_optim=False``, ``ckpt_step=0``), converted to Megatron's format
from MLCommons' BF16 Hugging Face checkpoint (catalog ``deepseekv3_checkpoint_bf16``; README.md:127-133,
185-196: DeepSeek-V3-Base trained further until its experts' loads were balanced).

The stand-in is a Hugging Face ``DeepseekV3ForCausalLM`` folder (``config.json``, ``model.safetensors`` in
bfloat16, ``generation_config.json``) of a tiny DeepSeek-V3: multi-head latent attention (query LoRA rank 32,
key/value LoRA rank 16, rope/nope head dims 8/8, value head 16), one dense layer then one MoE layer
(``first_k_dense_replace = 1``, as 671B's 3 dense + 58 MoE) with 4 routed experts + 1 shared, top-2 sigmoid
routing in one group. Its weights are the seeded initial ones, untrained: evaluated as it is, its log
perplexity is about ln(258) = 5.55, above the target (the "no training" baseline). Untrained rather than
pretrained like the real one because the tiny runs reach 3.6 from it in about twenty steps: a pretrained
start would leave nothing to measure.
"""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.errors import UserError
from mlperf_wf.language_models import llama31_tokenizer as tokenizer

HIDDEN = 64
"""Model width (671B: 7168)."""
LAYERS = 2
"""Decoder layers (671B: 61), the first dense."""
DENSE_LAYERS = 1
"""Leading dense layers (671B: first_k_dense_replace = 3)."""
ROUTED_EXPERTS = 4
"""Routed experts per MoE layer (671B: 256)."""
EXPERTS_PER_TOKEN = 2
"""Routed experts each token uses (671B: 8)."""
MAX_POSITIONS = 4096
"""Context length the model is built for (the benchmark's 4096); the tiny runs train on shorter sequences."""


def config():
    """The tiny model's ``DeepseekV3Config``."""
    from transformers import DeepseekV3Config

    return DeepseekV3Config(
        vocab_size=tokenizer.SYMBOLS + 2,
        hidden_size=HIDDEN,
        intermediate_size=HIDDEN * 11 // 4,
        moe_intermediate_size=HIDDEN // 2,
        num_hidden_layers=LAYERS,
        first_k_dense_replace=DENSE_LAYERS,
        n_routed_experts=ROUTED_EXPERTS,
        n_shared_experts=1,
        num_experts_per_tok=EXPERTS_PER_TOKEN,
        n_group=1,
        topk_group=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        q_lora_rank=32,
        kv_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=16,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.SYMBOLS,
        eos_token_id=tokenizer.SYMBOLS + 1,
    )


def load(folder: Path):
    """The checkpoint's model in float32 for training; refuses a folder that is not a DeepSeek-V3 with routed experts."""
    from transformers import AutoConfig, DeepseekV3ForCausalLM

    try:
        loaded = AutoConfig.from_pretrained(folder)
    except (OSError, ValueError) as err:
        raise UserError(f"{folder}/config.json: not a Hugging Face model configuration: {err}") from None
    if loaded.model_type != "deepseek_v3" or loaded.num_hidden_layers <= loaded.first_k_dense_replace:
        raise UserError(
            f"{folder}/config.json: model_type {loaded.model_type!r} with {loaded.num_hidden_layers} layers; "
            "allowed: deepseek_v3 with at least one MoE layer after first_k_dense_replace"
        )
    model = DeepseekV3ForCausalLM.from_pretrained(folder, dtype="float32")
    model.train()
    return model


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write the seeded initial model as a bfloat16 Hugging Face checkpoint folder."""
    import torch
    from transformers import DeepseekV3ForCausalLM

    torch.manual_seed(seed)
    model = DeepseekV3ForCausalLM(config()).to(torch.bfloat16)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    (out_dir / "README.md").write_text(
        f"Tiny stand-in of the DeepSeek-V3 BF16 starting checkpoint (mlperf-workflow tiny tier, seed {seed}): an untrained\n"
        f"{LAYERS}-layer DeepSeek-V3 of width {HIDDEN} ({DENSE_LAYERS} dense, then MoE with {ROUTED_EXPERTS} routed experts, top-{EXPERTS_PER_TOKEN}).\n"
    )
    return sorted(p for p in out_dir.rglob("*") if p.is_file())
