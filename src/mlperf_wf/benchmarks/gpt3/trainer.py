"""Tiny-scale gpt3 trainer: a 2-layer GPT-2-family model resumed from its starting checkpoint and trained
on the Megatron-format C4 stand-in to the real target (the shared loop of ``language_models.causal_trainer``)."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from mlperf_wf.benchmarks.gpt3 import c4_corpus, starting_checkpoint, tokenizer
from mlperf_wf.benchmarks.gpt3.hyperparameters import Hyperparameters
from mlperf_wf.errors import UserError
from mlperf_wf.language_models import causal_trainer
from mlperf_wf.run.harness import TinyRun


class TokenProgress(causal_trainer.SamplesProgress):
    """gpt3's progress unit: tokens trained since the checkpoint, logged as ``epoch_num`` (training.py:723-725,
    919-924, 936-937 at aa344c7: ``(consumed_train_samples - ext_lr_steps) * seq_length``)."""

    def __init__(self, samples_at_start: int, sequence_length: int, block_samples: int) -> None:
        self.samples_at_start = samples_at_start
        self.sequence_length = sequence_length
        self.block_samples = block_samples

    def tokens(self, samples: int) -> int:
        return (samples - self.samples_at_start) * self.sequence_length

    def block_start(self, samples: int) -> dict[str, object]:
        return {"first_epoch_num": self.tokens(samples), "epoch_count": self.block_samples * self.sequence_length}

    def block_stop(self, samples: int) -> dict[str, object]:
        return {"first_epoch_num": self.tokens(samples - self.block_samples), "epoch_count": self.block_samples * self.sequence_length}

    def at(self, samples: int) -> dict[str, object]:
        return {"epoch_num": self.tokens(samples)}


def load_checkpoint(folder: Path, hp: Hyperparameters) -> tuple[torch.nn.Module, int]:
    """The starting model and the samples it has consumed; refuses one whose step or shape the run would misreport."""
    state = starting_checkpoint.read_state(folder)
    step = math.ceil(state["consumed_samples"] / hp.global_batch_size)
    if step != hp.init_checkpoint_step:
        raise UserError(
            f"{folder / starting_checkpoint.STATE_FILE}: consumed_samples {state['consumed_samples']} is step {step} at global_batch_size "
            f"{hp.global_batch_size}, but init_checkpoint_step is {hp.init_checkpoint_step}; allowed: the checkpoint's own step"
        )
    model = starting_checkpoint.load_model(folder)
    if model.config.n_positions < hp.sequence_length:
        raise UserError(f"{folder}/config.json: n_positions {model.config.n_positions} < sequence_length {hp.sequence_length}")
    return model, state["consumed_samples"]


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Resume the checkpoint and run to the target (or max_steps); the harness logs the preamble and hyperparameters."""
    torch.manual_seed(run.spec.seed)
    vocab = tokenizer.load(run.spec.input("tokenizer"))
    checkpoint = run.spec.data_dir / starting_checkpoint.FOLDER  # the checkpoint shard unpacked its tarball there
    model, samples_at_start = load_checkpoint(checkpoint, hp)
    if model.config.vocab_size != tokenizer.padded_vocabulary_size(len(vocab)):
        raise UserError(
            f"{checkpoint}/config.json: vocab_size {model.config.vocab_size}; allowed: "
            f"{tokenizer.padded_vocabulary_size(len(vocab))} (the tokenizer's {len(vocab)} entries padded as Megatron pads them)"
        )
    run.config({f"lowest_numerical_precision_in_{part}": "fp32" for part in ("linear", "attn", "comm")})
    run.config({f"{kind}_parallelism": 1 for kind in ("tensor", "pipeline")})
    corpus = causal_trainer.Corpus(
        tuple(str(run.spec.data_dir / prefix) for prefix in c4_corpus.TRAIN_PREFIXES), str(run.spec.data_dir / c4_corpus.VALIDATION_PREFIX)
    )
    progress = TokenProgress(samples_at_start, hp.sequence_length, hp.eval_every_samples)
    return causal_trainer.train(run, hp, model, corpus, samples_at_start=samples_at_start, progress=progress)
