"""Tiny generator of the sd_clip_checkpoint catalog entry."""

from mlperf_wf.benchmarks.stable_diffusion.tiny_data import generate_clip as generate

__all__ = ["generate"]
