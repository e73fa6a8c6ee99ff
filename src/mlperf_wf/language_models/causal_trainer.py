"""The causal-LM tiny trainer the pretraining benchmarks share (llama31_8b, llama31_405b, gpt3, and the
mixture-of-experts gpt_oss_20b and deepseekv3_671b through ``training_loss``).

A benchmark's trainer builds its model (transformers' Llama or GPT class, fresh or from its starting
checkpoint) and names its corpus files; this loop reads the prepared Megatron ``.bin``/``.idx`` pairs with
megatron-core's ``IndexedDataset`` (the reader the references' GPTDataset uses), cuts the token stream into
``sequence_length + 1`` windows in a seeded order, trains with AdamW under linear warm-up then cosine decay,
and evaluates the mean cross-entropy in nats (the log perplexity the references log as eval_accuracy) on the
first ``eval_sequences`` validation windows every ``eval_every_samples`` training sequences, until the
target is met or ``max_steps`` is spent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from mlperf_logging.mllog import constants

from mlperf_wf.language_models.causal_hyperparameters import CausalLMHyperparameters
from mlperf_wf.language_models.markov_corpus import windows
from mlperf_wf.run.harness import TinyRun


class SamplesProgress:
    """The progress metadata of the block/eval/run_stop events: ``samples_count`` (most LLM rounds)."""

    def block_start(self, samples: int) -> dict[str, object]:
        """Metadata of ``block_start`` of the block that starts after ``samples`` sequences."""
        return {"samples_count": samples}

    def block_stop(self, samples: int) -> dict[str, object]:
        """Metadata of ``block_stop`` of the block that ends after ``samples`` sequences."""
        return {"samples_count": samples}

    def at(self, samples: int) -> dict[str, object]:
        """Metadata of ``eval_start``/``eval_accuracy``/``eval_stop``/``run_stop`` after ``samples`` sequences."""
        return {"samples_count": samples}


@dataclass(frozen=True)
class Corpus:
    """The prepared indexed datasets a run reads (path prefixes without ``.bin``/``.idx``; several training
    prefixes are a blend of equal weights, read one after the other, as gpt3's two C4 shards)."""

    train_prefixes: tuple[str, ...]
    validation_prefix: str


def shifted_cross_entropy(logits: torch.Tensor, batch: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy (nats) of the model's ``logits`` for ``batch[:, :-1]`` against each window's tokens 1.."""
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1), reduction=reduction)


def next_token_loss(model: torch.nn.Module, batch: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy (nats) of predicting each window's tokens 1.. from the tokens before them."""
    return shifted_cross_entropy(model(input_ids=batch[:, :-1]).logits, batch, reduction)


TrainingLoss = Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]
"""What a training step minimises on a batch of windows: ``next_token_loss``, or for a mixture-of-experts
model that plus its router's auxiliary loss times the coefficient the run logs. Evaluation is always the
plain ``next_token_loss`` (the log perplexity the target is on)."""


def log_perplexity(model: torch.nn.Module, batch: torch.Tensor) -> float:
    """Mean cross-entropy per predicted token, in nats."""
    model.eval()
    total = 0.0
    with torch.no_grad():
        for start in range(0, len(batch), 64):
            total += next_token_loss(model, batch[start : start + 64], reduction="sum").item()
    model.train()
    return total / (len(batch) * (batch.size(1) - 1))


def optimizer_for(model: torch.nn.Module, hp: CausalLMHyperparameters) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW with the hyperparameters' constants and its warm-up + cosine schedule."""
    betas = (hp.adam_beta1, hp.adam_beta2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=hp.learning_rate, betas=betas, eps=hp.adam_epsilon, weight_decay=hp.weight_decay)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, hp.learning_rate_factor)


def optimizer_step(
    model: torch.nn.Module,
    batch: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    clip_norm: float,
    schedule: torch.optim.lr_scheduler.LRScheduler | None = None,
    training_loss: TrainingLoss = next_token_loss,
) -> torch.Tensor:
    """One step on ``batch``: loss, backward, gradient clipping, optimizer (and schedule) step; the loss."""
    loss = training_loss(model, batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    if schedule is not None:
        schedule.step()
    optimizer.zero_grad()
    return loss.detach()


def train(
    run: TinyRun,
    hp: CausalLMHyperparameters,
    model: torch.nn.Module,
    corpus: Corpus,
    samples_at_start: int = 0,
    progress: SamplesProgress | None = None,
    training_loss: TrainingLoss = next_token_loss,
) -> dict:
    """Run to the target (or max_steps); the harness has logged the preamble and the hyperparameters.

    ``samples_at_start``: training sequences already seen by a starting checkpoint (the sample counts the log
    reports continue from there, as a resumed reference run's do). ``progress``: how the events name the
    progress (default ``samples_count``; gpt3's round asks for ``epoch_num``). ``training_loss``: what each step
    minimises (see ``TrainingLoss``)."""
    progress = progress or SamplesProgress()
    if run.world_size > 1:
        raise ValueError(f"the tiny {run.spec.benchmark} trainer runs one process (tiny_processes: 1)")
    model.to(run.device)
    optimizer, schedule = optimizer_for(model, hp)
    run.begin()

    train_windows = torch.cat([windows(prefix, hp.sequence_length) for prefix in corpus.train_prefixes]).to(run.device)
    eval_windows = windows(corpus.validation_prefix, hp.sequence_length)[: hp.eval_sequences].to(run.device)
    if len(eval_windows) < hp.eval_sequences:
        raise ValueError(f"{corpus.validation_prefix}: {len(eval_windows)} validation windows of {hp.sequence_length}, eval_sequences is {hp.eval_sequences}")
    order = torch.randperm(len(train_windows), generator=torch.Generator().manual_seed(run.spec.seed))
    run.event(constants.TRAIN_SAMPLES, len(train_windows))
    run.event(constants.EVAL_SAMPLES, len(eval_windows))
    samples, status, value, history = samples_at_start, constants.ABORTED, float("nan"), []
    next_eval = samples_at_start + max(hp.eval_every_samples, hp.first_eval_samples)
    run.block_start(**progress.block_start(samples))
    for step in range(hp.max_steps):
        start = (step * hp.global_batch_size) % (len(order) - hp.global_batch_size)
        optimizer_step(model, train_windows[order[start : start + hp.global_batch_size]], optimizer, hp.gradient_clip_norm, schedule, training_loss)
        samples += hp.global_batch_size
        if samples >= next_eval:
            next_eval += hp.eval_every_samples
            run.block_stop(**progress.block_stop(samples))
            run.eval_start(**progress.at(samples))
            value = log_perplexity(model, eval_windows)
            run.eval_result(value, **progress.at(samples))
            history.append({"samples": samples, "log_perplexity": value})
            if run.spec.reached(value):
                status = constants.SUCCESS
                break
            run.block_start(**progress.block_start(samples))
    run.finish(status, **progress.at(samples))
    return {"status": status, "samples": samples, "log_perplexity": value, "seconds": run.seconds, "history": history}
