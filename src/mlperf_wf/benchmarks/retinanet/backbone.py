"""The tiny stand-in of the reference's pretrained backbone file (``resnext50_32x4d-7cdf4587.pth``).

The reference loads torchvision's ImageNet ResNeXt50-32x4d state dict from ``$TORCH_HOME/hub/checkpoints``
into its backbone before training. The tiny tier has no ImageNet: its stand-in is the tiny backbone's
weights after a short supervised pretraining on generated images (is there a shape at each 8x8 cell, and
of which class), saved with ``torch.save`` as a state dict under the reference's file name. The tiny
trainer loads it into its backbone as the reference does, so the detector starts from features that
already respond to shapes, as ResNeXt's ImageNet features do.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from mlperf_wf.benchmarks.retinanet.openimages import CLASSES, IMAGE_SIZE, render

FILE_NAME = "resnext50_32x4d-7cdf4587.pth"
"""The file name torch.hub gives the reference's download (ssd/model/resnet.py:16)."""
BACKBONE_WIDTH = 16
"""The tiny backbone's first-stage width (hyperparameters.backbone_width must agree)."""
PRETRAIN_IMAGES = 1024
PRETRAIN_STEPS = 1000
"""300 steps left features that some detector seeds could not start from on one CPU (mAP stuck near 0.02)."""


def _cell_labels(objects: list[tuple[int, list[int]]], cells: int, stride: int) -> torch.Tensor:
    """Per stride-8 cell: the class of the object whose centre falls in it, else background (len(CLASSES))."""
    labels = torch.full((cells, cells), len(CLASSES), dtype=torch.long)
    for kind, (x0, y0, x1, y1) in objects:
        labels[min(cells - 1, int((y0 + y1) / 2 / stride)), min(cells - 1, int((x0 + x1) / 2 / stride))] = kind
    return labels


def pretrain(seed: int) -> dict[str, torch.Tensor]:
    """The tiny backbone after ``PRETRAIN_STEPS`` of cell classification on freshly generated images."""
    from mlperf_wf.benchmarks.retinanet.detector import Backbone

    torch.manual_seed(seed)
    rng = np.random.default_rng([seed, 7])
    images, labels = [], []
    for _ in range(PRETRAIN_IMAGES):
        pixels, objects = render(rng)
        images.append(torch.from_numpy(pixels).permute(2, 0, 1).float() / 255)
        labels.append(_cell_labels(objects, IMAGE_SIZE // 8, 8))
    images_t, labels_t = torch.stack(images), torch.stack(labels)
    backbone = Backbone(BACKBONE_WIDTH)
    head = torch.nn.Conv2d(backbone.channels[0], len(CLASSES) + 1, 1)
    optimizer = torch.optim.Adam([*backbone.parameters(), *head.parameters()], lr=2e-3)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(PRETRAIN_STEPS):
        batch = torch.randint(0, PRETRAIN_IMAGES, (32,), generator=generator)
        c3 = backbone(images_t[batch])[0]
        loss = torch.nn.functional.cross_entropy(head(c3), labels_t[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return backbone.state_dict()


def generate(out_dir: Path, seed: int) -> list[Path]:
    """Write the pretrained tiny backbone as ``resnext50_32x4d-7cdf4587.pth``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    target = out_dir / FILE_NAME
    torch.save(pretrain(seed), target)
    return [target]
