"""Tiny stand-in of ``flux1_cc12m_preprocessed``: the training encodings, a ``save_to_disk`` folder in the reference's
schema (``encodings.py``) drawn from the stand-in world (``tiny_world.py``)."""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.benchmarks.flux1 import encodings, tiny_world

SAMPLES = 4096
"""Training samples (the real subset: 1,099,776); the reference loops over them (``infinite=True``)."""


def generate(out_dir: Path, seed: int) -> list[Path]:
    return encodings.save_folder(tiny_world.split(SAMPLES, seed, timesteps=False, key_prefix="cc12m-"), out_dir, shards=2)
