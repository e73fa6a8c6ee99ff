"""Tiny-tier hyperparameters of dlrmv4: the reference's HSTU ranker and its streaming schedule, scaled down."""

from __future__ import annotations

import math

from mlperf_logging.mllog import constants
from pydantic import model_validator

from mlperf_wf.config.hyperparameters import TinyHyperparameters

CAUSAL_MULTITASK_WEIGHT = 0.2
"""The listen_plus task's loss scale (configs.py causal_multitask_weights; multitask_module._compute_loss)."""


class Hyperparameters(TinyHyperparameters):
    """HSTU on the tiny Yambda cache (reference: yambda_5b.gin and configs.get_hstu_configs("yambda-5b"))."""

    global_batch_size: int = 128
    """Anchors per optimizer step over all processes (reference: BATCH_SIZE 1024 per rank x 8 = 8192, the dlrmv4_ref_8192 RCP)."""
    history_per_pool: int = 8
    """Most recent listen_plus, like and skip events kept each (reference: history_length // 3 = 1362)."""
    scan_window: int = 2000
    """Earlier events scanned to fill the pools (reference: get_dataset scan_window 20000)."""
    embedding_dim: int = 32
    """Embedding and transducer width (reference: 512)."""
    num_layers: int = 2
    """STU layers (reference: HSTU_NUM_LAYERS 3)."""
    num_heads: int = 2
    """Attention heads (reference: 4)."""
    head_dim: int = 16
    """Per-head Q/K and U/V width (reference: 128)."""
    time_buckets: int = 32
    """Log-spaced buckets of the time before the candidate (reference: 2048)."""
    dropout: float = 0.1
    """Linear dropout in the STU layers (reference: 0.1; input dropout 0.2 there)."""
    learning_rate: float = 0.01
    """Target learning rate of the dense Adam (reference: DENSE_LR 1e-6 at GBS 8192)."""
    sparse_learning_rate: float = 0.1
    """Target learning rate of the sparse RowWiseAdagrad (reference: SPARSE_LR = DENSE_LR, 1e-6 at GBS 8192)."""
    warmup_steps: int = 20
    """Linear ramp from warmup_start_lr to learning_rate (reference: 24000)."""
    warmup_start_lr: float = 0.0
    """Where the ramp starts (reference: 0.0)."""
    adam_beta_1: float = 0.95
    """Adam's first-moment decay (reference: 0.95)."""
    adam_beta_2: float = 0.999
    """Adam's second-moment decay (reference: 0.999)."""
    adam_epsilon: float = 1e-8
    """Adam's and RowWiseAdagrad's epsilon (reference: 1e-8 both)."""
    weight_decay: float = 0.0
    """Adam's weight decay (reference: 0)."""
    gradient_clip_norm: float = 1.0
    """Max norm of the dense gradients (reference: GRAD_CLIP_NORM 1.0)."""
    eval_every_data_pct: float = 0.2
    """Evaluate each time this fraction of the training anchors has been trained on (reference: 0.001)."""
    start_window: int = 0
    """First training window, in days from the first anchor (reference: START_TS; 0 in run_and_time.sh)."""
    train_windows: int = 7
    """Training windows; the next one is the held-out evaluation window (reference: NUM_TRAIN_TS 299)."""
    shuffle_within_window: bool = True
    """Shuffle the anchors inside each training window, never across windows (reference: STREAMING_SHUFFLE_FRACTION, 0.0 = off,
    1.0 = this; user-major order leaves the tiny tier's 64 users in runs of ~50 anchors)."""
    max_passes: int = 3
    """Passes over the training windows before a run that has not reached the target stops (reference: one)."""

    @model_validator(mode="after")
    def _positive(self) -> Hyperparameters:
        for name in ("global_batch_size", "history_per_pool", "embedding_dim", "num_layers", "num_heads", "head_dim", "train_windows", "max_passes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} is {getattr(self, name)}; it must be at least 1")
        if not 0 < self.eval_every_data_pct <= 1:
            raise ValueError(f"eval_every_data_pct is {self.eval_every_data_pct}; allowed: a fraction in (0, 1]")
        return self

    @property
    def history_length(self) -> int:
        """History events per anchor (three pools)."""
        return 3 * self.history_per_pool

    @property
    def max_sequence_length(self) -> int:
        """Tokens per sample: the user token, the history and the candidate (reference: 8 contextual + 4086 + 1 <= 4096)."""
        return 1 + self.history_length + 1

    def eval_interval_samples(self, train_samples: int) -> int:
        """The evaluation grid as the rules compute it: ceil(pct x train_samples / GBS) steps, in samples."""
        return max(1, math.ceil(self.eval_every_data_pct * train_samples / self.global_batch_size)) * self.global_batch_size

    def mllog(self, world_size: int) -> dict[str, object]:
        if self.global_batch_size % world_size:
            raise ValueError(f"global_batch_size {self.global_batch_size} does not split over {world_size} processes")
        return {
            constants.GLOBAL_BATCH_SIZE: self.global_batch_size,
            constants.GRADIENT_ACCUMULATION_STEPS: 1,
            "micro_batch_size": self.global_batch_size // world_size,
            constants.MAX_SEQUENCE_LENGTH: self.max_sequence_length,
            constants.OPT_NAME: "Adam",
            constants.OPT_BASE_LR: self.learning_rate,
            constants.OPT_ADAM_BETA_1: self.adam_beta_1,
            constants.OPT_ADAM_BETA_2: self.adam_beta_2,
            constants.OPT_ADAM_EPSILON: self.adam_epsilon,
            constants.OPT_WEIGHT_DECAY: self.weight_decay,
            constants.OPT_GRADIENT_CLIP_NORM: self.gradient_clip_norm,
            "opt_sparse_name": "RowWiseAdagrad",
            "opt_sparse_base_learning_rate": self.sparse_learning_rate,
            constants.OPT_LR_WARMUP_STEPS: self.warmup_steps,
            "opt_learning_rate_warmup_start_lr": self.warmup_start_lr,
            "eval_every_data_pct": self.eval_every_data_pct,
        }
