"""Tiny-tier hyperparameters of gpt3: the reference's optimiser, sequence length and learning rate, resumed.

Reference values (retired_benchmarks/gpt3/megatron-lm at aa344c7, run_gpt3.sh): Adam (Megatron's
``adam`` is apex's FusedAdam, decoupled weight decay: torch's AdamW) beta 0.9/0.95 (:85-86), eps 1e-8
(arguments.py:497),
weight decay 0.1 (:84), clip 1.0 (:83), sequence 2048 (:58), global batch 1536 (:11), LR 2e-5 to a
minimum of 2e-6 (:12-13), cosine after linear warm-up over 407,040 samples, decay over 166,809,600
samples (:63-67), evaluation every ceil(24576 / GBS) steps (:14) on the whole validation subset, resumed
from the 4000-step checkpoint with the schedule continued at its step (:99-106).
"""

from __future__ import annotations

from pydantic import model_validator

from mlperf_wf.language_models.causal_hyperparameters import CausalLMHyperparameters


class Hyperparameters(CausalLMHyperparameters):
    """Continued pretraining of a tiny GPT-2-family model from its starting checkpoint on the Markov C4 stand-in."""

    sequence_length: int = 2048
    """Tokens per training sequence (closed rule: 2048, met)."""
    global_batch_size: int = 1
    """Sequences per optimizer step (reference 1536 on 64+ nodes)."""
    learning_rate: float = 2e-5
    """Peak learning rate (closed rule: 2e-5 or 3e-5; the reference's default LR=2.0e-5)."""
    end_learning_rate_fraction: float = 0.1
    """Cosine floor as a fraction of the peak (reference MIN_LR 2e-6 = 0.1 x 2e-5)."""
    warmup_steps: int = 10
    """Linear warm-up steps of the schedule (reference 407,040 samples = 265 steps at GBS 1536); the starting
    checkpoint is past it, as the reference's (4000 steps) is."""
    decay_steps: int = 5000
    """Cosine decay steps after the warm-up (reference 166,809,600 samples = 108,600 steps at GBS 1536)."""
    max_steps: int = 400
    """Step budget after the checkpoint: the run stops there (aborted) if the target is not met."""
    adam_epsilon: float = 1e-8
    """Adam epsilon (closed rule: 1e-8; Megatron's --adam-eps default)."""
    eval_every_samples: int = 10
    """Evaluate after this many training sequences (reference 24,576)."""
    eval_sequences: int = 20
    """Validation windows of 2048 tokens per evaluation: all of the tiny validation subset (the reference
    evaluates its whole subset, --eval-iters -1). The model's shape is the starting checkpoint's
    (starting_checkpoint.py), as a resumed reference run's is."""
    init_checkpoint_step: int = 190
    """Optimizer steps of this global batch the starting checkpoint stands for: ceil(its consumed samples /
    global_batch_size), as the reference logs it (training.py:138); the trainer refuses a checkpoint that
    says otherwise."""

    @model_validator(mode="after")
    def _resumes_past_the_warm_up(self) -> Hyperparameters:
        if self.init_checkpoint_step <= 0:
            raise ValueError(f"init_checkpoint_step is {self.init_checkpoint_step}; allowed: > 0 (every gpt3 run resumes a checkpoint)")
        return self

    def learning_rate_factor(self, step: int) -> float:
        """The schedule resumed at the checkpoint's step, as Megatron's ``--ext-lr-steps`` does (checkpointing.py:608-610)."""
        return super().learning_rate_factor(step + self.init_checkpoint_step)

    def mllog(self, world_size: int) -> dict[str, object]:
        return {
            **self.optimizer_mllog("opt_adam"),
            "micro_batch_size": self.global_batch_size,  # one process: the trainer refuses more
            "opt_name": "adam",
            "init_checkpoint_step": self.init_checkpoint_step,
        }
