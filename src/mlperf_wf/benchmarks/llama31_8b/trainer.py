"""Tiny-scale llama31_8b trainer: a 2-layer Llama pretrained on the Megatron-format C4 stand-in
(the shared loop of ``language_models.causal_trainer``)."""

from __future__ import annotations

import torch

from mlperf_wf.benchmarks.llama31_8b.hyperparameters import Hyperparameters
from mlperf_wf.language_models import c4_corpus, causal_trainer
from mlperf_wf.run.harness import TinyRun


def build_model(vocabulary: int, hp: Hyperparameters) -> torch.nn.Module:
    """A Llama 3.1-shaped model (RMSNorm, SwiGLU, RoPE, untied embeddings) at tiny width."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocabulary,
        hidden_size=hp.hidden_size,
        intermediate_size=hp.hidden_size * 11 // 4,
        num_hidden_layers=hp.layers,
        num_attention_heads=hp.heads,
        num_key_value_heads=hp.heads,
        max_position_embeddings=hp.sequence_length,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config)


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Run to the target (or max_steps); the harness logs the preamble and hyperparameters."""
    from transformers import AutoTokenizer

    torch.manual_seed(run.spec.seed)
    model = build_model(len(AutoTokenizer.from_pretrained(run.spec.input("tokenizer"))), hp)
    run.config_unsharded(model)  # fp32, one process
    return causal_trainer.train(run, hp, model, c4_corpus.corpus(run.spec.data_dir))
