"""Tiny stand-in of ``flux1_empty_encodings``: the empty prompt's T5 and CLIP encodings (``tiny_world.py``), float16 with
a batch of 1 as the reference's save_empty_encodings.py writes them."""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.benchmarks.flux1 import tiny_world


def generate(out_dir: Path, seed: int) -> list[Path]:
    del seed  # the empty prompt belongs to the world, shared by every split
    return tiny_world.write_empty(out_dir)
