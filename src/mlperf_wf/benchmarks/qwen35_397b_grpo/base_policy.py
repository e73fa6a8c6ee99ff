"""Builds the tiny base policy that stands in for Qwen3.5-397B-A17B: a supervised warm-up to pass@4 ~0.4.

GRPO sharpens a capability the policy already has: a random policy almost never samples an exact answer, so
every group's rewards are equal and every advantage is zero. As at full scale, the RL run therefore starts
from a pretrained checkpoint. Here the tiny Qwen3.5-MoE is trained with next-token cross-entropy on the
answers of the ``train`` tasks and stopped as soon as its pass@4 on the ``probe`` tasks (sampled with the
validation settings the benchmark evaluates with) reaches ``STOP_PASS_AT_4``, leaving room for RL to reach
the 0.69 target. The result is a normal Hugging Face folder (``config.json``, ``model.safetensors``,
``tokenizer.json``), published into the tiny hub mirror and downloaded and verified like the real one.
"""

from __future__ import annotations

import json
import logging
import random
import time
from functools import partial
from pathlib import Path

import torch

from mlperf_wf.benchmarks.qwen35_397b_grpo import arithmetic, policy

log = logging.getLogger(__name__)

STOP_PASS_AT_4 = 0.40
"""The warm-up stops at the first probe with pass@4 at or above this."""
VALIDATION_TEMPERATURE, VALIDATION_TOP_P = 0.1, 0.95
"""The sampling the benchmark validates with (the 6.1.0 rules fix it); the probe uses the same."""


def warm_up(seed: int, batch_size: int = 64, lr: float = 3e-3, probe_every: int = 5, max_steps: int = 2000):
    """(model, tokenizer, record): the supervised warm-up, stopped at ``STOP_PASS_AT_4`` on the probe tasks."""
    from transformers import Qwen3_5MoeForCausalLM

    torch.manual_seed(seed)
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    tokenizer = policy.build_tokenizer()
    model = Qwen3_5MoeForCausalLM(policy.model_config())
    tasks = arithmetic.split()
    train, probe = tasks["train"], tasks["probe"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    started = time.time()
    probe_pass = 0.0
    step = 0
    for step in range(1, max_steps + 1):
        batch = [train[rng.randrange(len(train))] for _ in range(batch_size)]
        prompt_ids = policy.encode_prompts(tokenizer, [task.prompt for task in batch])
        answers = torch.tensor([tokenizer(task.answer, add_special_tokens=False).input_ids for task in batch])
        loss = -policy.completion_logprobs(model, prompt_ids, answers).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % probe_every == 0:
            probe_pass = policy.pass_at_k(
                model,
                tokenizer,
                [t.prompt for t in probe],
                [partial(arithmetic.reward, expected=t.answer) for t in probe],
                4,
                VALIDATION_TEMPERATURE,
                VALIDATION_TOP_P,
                generator,
            )
            log.info("warm-up step %d loss %.3f probe pass@4 %.3f (%.1f s)", step, loss.item(), probe_pass, time.time() - started)
            if probe_pass >= STOP_PASS_AT_4:
                break
    else:
        raise RuntimeError(f"the base-policy warm-up did not reach probe pass@4 {STOP_PASS_AT_4} in {max_steps} steps (last {probe_pass:.3f})")
    record = {"seed": seed, "steps": step, "batch_size": batch_size, "lr": lr, "probe_pass_at_4": probe_pass, "stop_pass_at_4": STOP_PASS_AT_4}
    return model, tokenizer, record


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Warm the tiny policy up and write it into ``out_dir`` as a Hugging Face checkpoint folder."""
    model, tokenizer, record = warm_up(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "warm_up.json").write_text(json.dumps(record, indent=2) + "\n")
    return sorted(p for p in out_dir.iterdir() if p.is_file())
