"""The FID Inception-v3 (pytorch-fid's ``FIDInceptionA/C/E_1/E_2``, the network the reference's
``ldm/modules/fid/inception.py`` builds), written here in plain torch because torchvision cannot be installed.

It reads a state dict in the layout of ``pt_inception-2015-12-05-6726825d.pth`` (the reference's
``inception_weights_url``): the same module names (``Conv2d_1a_3x3.conv.weight``, ``Mixed_5b.branch_pool.bn.running_var``,
``fc.weight``...). Every width is the published width divided by one ``width_divisor`` read from the file
(``Conv2d_1a_3x3`` has 32 filters in the real weights, so the divisor is 1 there); the project's stand-in is the
same network at a sixteenth of the width, trained on the generated images. Loading is strict: a missing,
extra or mis-shaped tensor is an error naming the file.

Features are the 2048-d (2048/divisor) pool3 activations after resizing to 299 x 299 (bilinear) and scaling
to [-1, 1], as pytorch-fid's ``resize_input=True, normalize_input=True``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from torch.nn import functional

from mlperf_wf.errors import UserError

FID_RESOLUTION = 299
PUBLISHED_STEM_WIDTH = 32
"""Filters of Conv2d_1a_3x3 in the published weights."""


class BasicConv2d(nn.Module):
    def __init__(self, cin: int, cout: int, kernel, stride=1, padding=0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.relu(self.bn(self.conv(x)))


def _avg(x: torch.Tensor) -> torch.Tensor:
    # pytorch-fid's FID blocks do not count the padding (the TF graph's behaviour).
    return functional.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)


class InceptionA(nn.Module):
    def __init__(self, cin: int, pool: int, w) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, w(64), 1)
        self.branch5x5_1 = BasicConv2d(cin, w(48), 1)
        self.branch5x5_2 = BasicConv2d(w(48), w(64), 5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, w(64), 1)
        self.branch3x3dbl_2 = BasicConv2d(w(64), w(96), 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(w(96), w(96), 3, padding=1)
        self.branch_pool = BasicConv2d(cin, pool, 1)

    def forward(self, x):
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([self.branch1x1(x), b5, b3, self.branch_pool(_avg(x))], 1)


class InceptionB(nn.Module):
    def __init__(self, cin: int, w) -> None:
        super().__init__()
        self.branch3x3 = BasicConv2d(cin, w(384), 3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, w(64), 1)
        self.branch3x3dbl_2 = BasicConv2d(w(64), w(96), 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(w(96), w(96), 3, stride=2)

    def forward(self, x):
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([self.branch3x3(x), b3, functional.max_pool2d(x, 3, stride=2)], 1)


class InceptionC(nn.Module):
    def __init__(self, cin: int, c7: int, w) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, w(192), 1)
        self.branch7x7_1 = BasicConv2d(cin, c7, 1)
        self.branch7x7_2 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, w(192), (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(cin, c7, 1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, w(192), (1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(cin, w(192), 1)

    def forward(self, x):
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        d = x
        for layer in (self.branch7x7dbl_1, self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4, self.branch7x7dbl_5):
            d = layer(d)
        return torch.cat([self.branch1x1(x), b7, d, self.branch_pool(_avg(x))], 1)


class InceptionD(nn.Module):
    def __init__(self, cin: int, w) -> None:
        super().__init__()
        self.branch3x3_1 = BasicConv2d(cin, w(192), 1)
        self.branch3x3_2 = BasicConv2d(w(192), w(320), 3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(cin, w(192), 1)
        self.branch7x7x3_2 = BasicConv2d(w(192), w(192), (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(w(192), w(192), (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(w(192), w(192), 3, stride=2)

    def forward(self, x):
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return torch.cat([b3, b7, functional.max_pool2d(x, 3, stride=2)], 1)


class InceptionE(nn.Module):
    """FIDInceptionE_1 (average pool, padding not counted) or FIDInceptionE_2 (max pool)."""

    def __init__(self, cin: int, w, max_pool: bool) -> None:
        super().__init__()
        self.max_pool = max_pool
        self.branch1x1 = BasicConv2d(cin, w(320), 1)
        self.branch3x3_1 = BasicConv2d(cin, w(384), 1)
        self.branch3x3_2a = BasicConv2d(w(384), w(384), (1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(w(384), w(384), (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(cin, w(448), 1)
        self.branch3x3dbl_2 = BasicConv2d(w(448), w(384), 3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(w(384), w(384), (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(w(384), w(384), (3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(cin, w(192), 1)

    def forward(self, x):
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        d = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        d = torch.cat([self.branch3x3dbl_3a(d), self.branch3x3dbl_3b(d)], 1)
        pooled = functional.max_pool2d(x, 3, stride=1, padding=1) if self.max_pool else _avg(x)
        return torch.cat([self.branch1x1(x), b3, d, self.branch_pool(pooled)], 1)


class FIDInceptionV3(nn.Module):
    """pool3 features (and, for training the stand-in, ``fc`` logits) of the FID Inception-v3."""

    def __init__(self, width_divisor: int = 1, num_classes: int = 1008) -> None:
        super().__init__()
        self.width_divisor = width_divisor

        def w(channels: int) -> int:
            return channels // width_divisor

        self.Conv2d_1a_3x3 = BasicConv2d(3, w(32), 3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(w(32), w(32), 3)
        self.Conv2d_2b_3x3 = BasicConv2d(w(32), w(64), 3, padding=1)
        self.Conv2d_3b_1x1 = BasicConv2d(w(64), w(80), 1)
        self.Conv2d_4a_3x3 = BasicConv2d(w(80), w(192), 3)
        self.Mixed_5b = InceptionA(w(192), w(32), w)
        self.Mixed_5c = InceptionA(w(256), w(64), w)
        self.Mixed_5d = InceptionA(w(288), w(64), w)
        self.Mixed_6a = InceptionB(w(288), w)
        self.Mixed_6b = InceptionC(w(768), w(128), w)
        self.Mixed_6c = InceptionC(w(768), w(160), w)
        self.Mixed_6d = InceptionC(w(768), w(160), w)
        self.Mixed_6e = InceptionC(w(768), w(192), w)
        self.Mixed_7a = InceptionD(w(768), w)
        self.Mixed_7b = InceptionE(w(1280), w, max_pool=False)
        self.Mixed_7c = InceptionE(w(2048), w, max_pool=True)
        self.fc = nn.Linear(w(2048), num_classes)

    @property
    def feature_dim(self) -> int:
        return self.fc.in_features

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """pool3 activations of images in [0, 1] (N, 3, H, W)."""
        x = functional.interpolate(images, size=(FID_RESOLUTION, FID_RESOLUTION), mode="bilinear", align_corners=False)
        x = 2 * x - 1
        x = functional.max_pool2d(self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x))), 3, stride=2)
        x = functional.max_pool2d(self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x)), 3, stride=2)
        for name in ("Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e", "Mixed_7a", "Mixed_7b", "Mixed_7c"):
            x = getattr(self, name)(x)
        return functional.adaptive_avg_pool2d(x, 1).flatten(1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(images))


def load(path: Path) -> FIDInceptionV3:
    """The network of a ``pt_inception``-layout state dict (published or stand-in), strictly loaded, in eval mode."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError) as err:
        raise UserError(f"{path}: not a torch state dict ({err})") from None
    stem = state.get("Conv2d_1a_3x3.conv.weight") if isinstance(state, dict) else None
    if stem is None or "fc.weight" not in state:
        raise UserError(f"{path}: no Conv2d_1a_3x3.conv.weight / fc.weight; expected the layout of pt_inception-2015-12-05-6726825d.pth")
    filters = int(stem.shape[0])
    if filters <= 0 or PUBLISHED_STEM_WIDTH % filters:
        raise UserError(f"{path}: Conv2d_1a_3x3 has {filters} filters; allowed: a divisor of {PUBLISHED_STEM_WIDTH} (32 in the published weights)")
    model = FIDInceptionV3(PUBLISHED_STEM_WIDTH // filters, int(state["fc.weight"].shape[0]))
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        first = str(err).strip().splitlines()
        raise UserError(f"{path}: does not match the FID Inception-v3 layout at width 1/{model.width_divisor}: {' '.join(first[:3])[:300]}") from None
    return model.eval()
