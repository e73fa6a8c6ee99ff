"""Tiny-scale deepseekv3_671b trainer: the tiny DeepSeek-V3 checkpoint in the published Megatron-Bridge layout,
restored weights-only at iteration 0 as the reference restores its 671B one, continues pretraining on the
Megatron-format C4 stand-in with the sequence-wise load-balancing loss added to the cross-entropy (the shared loop
of ``language_models.causal_trainer``)."""

from __future__ import annotations

import torch

from mlperf_wf.benchmarks.deepseekv3_671b import converted_checkpoint, load_balancing
from mlperf_wf.benchmarks.deepseekv3_671b.hyperparameters import Hyperparameters
from mlperf_wf.errors import UserError
from mlperf_wf.language_models import causal_trainer
from mlperf_wf.language_models.c4_corpus import corpus
from mlperf_wf.run.harness import TinyRun


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Run to the target (or max_steps); the harness logs the preamble and hyperparameters."""
    from transformers import AutoTokenizer

    torch.manual_seed(run.spec.seed)
    model = converted_checkpoint.load(run.spec.input("checkpoint"))
    vocabulary = len(AutoTokenizer.from_pretrained(run.spec.input("tokenizer")))
    if model.config.vocab_size != vocabulary:
        run_config = f"{run.spec.input('checkpoint')}/{converted_checkpoint.ITERATION_FOLDER}/{converted_checkpoint.RUN_CONFIG}"
        raise UserError(f"{run_config}: vocab_size {model.config.vocab_size}; allowed: {vocabulary} (the tokenizer's tokens)")
    run.config_unsharded(model)  # fp32, one process
    run.config({"target_accuracy": run.spec.target})
    loss = load_balancing.training_loss_with_balance(hp.moe_aux_loss_coeff)
    return causal_trainer.train(run, hp, model, corpus(run.spec.data_dir), training_loss=loss)
