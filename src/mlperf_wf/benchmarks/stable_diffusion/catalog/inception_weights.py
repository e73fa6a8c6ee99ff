"""Tiny generator of the sd_inception_checkpoint catalog entry."""

from mlperf_wf.benchmarks.stable_diffusion.tiny_data import generate_inception as generate

__all__ = ["generate"]
