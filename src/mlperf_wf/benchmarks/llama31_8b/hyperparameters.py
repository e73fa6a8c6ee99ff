"""Tiny-tier hyperparameters of llama31_8b: the reference's optimiser and schedule on a 2-layer Llama.

Reference values (small_llm_pretraining/nemo at aa344c7; REFERENCE.md): AdamW beta
0.9/0.95, eps 1e-5, weight decay 0.1, clip 1.0, linear warm-up then cosine to 0.1 x the peak over
max_steps 1,200,000 (decay = max_steps - warm-up), sequence 8192, global batch 32, evaluation of 1024
sequences every 12,288.
"""

from __future__ import annotations

from mlperf_logging.mllog import constants

from mlperf_wf.language_models.causal_hyperparameters import CausalLMHyperparameters


class Hyperparameters(CausalLMHyperparameters):
    """Pretraining of a tiny Llama on the Markov C4 stand-in."""

    sequence_length: int = 128
    """Tokens per training sequence (reference 8192; closed rule 8192: not met at tiny size)."""
    global_batch_size: int = 16
    """Sequences per optimizer step (reference 32 on 8 GPUs)."""
    learning_rate: float = 3e-3
    """Peak learning rate (the reference's effective peak is 1e-4 for an 8B model)."""
    end_learning_rate_fraction: float = 0.1
    """Cosine floor as a fraction of the peak (reference min_lr = 0.1 x max_lr)."""
    warmup_steps: int = 20
    """Linear warm-up steps (reference 512 = 16384 // GBS)."""
    max_steps: int = 1_200_000
    """Step budget (closed rule 1,200,000; the run stops at the target long before)."""
    decay_steps: int = 1_200_000 - 20
    """Cosine decay steps (closed rule: max_steps - warm-up)."""
    eval_every_samples: int = 400
    """Evaluate after this many training sequences (reference 12,288)."""
    eval_sequences: int = 256
    """Validation sequences per evaluation (closed rule 1024 of 8192 tokens: not met at tiny size)."""
    hidden_size: int = 64
    """Model width (Llama 3.1 8B: 4096)."""
    layers: int = 2
    """Transformer blocks (8B: 32)."""
    heads: int = 4
    """Attention heads (8B: 32)."""

    def mllog(self, world_size: int) -> dict[str, object]:
        return {
            **self.optimizer_mllog("opt_adamw"),
            "micro_batch_size": self.global_batch_size,  # one process: the trainer refuses more
            constants.OPT_NAME: "adamw",
            "max_steps": self.max_steps,
        }
