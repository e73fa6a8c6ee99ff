"""The generated image-caption world of the tiny tier: one coloured shape on a dark background, captioned.

It stands in for LAION (training pairs) and COCO-2014 validation (prompts and the images whose statistics
FID compares against): small enough to learn on two cores, structured enough that a caption decides what
the image must show (colour and shape), so a text-conditioned model is needed to match both the image
distribution (FID) and the caption (CLIP score).
"""

from __future__ import annotations

import numpy as np

RESOLUTION = 16
"""Image side in pixels (the reference trains at 512; latents are 1/8 of that, here 1/2)."""
COLOURS = {"red": (0.9, 0.15, 0.1), "green": (0.1, 0.8, 0.2), "blue": (0.15, 0.3, 0.95), "yellow": (0.95, 0.85, 0.1)}
SHAPES = ("square", "circle", "triangle", "cross")
CLASSES = [(colour, shape) for colour in COLOURS for shape in SHAPES]
"""(colour, shape) pairs; a pair's index is the stand-in Inception's class label."""


def caption(colour: str, shape: str) -> str:
    return f"a {colour} {shape}"


def _mask(shape: str, cy: float, cx: float, radius: float) -> np.ndarray:
    y, x = np.mgrid[0:RESOLUTION, 0:RESOLUTION].astype(np.float32) + 0.5
    dy, dx = y - cy, x - cx
    if shape == "square":
        return (np.abs(dy) <= radius) & (np.abs(dx) <= radius)
    if shape == "circle":
        return dy**2 + dx**2 <= radius**2
    if shape == "triangle":
        return (dy <= radius) & (dy >= -radius) & (np.abs(dx) <= (dy + radius) / 2)
    if shape == "cross":
        arm = radius / 2.5
        return ((np.abs(dy) <= arm) & (np.abs(dx) <= radius)) | ((np.abs(dx) <= arm) & (np.abs(dy) <= radius))
    raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")


def sample(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``count`` images (N, 3, 16, 16) float32 in [0, 1], their class labels and captions."""
    labels = rng.integers(0, len(CLASSES), size=count)
    images = np.empty((count, 3, RESOLUTION, RESOLUTION), dtype=np.float32)
    for i, label in enumerate(labels):
        colour, shape = CLASSES[label]
        background = rng.uniform(0.0, 0.2, size=3).astype(np.float32)
        mask = _mask(shape, *rng.uniform(6.0, 10.0, size=2), rng.uniform(3.5, 5.5))
        tint = np.clip(np.asarray(COLOURS[colour], dtype=np.float32) + rng.normal(0, 0.05, size=3), 0, 1)
        image = np.where(mask[None], tint[:, None, None], background[:, None, None])
        images[i] = np.clip(image + rng.normal(0, 0.02, size=image.shape), 0, 1)
    return images, labels, [caption(*CLASSES[label]) for label in labels]
