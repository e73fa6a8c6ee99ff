"""A tiny RetinaNet in plain torch: the reference's model family, written out (no torchvision here).

The reference (``ssd/model/retinanet.py``, torchvision's RetinaNet) is a ResNeXt50-32x4d
backbone, an FPN over C3-C5 (plus P6/P7), shared classification and regression heads
of four 3x3 convolutions with the classification bias at ``-log((1 - 0.01) / 0.01)``,
nine anchors per position (three octave scales x aspect ratios 0.5/1/2), matching at
IoU >= 0.5 positive and < 0.4 negative with low-quality matches allowed, sigmoid focal loss
(alpha 0.25, gamma 2) normalised by the number of foreground anchors, L1 loss on the box
deltas (``BoxCoder`` weights 1,1,1,1), and at inference the top 1000 candidates per level
over score 0.05, class-wise NMS at 0.5 and 300 detections. The tiny model keeps each part
at small width: a seven-layer conv-BN-ReLU backbone giving C3/C4/C5 at strides 8/16/32,
the FPN at ``fpn_channels`` on P3-P5, heads of two convolutions, 100 detections (COCOeval's
maxDets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional


def _conv(c_in: int, c_out: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class Backbone(nn.Module):
    """Seven conv-BN-ReLU layers; C3, C4, C5 at strides 8, 16, 32 (the reference's ResNeXt stages 2-4)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        w = width
        self.stem = nn.Sequential(_conv(3, w, 2), _conv(w, 2 * w, 2), _conv(2 * w, 2 * w, 1))
        self.c3 = _conv(2 * w, 4 * w, 2)
        self.c4 = nn.Sequential(_conv(4 * w, 6 * w, 2), _conv(6 * w, 6 * w, 1))
        self.c5 = _conv(6 * w, 8 * w, 2)
        self.channels = (4 * w, 6 * w, 8 * w)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        c3 = self.c3(self.stem(x))
        c4 = self.c4(c3)
        return [c3, c4, self.c5(c4)]


class FeaturePyramid(nn.Module):
    """Lateral 1x1 convolutions, top-down nearest upsampling, 3x3 output convolutions (torchvision's FPN)."""

    def __init__(self, in_channels: tuple[int, ...], channels: int) -> None:
        super().__init__()
        self.lateral = nn.ModuleList(nn.Conv2d(c, channels, 1) for c in in_channels)
        self.output = nn.ModuleList(nn.Conv2d(channels, channels, 3, padding=1) for _ in in_channels)

    def forward(self, features: list[torch.Tensor]) -> list[torch.Tensor]:
        inner = self.lateral[-1](features[-1])
        results = [self.output[-1](inner)]
        for level in range(len(features) - 2, -1, -1):
            lateral = self.lateral[level](features[level])
            inner = lateral + functional.interpolate(inner, size=lateral.shape[-2:], mode="nearest")
            results.insert(0, self.output[level](inner))
        return results


class Head(nn.Module):
    """Shared 3x3 convolutions then one prediction convolution, applied to every pyramid level."""

    def __init__(self, channels: int, depth: int, outputs_per_anchor: int, anchors: int, prior: float | None) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for _ in range(depth):
            layers += [nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(inplace=True)]
        self.tower = nn.Sequential(*layers)
        self.predict = nn.Conv2d(channels, anchors * outputs_per_anchor, 3, padding=1)
        self.outputs = outputs_per_anchor
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.normal_(module.weight, std=0.01)
                nn.init.constant_(module.bias, 0.0)
        if prior is not None:
            nn.init.constant_(self.predict.bias, -math.log((1 - prior) / prior))

    def forward(self, levels: list[torch.Tensor]) -> torch.Tensor:
        out = []
        for level in levels:
            y = self.predict(self.tower(level))
            n, _, h, w = y.shape
            out.append(y.view(n, -1, self.outputs, h, w).permute(0, 3, 4, 1, 2).reshape(n, -1, self.outputs))
        return torch.cat(out, dim=1)


@dataclass(frozen=True)
class AnchorSpec:
    """Anchors per pyramid level: base sizes, octave scales and aspect ratios (torchvision's AnchorGenerator)."""

    sizes: tuple[float, ...]
    """Base anchor size at P3, P4, P5 (the reference: 32, 64, 128, 256, 512 on P3-P7 of 800x800 images)."""
    scales: tuple[float, ...] = (1.0, 2 ** (1 / 3), 2 ** (2 / 3))
    ratios: tuple[float, ...] = (0.5, 1.0, 2.0)

    @property
    def per_position(self) -> int:
        return len(self.scales) * len(self.ratios)

    def anchors(self, image_size: int, strides: tuple[int, ...]) -> torch.Tensor:
        """(A, 4) anchors in x0, y0, x1, y1 pixels, level by level, position-major then anchor (the heads' order)."""
        all_levels = []
        for size, stride in zip(self.sizes, strides, strict=True):
            cells = image_size // stride
            shapes = []
            for scale in self.scales:
                for ratio in self.ratios:
                    h = size * scale * math.sqrt(ratio)
                    w = size * scale / math.sqrt(ratio)
                    shapes.append([-w / 2, -h / 2, w / 2, h / 2])
            base = torch.tensor(shapes)
            centres = (torch.arange(cells, dtype=torch.float32) + 0.5) * stride
            cy, cx = torch.meshgrid(centres, centres, indexing="ij")
            shifts = torch.stack([cx, cy, cx, cy], dim=-1).reshape(-1, 1, 4)
            all_levels.append((shifts + base[None]).reshape(-1, 4))
        return torch.cat(all_levels)


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise IoU of x0, y0, x1, y1 boxes."""
    area_a = (a[:, 2] - a[:, 0]).clamp(min=0) * (a[:, 3] - a[:, 1]).clamp(min=0)
    area_b = (b[:, 2] - b[:, 0]).clamp(min=0) * (b[:, 3] - b[:, 1]).clamp(min=0)
    top_left = torch.max(a[:, None, :2], b[None, :, :2])
    bottom_right = torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (bottom_right - top_left).clamp(min=0).prod(dim=2)
    return inter / (area_a[:, None] + area_b[None, :] - inter).clamp(min=1e-9)


BBOX_CLIP = math.log(1000.0 / 16)
"""torchvision BoxCoder's bbox_xform_clip: the largest log size change decoded."""


def encode(anchors: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """Box deltas (dx, dy, dw, dh) of ``boxes`` from ``anchors`` (BoxCoder weights 1, 1, 1, 1)."""
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + aw / 2, anchors[:, 1] + ah / 2
    bw, bh = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    bx, by = boxes[:, 0] + bw / 2, boxes[:, 1] + bh / 2
    return torch.stack([(bx - ax) / aw, (by - ay) / ah, torch.log(bw / aw), torch.log(bh / ah)], dim=1)


def decode(anchors: torch.Tensor, deltas: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`encode`."""
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + aw / 2, anchors[:, 1] + ah / 2
    dw, dh = deltas[:, 2].clamp(max=BBOX_CLIP), deltas[:, 3].clamp(max=BBOX_CLIP)
    cx, cy = deltas[:, 0] * aw + ax, deltas[:, 1] * ah + ay
    w, h = torch.exp(dw) * aw, torch.exp(dh) * ah
    return torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=1)


def nms(boxes: torch.Tensor, scores: torch.Tensor, threshold: float) -> torch.Tensor:
    """Greedy non-maximum suppression: indices kept, highest score first (torchvision.ops.nms's result)."""
    order = scores.argsort(descending=True)
    iou = box_iou(boxes[order], boxes[order])
    suppressed = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for i in range(len(order)):
        if suppressed[i]:
            continue
        keep.append(i)
        suppressed |= iou[i] > threshold
    return order[torch.tensor(keep, dtype=torch.long)]


def batched_nms(boxes: torch.Tensor, scores: torch.Tensor, labels: torch.Tensor, threshold: float) -> torch.Tensor:
    """NMS within each class (torchvision's coordinate-offset trick: boxes of different classes never overlap)."""
    if len(boxes) == 0:
        return torch.zeros(0, dtype=torch.long)
    offset = labels.to(boxes) * (boxes.max() + 1)
    return nms(boxes + offset[:, None], scores, threshold)


class RetinaNet(nn.Module):
    """Backbone + FPN + classification and box heads over fixed anchors."""

    def __init__(self, num_classes: int, image_size: int, width: int, fpn_channels: int, head_depth: int, anchor_spec: AnchorSpec) -> None:
        super().__init__()
        self.backbone = Backbone(width)
        self.fpn = FeaturePyramid(self.backbone.channels, fpn_channels)
        self.num_classes = num_classes
        self.classification = Head(fpn_channels, head_depth, num_classes, anchor_spec.per_position, prior=0.01)
        self.regression = Head(fpn_channels, head_depth, 4, anchor_spec.per_position, prior=None)
        self.register_buffer("anchors", anchor_spec.anchors(image_size, (8, 16, 32)), persistent=False)

    def freeze_pretrained_backbone(self) -> None:
        """As the reference treats its ImageNet backbone (torchvision's FrozenBatchNorm2d): every batch norm of the
        backbone keeps its pretrained statistics and affine values; the convolutions train (the reference also
        freezes conv1 and layer1, trainable_backbone_layers=3: the tiny stem is too small to freeze and still learn)."""
        for module in self.backbone.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.requires_grad_(False)
        self._frozen_backbone = True
        self.train(self.training)

    def train(self, mode: bool = True) -> RetinaNet:
        super().train(mode)
        if getattr(self, "_frozen_backbone", False):
            for module in self.backbone.modules():
                if isinstance(module, nn.BatchNorm2d):
                    module.eval()
        return self

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(class logits (N, A, C), box deltas (N, A, 4))."""
        levels = self.fpn(self.backbone(images))
        return self.classification(levels), self.regression(levels)


def match(anchors: torch.Tensor, boxes: torch.Tensor, high: float = 0.5, low: float = 0.4) -> torch.Tensor:
    """Index of the box each anchor regresses to; -1 background, -2 ignored (between ``low`` and ``high``).

    As torchvision's Matcher with allow_low_quality_matches: each box also claims the anchors
    that overlap it most, even below ``high``.
    """
    if len(boxes) == 0:
        return torch.full((len(anchors),), -1, dtype=torch.long)
    iou = box_iou(boxes, anchors)
    best, index = iou.max(dim=0)
    matched = index.clone()
    matched[best < high] = -2
    matched[best < low] = -1
    best_per_box = iou.max(dim=1, keepdim=True).values
    # A box that overlaps no anchor at all claims none (torchvision would give it every anchor at IoU 0).
    _, anchor_ids = torch.nonzero((iou == best_per_box) & (best_per_box > 0), as_tuple=True)
    matched[anchor_ids] = index[anchor_ids]
    return matched


@dataclass
class AnchorTargets:
    """What each anchor of a batch of images must predict: the matching of :func:`match`, made once per image.

    Matching depends only on the anchors and the ground-truth boxes, so it is computed once per image (and
    per flip) rather than at every step; the loss is the reference's all the same."""

    classes: torch.Tensor
    """(N, A) long: the matched box's class, -1 background, -2 ignored."""
    deltas: torch.Tensor
    """(N, A, 4): encoded deltas of the matched box (zero where not foreground)."""

    @classmethod
    def build(cls, anchors: torch.Tensor, targets: list[dict[str, torch.Tensor]]) -> AnchorTargets:
        """:func:`match` for every image at once (boxes padded to the most any image has)."""
        most = max(1, max(len(t["boxes"]) for t in targets))
        boxes = torch.zeros(len(targets), most, 4)
        labels = torch.zeros(len(targets), most, dtype=torch.long)
        valid = torch.zeros(len(targets), most, dtype=torch.bool)
        for i, target in enumerate(targets):
            n = len(target["boxes"])
            boxes[i, :n], labels[i, :n], valid[i, :n] = target["boxes"], target["labels"], True
        iou = box_iou(boxes.reshape(-1, 4), anchors).reshape(len(targets), most, len(anchors))  # (N, M, A)
        iou = torch.where(valid[:, :, None], iou, torch.full_like(iou, -1.0))
        best, index = iou.max(dim=1)
        matched = torch.where(best < 0.4, -1, torch.where(best < 0.5, -2, index))
        best_per_box = iou.max(dim=2, keepdim=True).values
        claimed = ((iou == best_per_box) & (best_per_box > 0)).any(dim=1)
        matched = torch.where(claimed, index, matched)
        foreground = matched >= 0
        safe = matched.clamp(min=0)
        classes = torch.where(foreground, labels.gather(1, safe), matched)
        goal_boxes = boxes.gather(1, safe[:, :, None].expand(-1, -1, 4))
        deltas = torch.zeros(len(targets), len(anchors), 4)
        deltas[foreground] = encode(anchors.expand(len(targets), -1, -1)[foreground], goal_boxes[foreground])
        return cls(classes, deltas)

    def __getitem__(self, index: torch.Tensor) -> AnchorTargets:
        return AnchorTargets(self.classes[index], self.deltas[index])


def detection_loss(logits: torch.Tensor, deltas: torch.Tensor, targets: AnchorTargets) -> torch.Tensor:
    """Focal classification loss + L1 box loss, each normalised by the image's foreground anchors, averaged over
    the images (torchvision's RetinaNetClassificationHead / RetinaNetRegressionHead compute_loss)."""
    foreground = targets.classes >= 0
    valid = (targets.classes != -2).unsqueeze(-1)
    n_fg = foreground.sum(dim=1).clamp(min=1).to(logits.dtype)
    wanted = functional.one_hot(targets.classes.clamp(min=0), logits.shape[-1]).to(logits.dtype) * foreground.unsqueeze(-1)
    p = torch.sigmoid(logits)
    ce = functional.binary_cross_entropy_with_logits(logits, wanted, reduction="none")
    p_t = p * wanted + (1 - p) * (1 - wanted)
    focal = (0.25 * wanted + 0.75 * (1 - wanted)) * ce * (1 - p_t) ** 2
    cls_loss = (focal * valid).sum(dim=(1, 2)) / n_fg
    box_loss = ((deltas - targets.deltas).abs().sum(-1) * foreground).sum(dim=1) / n_fg
    return (cls_loss + box_loss).mean()


@torch.no_grad()
def postprocess(
    model: RetinaNet, logits: torch.Tensor, deltas: torch.Tensor, image_size: int, score_thresh: float, candidates: int, nms_thresh: float, detections: int
) -> list[dict[str, torch.Tensor]]:
    """Per image: the top ``candidates`` (anchor, class) scores over ``score_thresh``, decoded, clipped, class-wise NMS, best ``detections``."""
    results = []
    for logit, delta in zip(logits, deltas, strict=True):
        scores = torch.sigmoid(logit).flatten()
        keep = scores > score_thresh
        idx = torch.nonzero(keep).squeeze(1)
        top = scores[idx].topk(min(candidates, len(idx))).indices
        idx = idx[top]
        anchor_idx, labels = idx // model.num_classes, idx % model.num_classes
        boxes = decode(model.anchors[anchor_idx], delta[anchor_idx]).clamp(0, image_size)
        kept = batched_nms(boxes, scores[idx], labels, nms_thresh)[:detections]
        results.append({"boxes": boxes[kept], "scores": scores[idx][kept], "labels": labels[kept]})
    return results
