"""Tiny-tier hyperparameters of llama31_405b: the reference's optimiser and schedule on a 2-layer Llama.

Reference values (large_language_model_pretraining/nemo at aa344c7; README "Full scale" has each file:line):
AdamW (NeMo's distributed fused Adam, beta 0.9/0.95, eps 1e-5, weight decay 0.1, clip 1.0), peak LR
8e-5 x GBS/1152, linear warm-up over ceil(8000 x 1152 / GBS) steps, then cosine to min_lr 8e-7 (0.01 x the
peak at GBS 1152) over max_steps = ceil(1,200,000 x 1152 / GBS) (decay = max_steps - warm-up), sequence 8192,
GBS 1152, evaluation of 5760 sequences every 18,432 sequences after skipping the first
floor(0.0026 x GBS + 12) intervals.
"""

from __future__ import annotations

import math

from mlperf_logging.mllog import constants

from mlperf_wf.language_models.causal_hyperparameters import CausalLMHyperparameters

GLOBAL_BATCH_SIZE = 16
MAX_STEPS = math.ceil(1_200_000 * 1152 / GLOBAL_BATCH_SIZE)
"""The reference's formula (pretrain_llama31.py:181-182) at the tiny batch: 86,400,000."""
WARMUP_STEPS = 20
EVAL_EVERY_SAMPLES = 64


class Hyperparameters(CausalLMHyperparameters):
    """Continued pretraining of the tiny Llama checkpoint on the Markov C4 stand-in."""

    sequence_length: int = 128
    """Tokens per training and evaluation sequence (reference and open/closed rule: 8192; declared not met)."""
    global_batch_size: int = GLOBAL_BATCH_SIZE
    """Sequences per optimizer step (reference 1152 on 288 x 8 GPUs)."""
    learning_rate: float = 3e-3
    """Peak learning rate (reference 8e-5 x GBS/1152 for a 405B model: 1.1e-6 at GBS 16 would not move a tiny one)."""
    end_learning_rate_fraction: float = 0.01
    """Cosine floor as a fraction of the peak (reference min_lr 8e-7 = 0.01 x 8e-5)."""
    warmup_steps: int = WARMUP_STEPS
    """Linear warm-up steps (reference ceil(8000 x 1152 / GBS): 8000 at GBS 1152)."""
    max_steps: int = MAX_STEPS
    """Step budget, ceil(1,200,000 x 1152 / GBS) as the reference computes it; the run stops at the target long before."""
    decay_steps: int = MAX_STEPS - WARMUP_STEPS
    """Cosine decay steps: max_steps - warm-up, as the reference logs and uses them (pretrain_llama31.py:402)."""
    eval_every_samples: int = EVAL_EVERY_SAMPLES
    """Evaluate every this many training sequences (reference 18,432 = 16 steps of 1152)."""
    first_eval_samples: int = math.floor(0.0026 * GLOBAL_BATCH_SIZE + 12) * EVAL_EVERY_SAMPLES
    """First evaluation after floor(0.0026 x GBS + 12) intervals, the reference's skip (pretrain_llama31.py:357): 768."""
    eval_sequences: int = 64
    """Validation sequences per evaluation, the first of the file, unshuffled (reference and rule: 5760 of 8192 tokens; declared not met)."""

    def mllog(self, world_size: int) -> dict[str, object]:
        return {
            **self.optimizer_mllog("opt_adamw"),
            "micro_batch_size": self.global_batch_size,  # one process: the trainer refuses more
            constants.OPT_NAME: "adamw",
            constants.INIT_CHECKPOINT_STEP: 0,  # the run starts from the checkpoint's weights at step 0, as the reference's
        }
