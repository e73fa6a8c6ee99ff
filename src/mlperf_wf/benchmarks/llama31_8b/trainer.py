"""Tiny-scale llama31_8b trainer: a 2-layer Llama pretrained on the Megatron-format C4 stand-in.

Reads the prepared ``.bin``/``.idx`` pair with megatron-core's ``IndexedDataset`` (the reader the
reference's GPTDataset uses), concatenates documents into one token stream, cuts it into
``sequence_length + 1`` windows (the extra token is the last target, as GPTDataset's
``add_extra_token_to_sequence``) in a seeded order, and evaluates the mean cross-entropy in nats (the
log perplexity the reference logs as eval_accuracy) on the first ``eval_sequences`` validation windows.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from mlperf_logging.mllog import constants

from mlperf_wf.benchmarks.llama31_8b import c4_corpus
from mlperf_wf.benchmarks.llama31_8b.hyperparameters import Hyperparameters
from mlperf_wf.harness import TinyRun


def windows(prefix: str, length: int) -> torch.Tensor:
    """Every ``length + 1`` token window of the concatenated documents, in file order."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    data = IndexedDataset(prefix)
    stream = np.concatenate([data[i] for i in range(len(data))]).astype(np.int64)
    count = (len(stream) - 1) // length
    return torch.from_numpy(np.lib.stride_tricks.sliding_window_view(stream, length + 1)[::length][:count].copy())


def log_perplexity(model: torch.nn.Module, batch: torch.Tensor) -> float:
    """Mean cross-entropy per predicted token, in nats."""
    model.eval()
    total = 0.0
    with torch.no_grad():
        for start in range(0, len(batch), 64):
            part = batch[start : start + 64]
            logits = model(input_ids=part[:, :-1]).logits
            total += torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), part[:, 1:].reshape(-1), reduction="sum").item()
    model.train()
    return total / (len(batch) * (batch.size(1) - 1))


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Run to the target (or max_steps); the harness logs the preamble and hyperparameters."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    if run.world_size > 1:
        raise ValueError("the tiny llama31_8b trainer runs one process (tiny_processes: 1)")
    torch.manual_seed(run.spec.seed)
    vocabulary = len(AutoTokenizer.from_pretrained(run.spec.input("tokenizer")))
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
    model = LlamaForCausalLM(config)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=hp.learning_rate, betas=(hp.adam_beta1, hp.adam_beta2), eps=hp.adam_epsilon, weight_decay=hp.weight_decay
    )

    def lr_factor(step: int) -> float:
        if step < hp.warmup_steps:
            return (step + 1) / hp.warmup_steps
        progress = (step - hp.warmup_steps) / (hp.max_steps - hp.warmup_steps)
        floor = hp.end_learning_rate_fraction
        return floor + (1 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    run.config({f"lowest_numerical_precision_in_{part}": "fp32" for part in ("linear", "attn", "comm")})
    run.config({f"{kind}_parallelism": 1 for kind in ("tensor", "pipeline", "context", "expert")})
    run.begin()

    train_windows = windows(str(run.spec.data_dir / c4_corpus.TRAIN_PREFIX), hp.sequence_length)
    eval_windows = windows(str(run.spec.data_dir / c4_corpus.VALIDATION_PREFIX), hp.sequence_length)[: hp.eval_sequences]
    order = torch.randperm(len(train_windows), generator=torch.Generator().manual_seed(run.spec.seed))
    run.event(constants.TRAIN_SAMPLES, len(train_windows))
    run.event(constants.EVAL_SAMPLES, len(eval_windows))
    samples, next_eval, status, value, history = 0, hp.eval_every_samples, constants.ABORTED, float("nan"), []
    run.block_start(samples_count=0)
    for step in range(hp.max_steps):
        start = (step * hp.global_batch_size) % (len(order) - hp.global_batch_size)
        batch = train_windows[order[start : start + hp.global_batch_size]]
        logits = model(input_ids=batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), hp.gradient_clip_norm)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        samples += hp.global_batch_size
        if samples >= next_eval:
            next_eval += hp.eval_every_samples
            run.block_stop(samples_count=samples)
            run.eval_start(samples_count=samples)
            value = log_perplexity(model, eval_windows)
            run.eval_result(value, samples_count=samples)
            history.append({"samples": samples, "log_perplexity": value})
            if value <= run.spec.target:
                status = constants.SUCCESS
                break
            run.block_start(samples_count=samples)
    run.finish(status, samples_count=samples)
    return {"status": status, "samples": samples, "log_perplexity": value, "seconds": run.seconds, "history": history}
