"""Tiny-scale qwen35_397b_grpo trainer: GRPO on verifiable additions from the warmed-up tiny Qwen3.5-MoE.

It follows the reference's recipe (training:llm_post_training/README.md, sections "Loss function",
"Optimizer", "Quality"): each step takes the next ``num_prompts_per_step`` training tasks in file order (the
reference's ``data.shuffle: false``), samples ``num_generations_per_prompt`` completions each at the training
temperature/top-p, scores them with the binary verifier, computes leave-one-out normalised advantages and
takes one clipped-surrogate Adam step, with the KL penalty to the frozen starting policy when its coefficient
is not 0; validation samples 4 completions of each of the 251
held-out tasks at the validation temperature/top-p and reports pass@4, first after
GBS x ceil(2.5 + 3840/GBS) samples and then after every step, until pass@4 beats the target.
Every mllog value is the value the loop uses.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import torch
from mlperf_logging.mllog import constants

from mlperf_wf.benchmarks.qwen35_397b_grpo import grpo, megatron_checkpoint, policy, task_images
from mlperf_wf.benchmarks.qwen35_397b_grpo.hyperparameters import Hyperparameters
from mlperf_wf.benchmarks.qwen35_397b_grpo.prepare import TRAIN_FILENAME, VALIDATION_FILENAME
from mlperf_wf.run.harness import TinyRun


def read_tasks(path: Path, environments: Path) -> list[tuple[str, dict]]:
    """(prompt, task environment) of every task of a converted JSON-lines file."""
    tasks = []
    with path.open() as handle:
        for number, line in enumerate(handle, 1):
            try:
                record = json.loads(line)
                prompt, instance_id = record["problem_statement"], record["instance_id"]
            except (KeyError, TypeError, json.JSONDecodeError) as err:
                raise ValueError(f"{path}:{number}: not a converted task ({err!r}); expected instance_id and problem_statement") from None
            tasks.append((prompt, task_images.load(environments, instance_id)))
    return tasks


def validate(model, tokenizer, tasks: list[tuple[str, str]], hp: Hyperparameters, generator: torch.Generator) -> float:
    """pass@k over every validation task at the validation sampling settings."""
    prompts = [prompt for prompt, _ in tasks]
    verifiers = [partial(task_images.run_test, env) for _, env in tasks]
    return policy.pass_at_k(model, tokenizer, prompts, verifiers, hp.validation_generations, hp.validation_temperature, hp.validation_top_p, generator)


def grpo_step(model, tokenizer, optimizer, batch: list[tuple[str, str]], hp: Hyperparameters, generator: torch.Generator, reference_policy=None) -> dict:
    """One rollout + update; returns the step's mean reward, loss and KL to ``reference_policy`` (the frozen
    starting policy, needed when ``hp.kl_penalty`` is not 0)."""
    prompt_ids = policy.encode_prompts(tokenizer, [prompt for prompt, _ in batch]).repeat_interleave(hp.num_generations_per_prompt, dim=0)
    model.eval()
    completions = policy.sample(model, prompt_ids, hp.training_temperature, hp.training_top_p, generator)
    model.train()
    texts = policy.decode(tokenizer, completions)
    environments = [env for _, env in batch for _ in range(hp.num_generations_per_prompt)]
    rewards = torch.tensor([task_images.run_test(env, text) for text, env in zip(texts, environments, strict=True)])
    if hp.shuffle_rewards:
        rewards = rewards[torch.randperm(rewards.numel(), generator=generator)]
    advantages = grpo.leave_one_out_advantages(rewards.view(len(batch), hp.num_generations_per_prompt)).flatten()
    logprobs = policy.completion_logprobs(model, prompt_ids, completions)
    # One update per batch of fresh rollouts: the sampling policy is the current one, so the old log-probs are
    # these (detached) and the ratio is 1, as with the reference's force_on_policy_ratio.
    loss = grpo.clipped_policy_loss(logprobs, logprobs.detach(), advantages, hp.ratio_clip_low, hp.ratio_clip_high)
    kl = torch.zeros(())
    if hp.kl_penalty:
        with torch.no_grad():
            reference_logprobs = policy.completion_logprobs(reference_policy, prompt_ids, completions)
        kl = grpo.reference_kl(logprobs, reference_logprobs)
        loss = loss + hp.kl_penalty * kl
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), hp.gradient_clip_norm)
    optimizer.step()
    optimizer.zero_grad()
    return {"mean_reward": rewards.mean().item(), "loss": loss.item(), "kl": kl.item()}


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Run to the target (or max_steps); the harness logs the preamble and hyperparameters."""
    torch.manual_seed(run.spec.seed)
    generator = torch.Generator().manual_seed(run.spec.seed)
    # the full-scale runs start from the conversion made once (nothing to convert at tiny size: see megatron_checkpoint)
    megatron_checkpoint.check(run.spec.input("megatron_checkpoint"))
    model, tokenizer = policy.load(run.spec.input("checkpoint"))
    model.train()
    reference_policy = None
    if hp.kl_penalty:
        reference_policy, _ = policy.load(run.spec.input("checkpoint"))
        reference_policy.eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=hp.learning_rate, betas=(hp.adam_beta_1, hp.adam_beta_2), eps=hp.adam_epsilon, weight_decay=hp.weight_decay
    )
    # One process holds the whole policy and generates itself: no sharding of any kind.
    run.config_unsharded(model)
    run.begin()

    # The clock runs from here: reading the converted tasks is timed, as the reference's data loading is.
    environments = run.spec.input("task_images")
    train_tasks = read_tasks(run.spec.data_dir / TRAIN_FILENAME, environments)
    validation_tasks = read_tasks(run.spec.data_dir / VALIDATION_FILENAME, environments)
    run.event(constants.TRAIN_SAMPLES, len(train_tasks) * hp.num_generations_per_prompt)
    run.event(constants.EVAL_SAMPLES, len(validation_tasks))
    samples, cursor = 0, 0
    status = constants.ABORTED
    pass_at_4 = float("nan")
    history = []
    run.block_start(samples_count=0)
    for step in range(1, hp.max_steps + 1):
        batch = [train_tasks[(cursor + i) % len(train_tasks)] for i in range(hp.num_prompts_per_step)]
        cursor = (cursor + hp.num_prompts_per_step) % len(train_tasks)
        stats = grpo_step(model, tokenizer, optimizer, batch, hp, generator, reference_policy)
        samples += hp.global_batch_size
        record = {"step": step, "samples": samples, **stats}
        if samples >= hp.first_validation_samples:
            run.block_stop(samples_count=samples)
            run.eval_start(samples_count=samples)
            pass_at_4 = validate(model, tokenizer, validation_tasks, hp, generator)
            run.eval_result(pass_at_4, samples_count=samples)
            record["pass_at_4"] = pass_at_4
            history.append(record)
            if run.spec.reached(pass_at_4):
                status = constants.SUCCESS
                break
            run.block_start(samples_count=samples)
        else:
            history.append(record)
    else:
        run.block_stop(samples_count=samples)
    run.finish(status, samples_count=samples)
    return {"status": status, "samples": samples, "steps": len(history), "eval_accuracy": pass_at_4, "seconds": run.seconds, "history": history}
