"""GRPO as the reference's recipe computes it (training:llm_post_training/README.md "Loss function"), at toy size.

- Binary verifier rewards, one group of ``num_generations_per_prompt`` completions per prompt.
- Leave-one-out baseline (each completion is compared with the mean reward of the *other* completions of its
  prompt) and reward normalisation (divided by the group's standard deviation; a group whose rewards are all
  equal carries no signal and gets zero advantage).
- Token-level PPO objective with asymmetric ratio clipping (``1 - clip_low``, ``1 + clip_high``) against the
  log-probabilities the rollout was sampled with.
- A KL penalty to the frozen starting policy, NeMo-RL's ``reference_policy_kl_penalty`` times the k3 estimator
  (Schulman's unbiased, always non-negative ``exp(ref - logp) - (ref - logp) - 1``) per completion token.
"""

from __future__ import annotations

import torch


def leave_one_out_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Advantages of a (prompts x generations) reward matrix: reward minus the others' mean, over the group's std."""
    generations = rewards.size(1)
    if generations < 2:
        raise ValueError(f"a leave-one-out baseline needs at least 2 generations per prompt, got {generations}")
    others_mean = (rewards.sum(dim=1, keepdim=True) - rewards) / (generations - 1)
    std = rewards.std(dim=1, keepdim=True)
    return torch.where(std > 0, (rewards - others_mean) / (std + eps), torch.zeros_like(rewards))


def clipped_policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, clip_low: float, clip_high: float) -> torch.Tensor:
    """Token-level clipped surrogate, averaged over every completion token: -mean(min(r A, clip(r) A)).

    ``logprobs``/``old_logprobs`` are (rows x tokens), ``advantages`` one per row.
    """
    ratio = torch.exp(logprobs - old_logprobs)
    advantage = advantages.unsqueeze(-1).expand_as(ratio)
    unclipped = ratio * advantage
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * advantage
    return -torch.minimum(unclipped, clipped).mean()


def reference_kl(logprobs: torch.Tensor, reference_logprobs: torch.Tensor) -> torch.Tensor:
    """k3 estimate of KL(policy || reference) averaged over every completion token (both rows x tokens)."""
    log_ratio = reference_logprobs - logprobs
    return (torch.exp(log_ratio) - log_ratio - 1.0).mean()
