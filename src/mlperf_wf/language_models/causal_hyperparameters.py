"""The hyperparameters every dense causal-LM tiny tier shares (``causal_trainer`` trains with them).

Apart from the trainer so that the registry, which builds each benchmark's hyperparameter model on every Snakemake
parse, ``mlperf-wf check`` and ``status``, never imports torch.
"""

from __future__ import annotations

import math

from mlperf_logging.mllog import constants

from mlperf_wf.config.hyperparameters import TinyHyperparameters


class CausalLMHyperparameters(TinyHyperparameters):
    """What every dense causal-LM tiny tier sets; the benchmark's subclass gives the defaults and the mllog keys."""

    sequence_length: int
    """Tokens per training sequence."""
    global_batch_size: int
    """Sequences per optimizer step (one process: no accumulation)."""
    learning_rate: float
    """Peak learning rate."""
    end_learning_rate_fraction: float
    """Cosine floor as a fraction of the peak."""
    warmup_steps: int
    """Linear warm-up steps."""
    max_steps: int
    """Step budget: the run stops there (aborted) if the target is not met."""
    decay_steps: int
    """Cosine decay steps after the warm-up (the schedule reaches its floor there)."""
    adam_beta1: float = 0.9
    """AdamW beta 1."""
    adam_beta2: float = 0.95
    """AdamW beta 2."""
    adam_epsilon: float = 1e-5
    """AdamW epsilon."""
    weight_decay: float = 0.1
    """AdamW weight decay."""
    gradient_clip_norm: float = 1.0
    """Gradient clipping (global L2 norm)."""
    eval_every_samples: int
    """Evaluate after this many training sequences."""
    eval_sequences: int
    """Validation sequences per evaluation (each of sequence_length tokens)."""
    first_eval_samples: int = 0
    """Training sequences before the first evaluation (0 or less than eval_every_samples: after eval_every_samples);
    llama31_405b skips its first evaluations as its reference does."""

    def learning_rate_factor(self, step: int) -> float:
        """The multiplier of the peak learning rate at optimizer step ``step`` (0-based)."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / self.decay_steps)
        floor = self.end_learning_rate_fraction
        return floor + (1 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    def optimizer_mllog(self, key_prefix: str) -> dict[str, object]:
        """The optimizer and schedule keys, with the round's spelling of the Adam keys (``opt_adamw`` or ``opt_adam``)."""
        return {
            constants.GLOBAL_BATCH_SIZE: self.global_batch_size,
            constants.GRADIENT_ACCUMULATION_STEPS: 1,
            "max_sequence_length": self.sequence_length,
            constants.OPT_BASE_LR: self.learning_rate,
            "opt_end_learning_rate": self.learning_rate * self.end_learning_rate_fraction,
            "opt_learning_rate_warmup_steps": self.warmup_steps,
            "opt_learning_rate_decay_steps": self.decay_steps,
            "opt_learning_rate_decay_schedule": "cosine with linear warmup",
            f"{key_prefix}_beta_1": self.adam_beta1,
            f"{key_prefix}_beta_2": self.adam_beta2,
            f"{key_prefix}_epsilon": self.adam_epsilon,
            f"{key_prefix}_weight_decay": self.weight_decay,
            constants.OPT_GRADIENT_CLIP_NORM: self.gradient_clip_norm,
        }
