"""Seeded stand-in of the Llama 3.1 405B starting checkpoint, in the reference's two-folder layout.

The reference starts from Meta's Llama 3.1 405B (BF16) converted to a NeMo checkpoint: a folder with
``context/`` (the model's configuration) and ``weights/`` (the tensors) (config.sh:46-52, README.md:228-254),
restored weights-only with ``USE_CKPT=1 FROM_HF=1`` (run_llama31.sh:82-87 -> ``--use_ckpt --resume_from_hf``;
pretrain_llama31.py:474-485). MLCommons hosts it for members only (README.md:127-129).

The stand-in keeps the layout: ``context/config.json`` is a Hugging Face ``LlamaConfig`` of a tiny Llama 3.1
(RMSNorm, SwiGLU, RoPE, grouped-query attention with 2 key/value heads for 4 query heads, as 405B's 8 for 128;
untied embeddings) and ``weights/model.safetensors`` its seeded initial weights. It is an untrained model:
evaluated as it is, its log perplexity is about ln(1026) = 6.93, above the target (the "no training"
baseline). Not NeMo's distributed-checkpoint format, which needs NeMo to write and read.
"""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.benchmarks.llama31_405b import tokenizer

HIDDEN = 64
"""Model width (405B: 16,384)."""
LAYERS = 2
"""Transformer blocks (405B: 126)."""
HEADS = 4
"""Attention heads (405B: 128)."""
KV_HEADS = 2
"""Key/value heads of grouped-query attention (405B: 8)."""
MAX_POSITIONS = 8192
"""Context length the model is built for (405B: 8192); the tiny runs train on shorter sequences."""


def config():
    """The tiny model's ``LlamaConfig``."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=tokenizer.SYMBOLS + 2,
        hidden_size=HIDDEN,
        intermediate_size=HIDDEN * 11 // 4,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        rope_theta=500000.0,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.SYMBOLS,
        eos_token_id=tokenizer.SYMBOLS + 1,
    )


def load(folder: Path):
    """The model of a checkpoint folder (``context/`` config, ``weights/`` tensors), weights only."""
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig.from_pretrained(folder / "context"))
    missing, unexpected = model.load_state_dict(load_file(str(folder / "weights" / "model.safetensors")), strict=False)
    if unexpected or [name for name in missing if "rotary" not in name]:
        raise ValueError(f"{folder}/weights/model.safetensors: does not match context/config.json (missing {missing}, unexpected {unexpected})")
    return model


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write ``context/config.json`` and ``weights/model.safetensors`` of the seeded initial model."""
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(config())
    (out_dir / "context").mkdir(parents=True, exist_ok=True)
    (out_dir / "weights").mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(out_dir / "context")
    save_file({name: tensor.contiguous() for name, tensor in model.state_dict().items()}, str(out_dir / "weights" / "model.safetensors"))
    (out_dir / "README.md").write_text(
        f"Tiny stand-in of the Llama 3.1 405B starting checkpoint (mlperf-workflow tiny tier, seed {seed}): an untrained\n"
        f"{LAYERS}-layer Llama of width {HIDDEN}; context/ holds its configuration, weights/ its tensors.\n"
    )
    return sorted(p for p in out_dir.rglob("*") if p.is_file())
