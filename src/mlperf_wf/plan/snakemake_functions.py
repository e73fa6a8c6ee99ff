"""What the workflow's input, params and resource functions need from Snakemake, and nothing else."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeVar

Function = TypeVar("Function", bound=Callable)


def signature_once(func: Function) -> Function:
    """``func`` with its signature read once: Snakemake reads a rule function's signature (``inspect.signature``) at
    every call, twice for an input function, which was a tenth of a full-scale dry run of all benchmarks (about 17 000
    reads for 900 jobs). Snakemake's own hook (``snakemake.common.overwrite_function_params``) keeps the parameters."""
    from snakemake.common import overwrite_function_params

    overwrite_function_params(func, inspect.signature(func).parameters)
    return func


def hide_shell_commands() -> None:
    """Drop Snakemake's ``Shell command:`` lines from this process's output, keeping everything else it prints (a job's
    error block still names its command). The workflow profile turns them on for the full-scale dry run's review."""
    import logging

    from snakemake.logging import LogEvent

    class NoShellCommands(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return getattr(record, "event", None) != LogEvent.SHELLCMD

    logging.getLogger("snakemake.logging").addFilter(NoShellCommands())
