"""Tiny-tier hyperparameters of rgat: the reference's R-GAT family, widths and fan-out scaled down."""

from __future__ import annotations

from mlperf_logging.mllog import constants
from pydantic import model_validator

from mlperf_wf.config.hyperparameters import TinyHyperparameters


class Hyperparameters(TinyHyperparameters):
    """R-GAT with neighbour sampling on the generated IGBH-shaped graph (reference: train_rgnn_multi_gpu.py)."""

    global_batch_size: int = 512
    """Seed papers per optimizer step, over all processes (reference: 512 per GPU x 8 GPUs = 4096, the rgat_ref_4096 RCP)."""
    val_batch_size: int = 2048
    """Seed papers per evaluation batch."""
    fan_out: str = "10,5"
    """In-neighbours sampled per hop and edge type, first hop first (reference: 15,10,5)."""
    num_layers: int = 2
    """R-GAT layers; one sampling hop each (reference: 3; two reach the target in a seventh of the CPU time,
    and three with a smaller fan-out did not converge)."""
    hidden_channels: int = 32
    """Hidden width (reference: 512)."""
    num_heads: int = 4
    """Attention heads per GATConv (reference: 4)."""
    dropout: float = 0.2
    """Dropout after each hidden layer (reference: 0.2)."""
    learning_rate: float = 0.01
    """Adam learning rate (reference: 0.001 at a batch of 512 x 8 GPUs)."""
    weight_decay: float = 0.0
    """Adam weight decay (reference: 0)."""
    eval_every_epochs: float = 0.25
    """Evaluate after this fraction of an epoch (reference: 0.05; evaluation is relatively dearer on 2 CPU cores)."""
    max_epochs: int = 10
    """Epoch budget before the run stops without reaching the target."""

    @model_validator(mode="after")
    def _shapes_agree(self) -> Hyperparameters:
        self.fan_outs()
        if self.hidden_channels % self.num_heads:
            raise ValueError(f"hidden_channels {self.hidden_channels} is not divisible by num_heads {self.num_heads}")
        return self

    def fan_outs(self) -> list[int]:
        """``fan_out`` as numbers, one per layer."""
        try:
            fan = [int(k) for k in self.fan_out.split(",")]
        except ValueError:
            raise ValueError(f"fan_out {self.fan_out!r} is not comma-separated numbers") from None
        if len(fan) != self.num_layers:
            raise ValueError(f"fan_out {self.fan_out!r} has {len(fan)} hops but num_layers is {self.num_layers}")
        return fan

    def mllog(self, world_size: int) -> dict[str, object]:
        if self.global_batch_size % world_size:
            raise ValueError(f"global_batch_size {self.global_batch_size} does not split over {world_size} processes")
        return {
            constants.GLOBAL_BATCH_SIZE: self.global_batch_size,
            constants.GRADIENT_ACCUMULATION_STEPS: 1,
            constants.OPT_NAME: "adam",
            constants.OPT_BASE_LR: self.learning_rate,
        }
