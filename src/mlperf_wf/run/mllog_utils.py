"""mlperf_logging.mllog set-up shared by the tiny trainers.

Only rank 0 writes: the compliance checker does not de-duplicate lines, so a
key logged by every rank would break its EXACTLY_ONE rules.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mlperf_logging import mllog

import mlperf_wf
from mlperf_wf.errors import WriteError
from mlperf_wf.run.page_cache import drop_on_this_node


@dataclass(frozen=True)
class Submission:
    """Who and what a result is logged for."""

    org: str
    """``submission_org``."""
    platform: str
    """``submission_platform``: the system name."""
    division: str
    """``submission_division``: closed or open."""
    status: str
    """``submission_status``: onprem, cloud, preview or research."""


def _raise_write_errors(handler: logging.FileHandler) -> None:
    """``logging`` prints a failed write and goes on (a full disk left a run exiting 0 with its log cut mid-line);
    this handler raises instead. (The reference images get the same from containers/hooks/mlperf_wf_mllog.py.)"""

    def handle_error(record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        raise WriteError(f"{handler.baseFilename}: writing the run's log failed: {error}") from error

    handler.handleError = handle_error  # type: ignore[method-assign]


class RunLogger:
    """Thin wrapper over ``mllog`` that writes only on rank 0."""

    def __init__(self, result_file: Path, rank: int = 0) -> None:
        self.rank = rank
        self._logger = mllog.get_mllogger()
        if rank == 0:
            # mllog.config adds a file handler per call; drop earlier ones so a
            # process that logs several runs writes each run to its own file only.
            for handler in list(self._logger.logger.handlers):
                if isinstance(handler, logging.FileHandler):
                    self._logger.logger.removeHandler(handler)
                    handler.close()
            result_file.parent.mkdir(parents=True, exist_ok=True)
            result_file.unlink(missing_ok=True)
            mllog.config(filename=str(result_file), default_stack_offset=2, root_dir=str(Path(mlperf_wf.__file__).parent))
            for handler in self._logger.logger.handlers:
                if isinstance(handler, logging.FileHandler):
                    _raise_write_errors(handler)

    def event(self, key: str, value: object = None, metadata: dict | None = None) -> None:
        if self.rank == 0:
            self._logger.event(key=key, value=value, metadata=metadata)

    def start(self, key: str, value: object = None, metadata: dict | None = None) -> None:
        if self.rank == 0:
            self._logger.start(key=key, value=value, metadata=metadata)

    def end(self, key: str, value: object = None, metadata: dict | None = None) -> None:
        if self.rank == 0:
            self._logger.end(key=key, value=value, metadata=metadata)


def clear_caches() -> bool:
    """Flush dirty pages and drop the page cache as the rules ask (``page_cache.drop_on_this_node``, the line every
    full-scale run uses); return whether it happened. Needs root or password-less sudo. The result is logged as
    ``cache_clear``'s value, so a run that could not clear says so instead of claiming it did."""
    try:
        done = subprocess.run(["bash", "-c", drop_on_this_node()], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def rank_from_env() -> int:
    """This process's rank under torchrun/srun, 0 when not distributed."""
    return int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
