"""Tiny-tier hyperparameters of deepseekv3_671b: the reference's optimiser, schedule and evaluation on a tiny DeepSeek-V3.

Reference values (llm_moe_pretraining/nemo at aa344c7, config_GB300_64x4x256xtp1pp4cp1.sh and
pretrain_deepseek_v3_671b.py; README.md has each file:line): AdamW (Megatron's distributed optimizer, beta
0.9/0.95, eps 1e-8, weight decay 0.1, clip 1.0 from Megatron-Bridge's DeepSeek-V3 recipe), peak LR
2.4e-5 x sqrt(GBS/16384), min LR 1e-8, linear warm-up 4 steps then cosine over 11,996 decay steps
(12,000 - warm-up), max_steps 100, sequence 4096, GBS 16384, one evaluation of 1024 sequences every step from
step 42 + 24576/GBS, moe_aux_loss_coeff 0.01 (sequence-wise auxiliary loss).
"""

from __future__ import annotations

from mlperf_logging.mllog import constants
from pydantic import Field

from mlperf_wf.language_models.causal_hyperparameters import CausalLMHyperparameters

GLOBAL_BATCH_SIZE = 16
REFERENCE_PEAK_LR = 2.4e-5
"""The reference's peak learning rate at GBS 16384 (config_GB300_64x4x256xtp1pp4cp1.sh:44)."""
REFERENCE_MIN_LR = 1e-8
"""The reference's cosine floor (config_GB300_64x4x256xtp1pp4cp1.sh:45)."""
WARMUP_STEPS = 4


class Hyperparameters(CausalLMHyperparameters):
    """Continued pretraining of the tiny DeepSeek-V3 checkpoint on the Markov C4 stand-in."""

    sequence_length: int = 128
    """Tokens per training and evaluation sequence (reference and open/closed rule: 4096; declared not met)."""
    global_batch_size: int = GLOBAL_BATCH_SIZE
    """Sequences per optimizer step (reference 16384 on 64 x 4 GPUs; open/closed rule >= 15360: declared not met)."""
    learning_rate: float = 2e-3
    """Peak learning rate (reference 2.4e-5 x sqrt(GBS/16384): 7.5e-7 at GBS 16 would not move a tiny model)."""
    end_learning_rate_fraction: float = REFERENCE_MIN_LR / REFERENCE_PEAK_LR
    """Cosine floor as a fraction of the peak: the reference's min_lr 1e-8 over its 2.4e-5."""
    warmup_steps: int = WARMUP_STEPS
    """Linear warm-up steps (reference and closed rule: 4)."""
    max_steps: int = 100
    """Step budget (reference MAX_STEPS=100); the run stops at the target long before."""
    decay_steps: int = 12_000 - WARMUP_STEPS
    """Cosine decay steps (reference LR_DECAY_STEPS=11996; closed rule 12000 - warm-up)."""
    adam_epsilon: float = 1e-8
    """AdamW epsilon (the reference forces 1e-8, pretrain_deepseek_v3_671b.py:178; closed rule 1e-8)."""
    eval_every_samples: int = GLOBAL_BATCH_SIZE
    """Evaluate every step (reference EVAL_CHECK_INTERVAL=1)."""
    eval_sequences: int = 1024
    """Validation sequences per evaluation, the first of the file, unshuffled (reference EVAL_BATCH_SIZE=1024 x EVAL_BATCHES=1; rule 1024)."""
    moe_aux_loss_coeff: float = Field(0.01, ge=0.0)
    """Weight of the sequence-wise load-balancing loss in the training loss (reference hard-codes 0.01)."""

    def mllog(self, world_size: int) -> dict[str, object]:
        return {
            **self.optimizer_mllog("opt_adamw"),
            constants.OPT_NAME: "adamw",
            "max_steps": self.max_steps,
            constants.INIT_CHECKPOINT_STEP: 0,  # weights-only from the checkpoint at step 0, as the reference's ckpt_step=0
            "moe_aux_loss_coeff": self.moe_aux_loss_coeff,
            "micro_batch_size": self.global_batch_size,  # one process, no accumulation: the trainer refuses more
        }
