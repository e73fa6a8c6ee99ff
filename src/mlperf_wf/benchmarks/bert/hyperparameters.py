"""Tiny-tier hyperparameters of bert: the reference's LAMB recipe on a 2-layer BERT over 64-token sequences.

Reference values (retired_benchmarks/bert at aa344c7): LAMB (lamb_optimizer_v1.py) with
beta_1/beta_2, weight decay rate and epsilon 10**log_epsilon from the command line
(optimization.py:19-22), gradients clipped to global norm 1.0 (optimization.py:115-117), linear
warm-up from ``start_warmup_step`` over ``num_warmup_steps`` then polynomial decay to 0 over
``num_train_steps`` (optimization.py:44-72); sequences of 512 with 76 masked positions; the
model in bert_config.json (the tiny one comes from the tiny input files, like the reference's).
"""

from __future__ import annotations

from mlperf_logging.mllog import constants
from pydantic import Field, model_validator

from mlperf_wf.config.hyperparameters import TinyHyperparameters


class Hyperparameters(TinyHyperparameters):
    """Masked-LM + next-sentence pretraining of the tiny BERT on the generated TFRecords."""

    global_batch_size: int = Field(32, ge=1)
    """Sequences per optimizer step (reference: --train_batch_size, e.g. 8192 on TPU-v3-128)."""
    max_seq_length: int = Field(64, ge=8)
    """Tokens per sequence; must equal the prepared records' (reference 512)."""
    max_predictions_per_seq: int = Field(10, ge=1)
    """Masked positions per sequence; must equal the prepared records' (reference 76)."""
    learning_rate: float = Field(0.01, gt=0)
    """LAMB peak learning rate (reference TPU run: 0.00288293 at batch 8192)."""
    lamb_beta_1: float = Field(0.9, ge=0, lt=1)
    """LAMB beta 1 (reference default 0.9; the TPU run 0.88)."""
    lamb_beta_2: float = Field(0.999, ge=0, lt=1)
    """LAMB beta 2 (reference default 0.999; the TPU run 0.88)."""
    lamb_weight_decay_rate: float = Field(0.01, ge=0)
    """Decoupled weight decay inside LAMB, not on LayerNorm or bias (reference default 0.01)."""
    log_epsilon: float = -6.0
    """LAMB epsilon is 10**log_epsilon (reference -6)."""
    poly_power: float = Field(1.0, gt=0)
    """Power of the polynomial decay to 0 (reference 1.0: linear)."""
    num_train_steps: int = Field(1000, ge=1)
    """Decay horizon and step budget; a run stops at the target long before (reference TPU run: 600)."""
    num_warmup_steps: int = Field(0, ge=0)
    """Linear warm-up steps (reference GBS-256 point: 0; TPU run: 287)."""
    start_warmup_step: int = 0
    """Step at which warm-up begins (reference TPU run: -76)."""
    gradient_clip_norm: float = Field(1.0, gt=0)
    """Global-norm gradient clipping before LAMB (reference: 1.0, hard-coded)."""
    eval_every_samples: int = Field(800, ge=1)
    """Evaluate after this many training sequences (reference: floor(0.05 * (230.23 * GBS + 3e6) / 25000) * 25000, README.md:157)."""
    eval_samples: int = Field(512, ge=1)
    """Sequences of the held-out evaluation file scored each time (reference 10,000; the prepared eval file holds exactly these)."""

    @model_validator(mode="after")
    def _masks_fit(self) -> Hyperparameters:
        if self.max_predictions_per_seq > self.max_seq_length:
            raise ValueError(f"max_predictions_per_seq {self.max_predictions_per_seq} exceeds max_seq_length {self.max_seq_length}")
        return self

    @property
    def lamb_epsilon(self) -> float:
        """The epsilon LAMB uses."""
        return 10**self.log_epsilon

    def mllog(self, world_size: int) -> dict[str, object]:
        if world_size != 1:
            raise ValueError(f"the tiny bert trainer runs one process (tiny_processes: 1), not {world_size}")
        return {
            constants.GLOBAL_BATCH_SIZE: self.global_batch_size,
            constants.GRADIENT_ACCUMULATION_STEPS: 1,
            constants.MAX_SEQUENCE_LENGTH: self.max_seq_length,
            "max_prediction_per_seq": self.max_predictions_per_seq,  # the reference's key (mlp_logging.py:69)
            constants.OPT_NAME: "lamb",
            constants.OPT_BASE_LR: self.learning_rate,
            "opt_lamb_weight_decay_rate": self.lamb_weight_decay_rate,
            constants.OPT_LAMB_BETA_1: self.lamb_beta_1,
            constants.OPT_LAMB_BETA_2: self.lamb_beta_2,
            constants.OPT_LAMB_EPSILON: self.lamb_epsilon,
            "opt_epsilon": self.lamb_epsilon,  # the same epsilon, under the name rounds 0.7.0-2.0.0 require
            constants.OPT_LAMB_LR_DECAY_POLY_POWER: self.poly_power,
            constants.OPT_LR_WARMUP_STEPS: self.num_warmup_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "start_warmup_step": self.start_warmup_step,
            "opt_learning_rate_training_steps": self.num_train_steps,
            constants.OPT_GRADIENT_CLIP_NORM: self.gradient_clip_norm,
        }
