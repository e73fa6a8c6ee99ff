"""The tiny policy: a two-layer Qwen3.5-MoE (transformers' ``Qwen3_5MoeForCausalLM``) and its sampling.

The architecture is the reference model's family at toy size: one Gated-DeltaNet linear-attention layer and
one gated full-attention layer (Qwen3.5-397B-A17B alternates three linear to one full over 60 layers), a
routed mixture of experts with a shared expert in each layer. transformers runs the linear attention with
its PyTorch reference kernels here (no flash-linear-attention on CPU); their chunked algorithm is exact for
any chunk size, and the 64-token default chunk pads these 10-token sequences six-fold, so the forward passes
``chunk_size=LINEAR_ATTENTION_CHUNK``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from mlperf_wf.benchmarks.qwen35_397b_grpo.arithmetic import ANSWER_DIGITS, BOS, VOCABULARY

LINEAR_ATTENTION_CHUNK = 8
"""Chunk length of the linear-attention kernel (exact at any length; 8 covers a 10-token sequence in 2 chunks)."""


def model_config():
    """The tiny Qwen3.5-MoE text configuration."""
    from transformers import Qwen3_5MoeTextConfig

    config = Qwen3_5MoeTextConfig(
        vocab_size=len(VOCABULARY),
        hidden_size=64,
        num_hidden_layers=2,
        layer_types=["linear_attention", "full_attention"],
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=64,
        shared_expert_intermediate_size=64,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        bos_token_id=VOCABULARY.index(BOS),
        pad_token_id=VOCABULARY.index(BOS),
    )
    config._attn_implementation = "eager"
    return config


def build_tokenizer():
    """A character-level tokenizer over the 13-token vocabulary (the ``tokenizers`` library, saved with the checkpoint)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel({token: i for i, token in enumerate(VOCABULARY)}, unk_token=BOS))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex("<s>|."), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=BOS, pad_token=BOS, unk_token=BOS)


def load(checkpoint: Path):
    """(model, tokenizer) from a Hugging Face checkpoint folder, in float32."""
    from transformers import PreTrainedTokenizerFast, Qwen3_5MoeForCausalLM

    model = Qwen3_5MoeForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, attn_implementation="eager")
    return model, PreTrainedTokenizerFast.from_pretrained(checkpoint)


def encode_prompts(tokenizer, prompts: list[str]) -> torch.Tensor:
    """BOS + prompt tokens, one row per prompt (every prompt has the same length)."""
    rows = [[tokenizer.bos_token_id, *tokenizer(prompt, add_special_tokens=False).input_ids] for prompt in prompts]
    if len({len(row) for row in rows}) != 1:
        raise ValueError(f"tiny prompts must share one length; got {sorted({len(r) for r in rows})}")
    return torch.tensor(rows, dtype=torch.long)


def logits(model, input_ids: torch.Tensor) -> torch.Tensor:
    """Next-token logits at every position."""
    return model(input_ids=input_ids, chunk_size=LINEAR_ATTENTION_CHUNK).logits


def _filter_top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filtering: keep the smallest set of tokens whose probability reaches ``top_p`` (renormalised)."""
    if top_p >= 1.0:
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs
    sorted_probs = torch.where(before < top_p, sorted_probs, torch.zeros_like(sorted_probs))
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return kept / kept.sum(dim=-1, keepdim=True)


@torch.no_grad()
def sample(model, prompt_ids: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator) -> torch.Tensor:
    """``ANSWER_DIGITS`` completion tokens per row, sampled at ``temperature`` with nucleus ``top_p``."""
    sequence = prompt_ids
    for _ in range(ANSWER_DIGITS):
        probs = torch.softmax(logits(model, sequence)[:, -1].float() / temperature, dim=-1)
        probs = _filter_top_p(probs, top_p)
        token = torch.multinomial(probs, 1, generator=generator)
        sequence = torch.cat([sequence, token], dim=1)
    return sequence[:, prompt_ids.size(1) :]


def completion_logprobs(model, prompt_ids: torch.Tensor, completion_ids: torch.Tensor) -> torch.Tensor:
    """Log-probability of each completion token under ``model`` at temperature 1 (rows x ANSWER_DIGITS)."""
    sequence = torch.cat([prompt_ids, completion_ids], dim=1)
    scores = logits(model, sequence[:, :-1])[:, prompt_ids.size(1) - 1 :]
    return torch.log_softmax(scores.float(), dim=-1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)


def decode(tokenizer, completion_ids: torch.Tensor) -> list[str]:
    """Completion texts (tokens joined without spaces)."""
    return ["".join(tokenizer.convert_ids_to_tokens(row.tolist())) for row in completion_ids]


def pass_at_k(
    model, tokenizer, prompts: list[str], verifiers: list[Callable[[str], float]], k: int, temperature: float, top_p: float, generator: torch.Generator
) -> float:
    """Grouped pass@k: the share of tasks with a positive reward among ``k`` sampled completions (``verifiers[i]`` scores task i)."""
    was_training = model.training
    model.eval()
    prompt_ids = encode_prompts(tokenizer, prompts).repeat_interleave(k, dim=0)
    completions = decode(tokenizer, sample(model, prompt_ids, temperature, top_p, generator))
    solved = [any(verify(completions[i * k + j]) > 0 for j in range(k)) for i, verify in enumerate(verifiers)]
    model.train(was_training)
    return sum(solved) / len(solved)
