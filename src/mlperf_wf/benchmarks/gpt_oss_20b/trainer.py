"""Tiny-scale gpt_oss_20b trainer: a 2-layer GPT-OSS mixture of experts (transformers' GptOssForCausalLM)
pretrained on the Megatron-format C4 stand-in that llama31_8b also reads (the shared loop of
``language_models.causal_trainer``)."""

from __future__ import annotations

import torch

from mlperf_wf.benchmarks.gpt_oss_20b.hyperparameters import Hyperparameters
from mlperf_wf.language_models import c4_corpus, causal_trainer
from mlperf_wf.run.harness import TinyRun


def build_model(vocabulary: int, hp: Hyperparameters) -> torch.nn.Module:
    """GPT-OSS at tiny width: grouped-query attention with sinks, sliding-window and full layers alternating
    (the first sliding, as the reference's window_attn_skip_freq), SwiGLU experts behind a softmax top-k router,
    plain RoPE with the reference's base, untied embeddings."""
    from transformers import GptOssConfig, GptOssForCausalLM

    config = GptOssConfig(
        vocab_size=vocabulary,
        hidden_size=hp.hidden_size,
        intermediate_size=hp.hidden_size,
        num_hidden_layers=hp.layers,
        num_attention_heads=hp.heads,
        num_key_value_heads=hp.kv_heads,
        head_dim=hp.head_dim,
        num_local_experts=hp.experts,
        num_experts_per_tok=hp.experts_per_token,
        sliding_window=hp.sliding_window,
        layer_types=["sliding_attention" if layer % 2 == 0 else "full_attention" for layer in range(hp.layers)],
        max_position_embeddings=hp.sequence_length,
        # The config's default is YaRN scaling from a 4096-token original context, which the reference's plain
        # `position_embedding_type: rope` does not use (and which warns at a 128-token context).
        rope_parameters={"rope_type": "default", "rope_theta": hp.rotary_base},
        initializer_range=hp.init_std,
        rms_norm_eps=hp.norm_epsilon,
        router_aux_loss_coef=hp.moe_aux_loss_coeff,
        output_router_logits=hp.moe_aux_loss_coeff > 0,
        tie_word_embeddings=False,
        attention_dropout=0.0,
        # GPT-OSS's attention sinks are implemented by the eager path (sdpa has no sink term).
        attn_implementation="eager",
    )
    return GptOssForCausalLM(config)


def training_loss(hp: Hyperparameters) -> causal_trainer.TrainingLoss:
    """What each step minimises: the next-token loss, plus the router's load-balancing loss times
    ``moe_aux_loss_coeff`` when it is not 0 (at 0, the reference's value, the router logits are not even returned)."""
    if hp.moe_aux_loss_coeff == 0:
        return causal_trainer.next_token_loss

    def loss_with_router_balance(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
        output = model(input_ids=batch[:, :-1], output_router_logits=True)
        return causal_trainer.shifted_cross_entropy(output.logits, batch) + hp.moe_aux_loss_coeff * output.aux_loss

    return loss_with_router_balance


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Run to the target (or max_steps); the harness logs the preamble and hyperparameters."""
    from transformers import AutoTokenizer

    torch.manual_seed(run.spec.seed)
    model = build_model(len(AutoTokenizer.from_pretrained(run.spec.input("tokenizer"))), hp)
    run.config_unsharded(model)  # fp32, one process
    return causal_trainer.train(run, hp, model, c4_corpus.corpus(run.spec.data_dir), training_loss=training_loss(hp))
