"""Tiny-scale llama2_70b_lora trainer: a small Llama with a rank-16 LoRA on CPU.

It follows the reference (training:llama2_70b_lora/scripts/train.py): LoRA
r=16, alpha=32, dropout 0.1 on the attention projections, AdamW with cosine
decay, gradient clipping, evaluation every ``eval_every_samples`` on the whole
validation split, stop at the quality target read from the mlperf-logging
compliance rules. Every mllog value below is the value the loop uses.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import torch
from mlperf_logging.mllog import constants

from mlperf_wf.benchmarks.llama2_70b_lora.hyperparameters import Hyperparameters
from mlperf_wf.run.harness import TinyRun


def _load_split(path: Path) -> list[tuple[list[int], list[int]]]:
    frame = pd.read_parquet(path, columns=["input_ids", "labels"])
    return [(list(map(int, ids)), list(map(int, labels))) for ids, labels in zip(frame["input_ids"], frame["labels"], strict=True)]


def _batch(rows: list[tuple[list[int], list[int]]], pad_id: int, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (ids, lab) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        labels[i, : len(lab)] = torch.tensor(lab)
        attention[i, : len(ids)] = 1
    return input_ids.to(device), labels.to(device), attention.to(device)


def evaluate(model: torch.nn.Module, rows: list[tuple[list[int], list[int]]], pad_id: int, batch_size: int = 64, device: torch.device | None = None) -> float:
    """Mean cross-entropy per summary token over the whole validation split."""
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            input_ids, labels, attention = _batch(rows[start : start + batch_size], pad_id, device)
            logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
            targets = labels[:, 1:]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100, reduction="sum")
            total += loss.item()
            count += int((targets != -100).sum())
    model.train()
    return total / count


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Run to the target (or max_steps); the harness logs the preamble and hyperparameters."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

    checkpoint = run.spec.input("checkpoint")
    rank, world_size = run.rank, run.world_size
    micro, accumulation = hp.layout(world_size)
    torch.manual_seed(run.spec.seed)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(checkpoint)
    base = LlamaForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    lora = LoraConfig(
        r=hp.lora_rank,
        lora_alpha=hp.lora_alpha,
        lora_dropout=hp.lora_dropout,
        target_modules=hp.lora_target_modules.split(","),
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, lora).to(run.device)
    model.train()
    if world_size > 1:
        # DDP starts every rank from rank 0's adapter weights; dropout then differs per rank.
        model = torch.nn.parallel.DistributedDataParallel(model)
        torch.manual_seed(run.spec.seed * 1000 + rank)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=hp.learning_rate, weight_decay=hp.weight_decay)
    warmup_steps = int(hp.warmup_ratio * hp.max_steps)

    def lr_factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, hp.max_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    generator = torch.Generator().manual_seed(run.spec.seed)
    # Every process holds the whole model (pure data parallelism): no tensor/pipeline/context/expert sharding.
    run.config_unsharded(model)
    run.begin()

    # The rules start the clock before the dataset is touched, so reading it is timed.
    train_rows = _load_split(run.spec.data_dir / "train-00000-of-00001.parquet")
    eval_rows = _load_split(run.spec.data_dir / "validation-00000-of-00001.parquet")
    run.event(constants.TRAIN_SAMPLES, len(train_rows))
    run.event(constants.EVAL_SAMPLES, len(eval_rows))
    run.event(constants.MAX_SEQUENCE_LENGTH, max(len(ids) for ids, _ in train_rows))
    samples = 0
    next_eval = hp.eval_every_samples
    order = torch.randperm(len(train_rows), generator=generator).tolist()
    cursor = 0
    status = constants.ABORTED
    eval_loss = float("nan")
    history = []
    run.block_start(samples_count=0)
    for _step in range(hp.max_steps):
        for _ in range(accumulation):
            if cursor + micro * world_size > len(order):
                order = torch.randperm(len(train_rows), generator=generator).tolist()
                cursor = 0
            # Every rank draws the same order; each takes its own slice of the global batch.
            mine = order[cursor + rank * micro : cursor + (rank + 1) * micro]
            rows = [train_rows[i] for i in mine]
            cursor += micro * world_size
            input_ids, labels, attention = _batch(rows, tokenizer.pad_token_id, run.device)
            loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss / accumulation
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, hp.max_grad_norm)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        samples += hp.global_batch_size
        if samples >= next_eval:
            next_eval += hp.eval_every_samples
            run.block_stop(samples_count=samples)
            run.eval_start(samples_count=samples)
            eval_loss = evaluate(model, eval_rows, tokenizer.pad_token_id, device=run.device)
            run.eval_result(eval_loss, samples_count=samples)
            history.append({"samples": samples, "eval_loss": eval_loss})
            if eval_loss <= run.spec.target:
                status = constants.SUCCESS
                break
            run.block_start(samples_count=samples)
    run.finish(status, samples_count=samples)
    return {"status": status, "samples": samples, "eval_loss": eval_loss, "seconds": run.seconds, "history": history}
