"""Tiny generator of the sd_coco2014_validation_prompts catalog entry."""

from mlperf_wf.benchmarks.stable_diffusion.tiny_data import generate_prompts as generate

__all__ = ["generate"]
