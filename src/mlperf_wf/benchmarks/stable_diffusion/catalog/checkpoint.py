"""Tiny generator of the sd_checkpoint catalog entry."""

from mlperf_wf.benchmarks.stable_diffusion.tiny_data import generate_checkpoint as generate

__all__ = ["generate"]
