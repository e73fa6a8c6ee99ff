"""A run's folder before each attempt: nothing of an earlier attempt may be read as this one's.

A full-scale reference writes beside its result file: checkpoints (``--output_dir``), data-index caches, the run's
home, per-run scratch. When a job is killed at walltime or fails and SLURM or Snakemake retries it, Snakemake removes
the declared outputs (``result.txt``, ``provenance.json``) but not the rest, and a reference that finds its own
checkpoint resumes from it: the retried run's time to train would leave out the failed attempt's hours. The MLPerf
rules allow no such resume, so every attempt starts from an empty run folder; what was removed is named in the
job's log.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def clear_for_new_attempt(folder: Path) -> list[str]:
    """Empty ``folder`` (created if missing); returns the names removed."""
    folder.mkdir(parents=True, exist_ok=True)
    removed = []
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(entry.name)
    return removed
