"""Tiny-scale llama31_405b trainer: the tiny Llama checkpoint, restored weights-only as the reference restores
Meta's 405B (``--use_ckpt --resume_from_hf``), continues pretraining on the blend of the two read C4 partitions
(the shared loop of ``language_models.causal_trainer``)."""

from __future__ import annotations

import torch

from mlperf_wf.benchmarks.llama31_405b import c4_corpus, checkpoint
from mlperf_wf.benchmarks.llama31_405b.hyperparameters import Hyperparameters
from mlperf_wf.language_models import causal_trainer
from mlperf_wf.run.harness import TinyRun


def corpus(data_dir) -> causal_trainer.Corpus:
    """The prepared files the run reads: en_6 and en_7 for training, the 91,205-sample validation file."""
    return causal_trainer.Corpus(tuple(str(data_dir / prefix) for prefix in c4_corpus.READ_TRAIN_PREFIXES), str(data_dir / c4_corpus.VALIDATION_PREFIX))


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Run to the target (or max_steps); the harness logs the preamble and hyperparameters."""
    from transformers import AutoTokenizer

    torch.manual_seed(run.spec.seed)
    model = checkpoint.load(run.spec.input("checkpoint"))
    vocabulary = len(AutoTokenizer.from_pretrained(run.spec.input("tokenizer")))
    if model.config.vocab_size != vocabulary:
        raise ValueError(f"{run.spec.input('checkpoint')}: vocab_size {model.config.vocab_size}, the tokenizer has {vocabulary} tokens")
    run.config_unsharded(model)  # fp32, one process
    return causal_trainer.train(run, hp, model, corpus(run.spec.data_dir))
