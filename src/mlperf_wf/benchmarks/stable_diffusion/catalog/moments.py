"""Tiny generator of the laion_400m_filtered_moments catalog entry."""

from mlperf_wf.benchmarks.stable_diffusion.tiny_data import generate_moments as generate

__all__ = ["generate"]
