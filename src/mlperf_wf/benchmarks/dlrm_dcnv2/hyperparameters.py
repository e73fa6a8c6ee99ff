"""Tiny-tier hyperparameters of dlrm_dcnv2: the reference's DLRM-DCNv2 family, widths and tables scaled down."""

from __future__ import annotations

from mlperf_logging.mllog import constants
from pydantic import Field, model_validator

from mlperf_wf.config.hyperparameters import TinyHyperparameters

DENSE_LEARNING_RATE_KEY = "mlperf_wf_dense_learning_rate"
"""The tiny tier's own mllog key for the second learning rate (the rules know one; unknown keys are allowed)."""
ADAGRAD_EPSILON = 1e-8
"""dlrm_main.py's ADAGRAD_EPS, which every closed round requires."""


class Hyperparameters(TinyHyperparameters):
    """DLRM-DCNv2 with Adagrad on the generated click logs (reference: dlrm_main.py, README.MD's MLPerf command)."""

    global_batch_size: int = Field(2048, ge=1)
    """Rows per optimizer step over all processes (reference: 65,536)."""
    eval_batch_size: int = Field(16384, ge=1)
    """Rows per evaluation batch (reference: the training batch size)."""
    embedding_dim: int = Field(16, ge=1)
    """Width of every embedding table and of the bottom MLP's output (reference: 128)."""
    dense_arch_layer_sizes: str = "64,16"
    """Bottom MLP widths; the last equals embedding_dim (reference: 512,256,128)."""
    over_arch_layer_sizes: str = "256,64,1"
    """Top MLP widths, the last 1 (reference: 1024,1024,512,256,1)."""
    dcn_num_layers: int = Field(3, ge=1)
    """DCNv2 low-rank cross layers (reference: 3)."""
    dcn_low_rank_dim: int = Field(64, ge=1)
    """Rank of each cross layer (reference: 512)."""
    learning_rate: float = Field(0.1, gt=0)
    """Adagrad learning rate of the embedding tables, logged as opt_base_learning_rate (reference: 0.005 at 65,536, for every parameter)."""
    dense_learning_rate: float = Field(0.01, gt=0)
    """Adagrad learning rate of the MLPs and cross layers (reference: the same as the tables; logged as DENSE_LEARNING_RATE_KEY)."""
    eval_every_samples: int = Field(102_400, ge=1)
    """Training rows between two evaluations (reference: 1/20 of an epoch, about 210 M rows)."""
    max_epochs: int = Field(3, ge=1)
    """Passes over days 0-22 before a run stops without reaching the target (reference: 1)."""

    @model_validator(mode="after")
    def _shapes_agree(self) -> Hyperparameters:
        dense, over = self.widths("dense_arch_layer_sizes"), self.widths("over_arch_layer_sizes")
        if dense[-1] != self.embedding_dim:
            raise ValueError(f"dense_arch_layer_sizes {self.dense_arch_layer_sizes!r} must end at embedding_dim {self.embedding_dim}")
        if over[-1] != 1:
            raise ValueError(f"over_arch_layer_sizes {self.over_arch_layer_sizes!r} must end at 1 (the click logit)")
        return self

    def widths(self, field: str) -> list[int]:
        """A comma-separated layer-size field as numbers."""
        text = getattr(self, field)
        try:
            return [int(k) for k in text.split(",")]
        except ValueError:
            raise ValueError(f"{field} {text!r} is not comma-separated numbers") from None

    def mllog(self, world_size: int) -> dict[str, object]:
        if self.global_batch_size % world_size:
            raise ValueError(f"global_batch_size {self.global_batch_size} does not split over {world_size} processes")
        # The loop's torch.optim.Adagrad gets exactly these (dlrm_main.py logs the same keys, lines 855-891).
        return {
            constants.GLOBAL_BATCH_SIZE: self.global_batch_size,
            constants.GRADIENT_ACCUMULATION_STEPS: 1,
            constants.OPT_NAME: constants.ADAGRAD,
            constants.OPT_BASE_LR: self.learning_rate,
            DENSE_LEARNING_RATE_KEY: self.dense_learning_rate,
            constants.OPT_ADAGRAD_LR_DECAY: 0,
            constants.OPT_WEIGHT_DECAY: 0,
            constants.OPT_ADAGRAD_INITIAL_ACCUMULATOR_VALUE: 0,
            constants.OPT_ADAGRAD_EPSILON: ADAGRAD_EPSILON,
            constants.OPT_LR_WARMUP_STEPS: 0,
            constants.OPT_LR_DECAY_START_STEP: 0,
            constants.OPT_LR_DECAY_STEPS: 0,
        }

    def adagrad_arguments(self) -> dict[str, float]:
        """The keyword arguments of the run's torch.optim.Adagrad (the values mllog() logs); lr is the tables'."""
        return {"lr": self.learning_rate, "lr_decay": 0.0, "weight_decay": 0.0, "initial_accumulator_value": 0.0, "eps": ADAGRAD_EPSILON}
