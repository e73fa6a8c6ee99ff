"""Tiny-scale llama2_70b_lora trainer: a small Llama with a rank-16 LoRA on CPU.

It follows the reference (training:llama2_70b_lora/scripts/train.py): LoRA
r=16, alpha=32, dropout 0.1 on the attention projections, AdamW with cosine
decay, gradient clipping, evaluation every ``eval_every_samples`` on the whole
validation split, stop at the quality target read from the mlperf-logging
compliance rules. Every mllog value below is the value the loop uses.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from mlperf_logging.mllog import constants

from mlperf_wf.mllog_utils import RunLogger, clear_caches, rank_from_env
from mlperf_wf.trainers.common import RunSpec


@dataclass(frozen=True)
class Hyperparameters:
    """Tiny-tier hyperparameters (``tiny:`` in the benchmark definition)."""

    global_batch_size: int = 16
    """Sequences per optimizer step."""
    micro_batch_size: int = 16
    """Sequences per forward pass and process (capped at global / processes); accumulation = global / (micro x processes)."""
    learning_rate: float = 4e-3
    """Peak AdamW learning rate."""
    weight_decay: float = 1e-4
    """AdamW weight decay (reference 1e-4)."""
    max_grad_norm: float = 0.3
    """Gradient clipping norm (reference 0.3)."""
    warmup_ratio: float = 0.0
    """Linear warm-up as a fraction of max_steps (reference 0)."""
    max_steps: int = 1024
    """Cosine schedule length and step budget (reference 1024)."""
    lora_rank: int = 16
    """LoRA rank; the closed rules require 16."""
    lora_alpha: int = 32
    """LoRA alpha (reference 32)."""
    lora_dropout: float = 0.1
    """LoRA dropout (reference 0.1)."""
    lora_target_modules: str = "q_proj,k_proj,v_proj,o_proj"
    """Comma-separated modules that get adapters (the reference's fused qkv_proj,o_proj)."""
    eval_every_samples: int = 160
    """Evaluate after this many training samples."""
    threads: int = 1
    """CPU threads for torch."""

    def layout(self, world_size: int) -> tuple[int, int]:
        """(micro batch per process, gradient accumulation steps) for ``world_size`` processes."""
        micro = min(self.micro_batch_size, self.global_batch_size // world_size)
        if micro < 1 or self.global_batch_size % (micro * world_size):
            raise ValueError(f"global_batch_size {self.global_batch_size} does not split over {world_size} processes of micro batch {micro}")
        return micro, self.global_batch_size // (micro * world_size)


def _load_split(path: Path) -> list[tuple[list[int], list[int]]]:
    frame = pd.read_parquet(path, columns=["input_ids", "labels"])
    return [(list(map(int, ids)), list(map(int, labels))) for ids, labels in zip(frame["input_ids"], frame["labels"], strict=True)]


def _batch(rows: list[tuple[list[int], list[int]]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (ids, lab) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        labels[i, : len(lab)] = torch.tensor(lab)
        attention[i, : len(ids)] = 1
    return input_ids, labels, attention


def evaluate(model: torch.nn.Module, rows: list[tuple[list[int], list[int]]], pad_id: int, batch_size: int = 64) -> float:
    """Mean cross-entropy per summary token over the whole validation split."""
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            input_ids, labels, attention = _batch(rows[start : start + batch_size], pad_id)
            logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
            targets = labels[:, 1:]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100, reduction="sum")
            total += loss.item()
            count += int((targets != -100).sum())
    model.train()
    return total / count


def train(spec: RunSpec, hp: Hyperparameters) -> dict:
    """Run to the target (or max_steps) and log the MLPerf events; return a summary."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

    if spec.checkpoint_dir is None:
        raise ValueError("llama2_70b_lora fine-tunes a checkpoint: the run needs --checkpoint")
    torch.set_num_threads(hp.threads)
    rank = rank_from_env()
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1:
        # Data parallel over CPU processes (torchrun): gloo all-reduces the LoRA gradients.
        torch.distributed.init_process_group("gloo")
    micro, accumulation = hp.layout(world_size)
    log = RunLogger(spec.result_file, rank=rank)
    log.event(constants.CACHE_CLEAR, clear_caches() if rank == 0 else False)
    log.start(constants.INIT_START)
    log.submission(constants.LLAMA2_70B_LORA, spec.submission)

    torch.manual_seed(spec.seed)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(spec.checkpoint_dir)
    base = LlamaForCausalLM.from_pretrained(spec.checkpoint_dir, dtype=torch.float32)
    lora = LoraConfig(
        r=hp.lora_rank,
        lora_alpha=hp.lora_alpha,
        lora_dropout=hp.lora_dropout,
        target_modules=hp.lora_target_modules.split(","),
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, lora)
    model.train()
    if world_size > 1:
        # DDP starts every rank from rank 0's adapter weights; dropout then differs per rank.
        model = torch.nn.parallel.DistributedDataParallel(model)
        torch.manual_seed(spec.seed * 1000 + rank)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=hp.learning_rate, weight_decay=hp.weight_decay)
    warmup_steps = int(hp.warmup_ratio * hp.max_steps)

    def lr_factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, hp.max_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    generator = torch.Generator().manual_seed(spec.seed)
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    precision = {"float32": "fp32", "bfloat16": "bfloat16", "float16": "fp16"}[dtype]

    log.event(constants.SEED, spec.seed)
    log.event(constants.GLOBAL_BATCH_SIZE, hp.global_batch_size)
    log.event("micro_batch_size", micro)
    log.event(constants.GRADIENT_ACCUMULATION_STEPS, accumulation)
    log.event(constants.OPT_NAME, "adamw")
    log.event(constants.OPT_BASE_LR, hp.learning_rate)
    log.event(constants.OPT_LR_WARMUP_FACTOR, hp.warmup_ratio)
    log.event(constants.OPT_LR_TRAINING_STEPS, hp.max_steps)
    log.event(constants.OPT_ADAMW_WEIGHT_DECAY, hp.weight_decay)
    log.event(constants.OPT_GRADIENT_CLIP_NORM, hp.max_grad_norm)
    log.event(constants.LORA_ALPHA, hp.lora_alpha)
    log.event("lora_rank", hp.lora_rank)
    log.event("lora_dropout", hp.lora_dropout)
    for key in ("lowest_numerical_precision_in_linear", "lowest_numerical_precision_in_attn", "lowest_numerical_precision_in_comm"):
        log.event(key, precision)
    # Every process holds the whole model (pure data parallelism): no tensor/pipeline/context/expert sharding.
    for key in ("tensor_parallelism", "pipeline_parallelism", "context_parallelism", "expert_parallelism"):
        log.event(key, 1)
    log.event("config_filename", spec.config_filename)
    log.end(constants.INIT_STOP)

    started = time.time()
    log.start(constants.RUN_START)
    # The rules start the clock before the dataset is touched, so reading it is timed.
    train_rows = _load_split(spec.data_dir / "train-00000-of-00001.parquet")
    eval_rows = _load_split(spec.data_dir / "validation-00000-of-00001.parquet")
    log.event(constants.TRAIN_SAMPLES, len(train_rows))
    log.event(constants.EVAL_SAMPLES, len(eval_rows))
    log.event(constants.MAX_SEQUENCE_LENGTH, max(len(ids) for ids, _ in train_rows))
    samples = 0
    next_eval = hp.eval_every_samples
    order = torch.randperm(len(train_rows), generator=generator).tolist()
    cursor = 0
    status = constants.ABORTED
    eval_loss = float("nan")
    history = []
    log.start(constants.BLOCK_START, metadata={constants.SAMPLES_COUNT: 0})
    for _step in range(hp.max_steps):
        for _ in range(accumulation):
            if cursor + micro * world_size > len(order):
                order = torch.randperm(len(train_rows), generator=generator).tolist()
                cursor = 0
            # Every rank draws the same order; each takes its own slice of the global batch.
            mine = order[cursor + rank * micro : cursor + (rank + 1) * micro]
            rows = [train_rows[i] for i in mine]
            cursor += micro * world_size
            input_ids, labels, attention = _batch(rows, tokenizer.pad_token_id)
            loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss / accumulation
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, hp.max_grad_norm)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        samples += hp.global_batch_size
        if samples >= next_eval:
            next_eval += hp.eval_every_samples
            log.end(constants.BLOCK_STOP, metadata={constants.SAMPLES_COUNT: samples})
            log.start(constants.EVAL_START, metadata={constants.SAMPLES_COUNT: samples})
            eval_loss = evaluate(model, eval_rows, tokenizer.pad_token_id)
            log.event(constants.EVAL_ACCURACY, eval_loss, metadata={constants.SAMPLES_COUNT: samples})
            log.end(constants.EVAL_STOP, metadata={constants.SAMPLES_COUNT: samples})
            history.append({"samples": samples, "eval_loss": eval_loss})
            if eval_loss <= spec.target:
                status = constants.SUCCESS
                break
            log.start(constants.BLOCK_START, metadata={constants.SAMPLES_COUNT: samples})
    log.end(constants.RUN_STOP, metadata={constants.SAMPLES_COUNT: samples, constants.STATUS: status})
    if world_size > 1:
        torch.distributed.destroy_process_group()
    return {
        "status": status,
        "samples": samples,
        "eval_loss": eval_loss,
        "seconds": round(time.time() - started, 3),
        "history": history,
    }
