"""What every tiny-scale trainer receives for one run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mlperf_wf.mllog_utils import Submission


@dataclass(frozen=True)
class RunSpec:
    """One training run."""

    data_dir: Path
    """The benchmark's prepared dataset (``resources/<scale>/prepared/<benchmark>/dataset``)."""
    checkpoint_dir: Path | None
    """Pretrained checkpoint, for benchmarks that start from one (None otherwise)."""
    result_file: Path
    """mllog output."""
    seed: int
    """Run seed."""
    target: float
    """Quality target from the compliance rules."""
    submission: Submission
    """submission_* values."""
    config_filename: str
    """Benchmark definition the run used (logged as config_filename where the ruleset asks for it)."""
