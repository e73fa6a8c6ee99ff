"""Tiny-tier hyperparameters of retinanet: the reference's RetinaNet family and optimiser, scaled down."""

from __future__ import annotations

from mlperf_logging.mllog import constants
from pydantic import Field

from mlperf_wf.config.hyperparameters import TinyHyperparameters


class Hyperparameters(TinyHyperparameters):
    """A tiny RetinaNet on the generated OpenImages-layout images (reference: ssd/train.py, config_DGXA100_001x08x032.sh)."""

    global_batch_size: int = 32
    """Images per optimizer step, over all processes (reference: 32 per GPU x 8 GPUs = 256)."""
    eval_batch_size: int = 100
    """Validation images per forward pass (reference: --eval-batch-size, default the training batch)."""
    learning_rate: float = 0.001
    """Adam learning rate after warmup (reference: --lr 0.0001 at a batch of 256; at 0.002 some seeds never left
    mAP 0.02, at 0.004 all collapse)."""
    warmup_epochs: int = Field(1, ge=0)
    """Epochs of linear warmup (reference: --warmup-epochs 1)."""
    warmup_factor: float = Field(0.1, ge=0)
    """Learning-rate multiplier at the first step of warmup (reference: --warmup-factor 1e-3)."""
    epochs: int = Field(10, ge=1)
    """Epoch budget before the run stops without reaching the target (reference: --epochs, NUMEPOCHS=8 in the configs)."""
    image_size: int = 64
    """Input width and height; the generated images already have it (reference: --image-size 800 800)."""
    backbone_width: int = 16
    """Channels of the backbone's first stage (C3/C4/C5 have 4x, 6x, 8x this)."""
    fpn_channels: int = 64
    """FPN and head width (reference: 256)."""
    head_depth: int = 2
    """3x3 convolutions in each head tower before its prediction layer (reference: 4)."""
    anchor_sizes: tuple[float, float, float] = (12.0, 24.0, 48.0)
    """Base anchor size on P3, P4, P5 in pixels (reference: 32 ... 512 on P3-P7 of 800x800 images)."""
    score_threshold: float = 0.05
    """Evaluation: candidates below this score are dropped (reference: score_thresh 0.05)."""
    candidates_per_image: int = 200
    """Evaluation: at most this many candidates per image go to NMS (reference: topk_candidates 1000 per level)."""
    nms_threshold: float = 0.5
    """Evaluation: class-wise NMS IoU threshold (reference: 0.5)."""
    detections_per_image: int = 100
    """Evaluation: detections kept per image, COCOeval's maxDets (reference: 300)."""

    def mllog(self, world_size: int) -> dict[str, object]:
        if self.global_batch_size % world_size:
            raise ValueError(f"global_batch_size {self.global_batch_size} does not split over {world_size} processes")
        return {
            constants.GLOBAL_BATCH_SIZE: self.global_batch_size,
            "local_batch_size": self.global_batch_size // world_size,
            constants.EPOCH_COUNT: self.epochs,
            constants.FIRST_EPOCH_NUM: 0,
            constants.OPT_NAME: constants.ADAM,
            constants.OPT_BASE_LR: self.learning_rate,
            constants.OPT_WEIGHT_DECAY: 0.0,
            constants.OPT_LR_WARMUP_EPOCHS: self.warmup_epochs,
            constants.OPT_LR_WARMUP_FACTOR: self.warmup_factor,
            constants.GRADIENT_ACCUMULATION_STEPS: 1,
        }
