"""Tiny generator of the sd_coco2014_validation_stats catalog entry."""

from mlperf_wf.benchmarks.stable_diffusion.tiny_data import generate_stats as generate

__all__ = ["generate"]
