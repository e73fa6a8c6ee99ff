"""Tiny stand-in of ``flux1_coco_preprocessed``: the validation encodings with their timestep column (``i % 8``), in the
reference's schema (``encodings.py``), drawn with their own seed from the stand-in world (``tiny_world.py``)."""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.benchmarks.flux1 import encodings, tiny_world

SAMPLES = 512
"""Validation samples, 64 per timestep (the real subset: 29,696, 3,712 per timestep)."""


def generate(out_dir: Path, seed: int) -> list[Path]:
    return encodings.save_folder(tiny_world.split(SAMPLES, seed, timesteps=True, key_prefix="coco-"), out_dir)
