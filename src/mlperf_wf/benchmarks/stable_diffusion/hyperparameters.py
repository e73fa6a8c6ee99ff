"""Tiny-tier hyperparameters of stable_diffusion: the reference's objective, schedule and optimiser on a tiny UNet.

Reference values (retired_benchmarks/stable_diffusion at aa344c7, configs/train_32x08x08.yaml and
ldm/models/diffusion/ddpm.py): v-parameterisation, 1000 timesteps with the scaled-linear betas
0.00085..0.0120, AdamW (0.9, 0.999, 1e-8, weight decay 0.01), LR = base_learning_rate 1.25e-7 x GBS
(main.py's scale_lr), linear warm-up over 1000 steps (LambdaLinearScheduler), GBS 2048 (32 x 8 x 8),
validation every 512,000 images on 30,000 COCO prompts with DDIM 50 steps, eta 0, guidance 8.
"""

from __future__ import annotations

from mlperf_logging.mllog import constants

from mlperf_wf.config.hyperparameters import TinyHyperparameters


class Hyperparameters(TinyHyperparameters):
    """A tiny UNet2DConditionModel on the generated shape world's latent moments."""

    global_batch_size: int = 32
    """Latents per optimizer step (reference 2048 = 32 nodes x 8 GPUs x 8)."""
    base_learning_rate: float = 5e-5
    """Per-sample LR; the LR is this x global_batch_size, main.py's scale_lr (reference 1.25e-7, i.e. 2.56e-4 at GBS 2048)."""
    warmup_steps: int = 20
    """Linear warm-up from 1e-6 x LR (LambdaLinearScheduler f_start) to LR (reference 1000)."""
    adam_beta1: float = 0.9
    """AdamW beta 1 (reference ddpm.py:1640 and the closed rules: 0.9)."""
    adam_beta2: float = 0.999
    """AdamW beta 2 (reference and closed rules: 0.999)."""
    adam_epsilon: float = 1e-8
    """AdamW epsilon (reference and closed rules: 1e-8)."""
    weight_decay: float = 0.01
    """AdamW weight decay (reference and closed rules: 0.01)."""
    timesteps: int = 1000
    """Diffusion steps of the training schedule (reference 1000)."""
    linear_start: float = 0.00085
    """First beta of the scaled-linear schedule (reference linear_start)."""
    linear_end: float = 0.012
    """Last beta of the scaled-linear schedule (reference linear_end)."""
    parameterization: str = "v"
    """Prediction target: v (reference) or eps."""
    model_channels: int = 16
    """UNet width of the first block (reference 320)."""
    eval_every_samples: int = 1024
    """Evaluate every this many training samples (reference 512,000)."""
    eval_prompts: int = 256
    """Validation prompts per evaluation: all of the tiny prompts file (reference all 30,000)."""
    sampler_steps: int = 10
    """DDIM steps per generated image (reference 50), eta 0."""
    guidance_scale: float = 1.0
    """Classifier-free guidance scale against the empty prompt (reference 8.0). The reference trains without
    dropping captions, so the empty prompt's prediction is never trained; at tiny scale guidance 3 raised the
    stand-in FID from 237 to 612 after 50 steps (README), so the tiny tier samples unguided."""
    max_samples: int = 16384
    """Sample budget before the run stops without reaching the targets."""

    def mllog(self, world_size: int) -> dict[str, object]:
        if self.global_batch_size % world_size:
            raise ValueError(f"global_batch_size {self.global_batch_size} does not split over {world_size} processes")
        return {
            constants.GLOBAL_BATCH_SIZE: self.global_batch_size,
            constants.GRADIENT_ACCUMULATION_STEPS: 1,
            constants.OPT_NAME: constants.ADAMW,
            constants.OPT_ADAMW_BETA_1: self.adam_beta1,
            constants.OPT_ADAMW_BETA_2: self.adam_beta2,
            constants.OPT_ADAMW_EPSILON: self.adam_epsilon,
            constants.OPT_ADAMW_WEIGHT_DECAY: self.weight_decay,
            constants.OPT_BASE_LR: self.base_learning_rate * self.global_batch_size,
            constants.OPT_LR_WARMUP_STEPS: self.warmup_steps,
        }
