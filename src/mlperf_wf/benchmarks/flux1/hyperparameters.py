"""Tiny-tier hyperparameters of flux1: the reference's optimiser and recipe on a tiny FLUX transformer.

Reference values (T: = torchtitan/experiments/flux/ at 9603aa83; ``train_configs/flux_schnell_mlperf_preprocessed.toml``
and torchtitan's config defaults): AdamW, lr 1e-4, eps 1e-8 (toml), betas 0.9/0.95 and weight decay 0.1 (the rounds'
closed rules), warm-up 0 and no decay (toml ``warmup_steps = 0``, ``decay_ratio = 0.0``), gradient clipping 1.0
(``max_norm``), caption dropout 0.1 (``classifer_free_guidance_prob``), batch 16 per GPU, evaluation every 262,144
samples of the 29,696-sample COCO set.
"""

from __future__ import annotations

from mlperf_logging.mllog import constants
from pydantic import model_validator

from mlperf_wf.config.hyperparameters import TinyHyperparameters


class Hyperparameters(TinyHyperparameters):
    """Rectified-flow training of a tiny FluxTransformer2DModel on the stand-in encodings."""

    global_batch_size: int = 32
    """Samples per optimizer step (reference: 16 per GPU x 32 GPUs = 512 on run.sub's 4 nodes)."""
    learning_rate: float = 5e-3
    """Constant AdamW learning rate (reference 1e-4 for the 11.9B model; a 1.2M-parameter model takes a larger one)."""
    warmup_steps: int = 0
    """Linear warm-up steps (reference 0; closed rule >= 0)."""
    adam_beta1: float = 0.9
    """AdamW beta 1 (closed rule 0.9)."""
    adam_beta2: float = 0.95
    """AdamW beta 2 (closed rule 0.95)."""
    adam_epsilon: float = 1e-8
    """AdamW epsilon (closed rule 1e-08)."""
    weight_decay: float = 0.1
    """AdamW weight decay (closed rule 0.1)."""
    gradient_clip_norm: float = 1.0
    """Global gradient-norm clip (closed rule 1.0)."""
    caption_dropout: float = 0.1
    """Probability that a training sample's captions are replaced by the empty encodings (reference 0.1)."""
    eval_every_samples: int = 512
    """Evaluate after this many training samples (closed rule 262,144: not met at tiny size); a multiple of the batch."""
    eval_batch_size: int = 128
    """Validation samples per forward pass (reference ``eval.batch_size`` 16 per GPU)."""
    max_train_samples: int = 32_768
    """Sample budget: a run that has not reached the target by then stops as aborted."""
    double_blocks: int = 1
    """Double-stream (joint text/image) blocks (FLUX.1-schnell: 19)."""
    single_blocks: int = 2
    """Single-stream blocks (FLUX.1-schnell: 38)."""
    heads: int = 4
    """Attention heads (FLUX.1: 24)."""
    head_dim: int = 32
    """Width of one head (FLUX.1: 128); the rotary axes split it 8/12/12 (FLUX.1: 16/56/56)."""

    @model_validator(mode="after")
    def _shapes_agree(self) -> Hyperparameters:
        if self.eval_every_samples % self.global_batch_size:
            raise ValueError(f"eval_every_samples {self.eval_every_samples} is not a multiple of global_batch_size {self.global_batch_size}")
        if self.head_dim % 4:
            raise ValueError(f"head_dim {self.head_dim} must split into the three rotary axes (a multiple of 4)")
        return self

    def rope_axes(self) -> tuple[int, int, int]:
        """Rotary dimensions of the (text, row, column) position axes, summing to ``head_dim``."""
        quarter = self.head_dim // 4
        return quarter, (self.head_dim - quarter) // 2, self.head_dim - quarter - (self.head_dim - quarter) // 2

    def mllog(self, world_size: int) -> dict[str, object]:
        if world_size != 1:
            raise ValueError(f"the tiny flux1 trainer runs one process (got {world_size})")
        return {
            constants.GLOBAL_BATCH_SIZE: self.global_batch_size,
            "micro_batch_size": self.global_batch_size,
            constants.GRADIENT_ACCUMULATION_STEPS: 1,
            constants.OPT_NAME: constants.ADAMW,
            constants.OPT_BASE_LR: self.learning_rate,
            constants.OPT_LR_WARMUP_STEPS: self.warmup_steps,
            constants.OPT_ADAMW_BETA_1: self.adam_beta1,
            constants.OPT_ADAMW_BETA_2: self.adam_beta2,
            constants.OPT_ADAMW_EPSILON: self.adam_epsilon,
            constants.OPT_ADAMW_WEIGHT_DECAY: self.weight_decay,
            constants.OPT_GRADIENT_CLIP_NORM: self.gradient_clip_norm,
            "evaluation_frequency": self.eval_every_samples,
        }
