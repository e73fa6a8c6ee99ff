"""Tiny-tier hyperparameters of llama2_70b_lora: the reference's optimiser settings on a 2-layer Llama."""

from __future__ import annotations

from mlperf_logging.mllog import constants

from mlperf_wf.config.hyperparameters import TinyHyperparameters


class Hyperparameters(TinyHyperparameters):
    """LoRA fine-tuning of the tiny pretrained Llama (reference: scripts/train.py and run_and_time.sh)."""

    global_batch_size: int = 8
    """Sequences per optimizer step (reference: 8 GPUs x per_device_train_batch_size 1)."""
    micro_batch_size: int = 8
    """Sequences per forward pass and process (capped at global / processes); accumulation = global / (micro x processes)."""
    learning_rate: float = 4e-4
    """Peak AdamW learning rate (reference 4e-4)."""
    weight_decay: float = 1e-4
    """AdamW weight decay (reference 1e-4)."""
    max_grad_norm: float = 0.3
    """Gradient clipping norm (reference 0.3)."""
    warmup_ratio: float = 0.0
    """Linear warm-up as a fraction of max_steps (reference 0)."""
    max_steps: int = 1024
    """Cosine schedule length and step budget (reference 1024)."""
    lora_rank: int = 16
    """LoRA rank; the closed rules require 16."""
    lora_alpha: int = 32
    """LoRA alpha (reference 32)."""
    lora_dropout: float = 0.1
    """LoRA dropout (reference 0.1)."""
    lora_target_modules: str = "q_proj,k_proj,v_proj,o_proj"
    """Comma-separated modules that get adapters (the reference's fused qkv_proj,o_proj; this Llama has them unfused)."""
    eval_every_samples: int = 16
    """Evaluate after this many training samples (reference: every 48 steps of 8; evaluation is cheap here)."""

    def layout(self, world_size: int) -> tuple[int, int]:
        """(micro batch per process, gradient accumulation steps) for ``world_size`` processes."""
        micro = min(self.micro_batch_size, self.global_batch_size // world_size)
        if micro < 1 or self.global_batch_size % (micro * world_size):
            raise ValueError(f"global_batch_size {self.global_batch_size} does not split over {world_size} processes of micro batch {micro}")
        return micro, self.global_batch_size // (micro * world_size)

    def mllog(self, world_size: int) -> dict[str, object]:
        micro, accumulation = self.layout(world_size)
        return {
            constants.GLOBAL_BATCH_SIZE: self.global_batch_size,
            "micro_batch_size": micro,
            constants.GRADIENT_ACCUMULATION_STEPS: accumulation,
            constants.OPT_NAME: "adamw",
            constants.OPT_BASE_LR: self.learning_rate,
            constants.OPT_LR_WARMUP_FACTOR: self.warmup_ratio,
            constants.OPT_LR_TRAINING_STEPS: self.max_steps,
            constants.OPT_ADAMW_WEIGHT_DECAY: self.weight_decay,
            constants.OPT_GRADIENT_CLIP_NORM: self.max_grad_norm,
            constants.LORA_ALPHA: self.lora_alpha,
            "lora_rank": self.lora_rank,
            "lora_dropout": self.lora_dropout,
        }
