"""Tiny-tier hyperparameters of qwen35_397b_grpo: the reference's GRPO recipe on a two-layer Qwen3.5-MoE.

Reference values (training:llm_post_training/README.md at aa344c7; README "Full scale" has each line): 16
prompts x 16 generations per step (GBS 256), Adam logged as ``adamw`` with LR 1e-6 x sqrt(GBS/256), constant,
no warm-up, beta 0.9/0.999, eps 1e-8, weight decay 0, gradient clipping 0.125 x sqrt(256/GBS); PPO ratio clip
0.2/0.28 and no KL penalty (the tiny tier keeps a small one: see kl_penalty); training rollouts at temperature 1.0 / top-p 1.0, validation at 0.1 / 0.95 with
4 samples per task (pass@4); the first validation after GBS x ceil(2.5 + 3840/GBS) samples, then one per step.
"""

from __future__ import annotations

import math

from mlperf_logging.mllog import constants
from pydantic import Field

from mlperf_wf.benchmarks.qwen35_397b_grpo.arithmetic import ANSWER_DIGITS
from mlperf_wf.config.hyperparameters import TinyHyperparameters

PROMPT_TOKENS = 7
"""BOS + ``ab+cd=``."""


class Hyperparameters(TinyHyperparameters):
    """GRPO on the tiny addition tasks from the warmed-up tiny Qwen3.5-MoE."""

    num_prompts_per_step: int = 16
    """Prompts per GRPO step (reference 16 at GBS 256)."""
    num_generations_per_prompt: int = 16
    """Completions sampled per prompt, the group of the advantage baseline (reference and closed rule: 16)."""
    learning_rate: float = 5e-4
    """Constant Adam learning rate (reference 1e-6 x sqrt(GBS/256) for a 397B policy; that does not move a tiny one)."""
    adam_beta_1: float = 0.9
    """Adam beta1 (reference 0.9)."""
    adam_beta_2: float = 0.999
    """Adam beta2 (reference 0.999)."""
    adam_epsilon: float = 1e-8
    """Adam epsilon (reference 1e-8)."""
    weight_decay: float = 0.0
    """Weight decay (reference 0)."""
    gradient_clip_norm: float = 0.125
    """Global gradient-norm clip (reference 0.125 x sqrt(256/GBS): 0.125 at GBS 256)."""
    ratio_clip_low: float = 0.2
    """PPO ratio clip below 1 (reference 0.2)."""
    ratio_clip_high: float = 0.28
    """PPO ratio clip above 1 (reference 0.28)."""
    kl_penalty: float = Field(0.01, ge=0.0)
    """Coefficient of the KL penalty to the frozen starting policy (k3 estimator per completion token; NeMo-RL's
    reference_policy_kl_penalty, 0 in the reference's recipe). At 0 the term and the reference policy's forward
    pass are left out."""
    training_temperature: float = 1.0
    """Sampling temperature of training rollouts (reference and closed rule 1.0)."""
    training_top_p: float = 1.0
    """Nucleus of training rollouts (reference and closed rule 1.0)."""
    validation_temperature: float = 0.1
    """Sampling temperature of validation rollouts (reference and closed rule 0.1)."""
    validation_top_p: float = 0.95
    """Nucleus of validation rollouts (reference and closed rule 0.95)."""
    validation_generations: int = 4
    """Samples per validation task; the metric is pass@4 (reference 4)."""
    max_steps: int = 300
    """Step budget (reference 30 at GBS 256); the run stops at the target first."""
    shuffle_rewards: bool = False
    """Control only: shuffle each step's rewards across its completions, so they carry no information."""

    @property
    def global_batch_size(self) -> int:
        """Completions per step: prompts x generations."""
        return self.num_prompts_per_step * self.num_generations_per_prompt

    @property
    def first_validation_samples(self) -> int:
        """GBS x ceil(2.5 + 3840 / GBS), the reference's and the rules' first validation (4608 = step 18 at GBS 256)."""
        return self.global_batch_size * math.ceil(2.5 + 3840 / self.global_batch_size)

    def mllog(self, world_size: int) -> dict[str, object]:
        if world_size != 1:
            raise ValueError(f"the tiny GRPO trainer runs in one process; got {world_size}")
        return {
            constants.GLOBAL_BATCH_SIZE: self.global_batch_size,
            "num_prompts_per_step": self.num_prompts_per_step,
            "num_generations_per_prompt": self.num_generations_per_prompt,
            "micro_batch_size": self.global_batch_size,  # one forward/backward over the whole batch
            constants.GRADIENT_ACCUMULATION_STEPS: 1,
            constants.MAX_SEQUENCE_LENGTH: PROMPT_TOKENS + ANSWER_DIGITS,
            constants.MAX_STEPS: self.max_steps,
            constants.INIT_CHECKPOINT_STEP: 0,  # RL starts from the base checkpoint's weights, as the reference's
            constants.OPT_NAME: "adamw",
            constants.OPT_BASE_LR: self.learning_rate,
            "opt_end_learning_rate": self.learning_rate,
            constants.OPT_ADAMW_BETA_1: self.adam_beta_1,
            constants.OPT_ADAMW_BETA_2: self.adam_beta_2,
            constants.OPT_ADAMW_EPSILON: self.adam_epsilon,
            constants.OPT_ADAMW_WEIGHT_DECAY: self.weight_decay,
            constants.OPT_GRADIENT_CLIP_NORM: self.gradient_clip_norm,
            constants.OPT_LR_WARMUP_STEPS: 0,
            constants.OPT_LR_DECAY_SCHEDULE: "constant",
            "generation_training_rollout_temperature": self.training_temperature,
            "generation_training_rollout_top_p": self.training_top_p,
            "generation_validation_rollout_temperature": self.validation_temperature,
            "generation_validation_rollout_top_p": self.validation_top_p,
            "ratio_clip_low": self.ratio_clip_low,
            "ratio_clip_high": self.ratio_clip_high,
            "reference_policy_kl_penalty": self.kl_penalty,
        }
