"""A full-scale launch rendered as the train job's shell line, for tests that read the line a launcher makes."""

from __future__ import annotations

from mlperf_wf.config.registry import BenchmarkDef, Container
from mlperf_wf.plan.launch import Launch, RunPaths, full_scale_spec
from mlperf_wf.run import launchers


def full_scale(bench: BenchmarkDef, run: int, seed: int, paths: RunPaths, launch: Launch, image: Container | None = None) -> str:
    """The shell line of one full-scale run (:func:`mlperf_wf.plan.launch.full_scale_spec` through
    :func:`mlperf_wf.run.launchers.job_line`): page-cache drop, raised limits, the folders bound, the launch."""
    return launchers.job_line(full_scale_spec(bench, run, seed, paths, launch, image))
