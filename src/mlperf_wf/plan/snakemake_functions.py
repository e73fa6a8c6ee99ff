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


def wrap_long_lines() -> None:
    """Print a long ``Shell command:`` on several lines that the shell reads as the same command
    (:func:`mlperf_wf.plan.shell_wrap.wrap`), and a job's long reason and file lists on several indented lines: a
    full-scale train command is thousands of characters on one line otherwise."""
    import logging

    from snakemake.logging import LogEvent

    from mlperf_wf.plan.shell_wrap import WIDTH, filled, wrap

    prefix = "Shell command: "

    def indented(label: str, text: str) -> str:
        """``text`` as Snakemake prints it after ``    label: ``, filled to ``WIDTH`` with continuation lines indented."""
        head = f"    {label}: "
        return filled(text, 8, head)[len(head) :]

    class WrapLongLines(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            event = getattr(record, "event", None)
            if event == LogEvent.SHELLCMD and isinstance(record.msg, str) and record.msg.startswith(prefix):
                record.msg = prefix + wrap(record.msg[len(prefix) :], first=len(prefix))
            elif event == LogEvent.JOB_INFO:
                reason = getattr(record, "reason", None)
                if isinstance(reason, str) and len(reason) + 12 > WIDTH:
                    record.reason = indented("reason", reason)
                for label in ("input", "output", "log"):
                    files = getattr(record, label, None)
                    if isinstance(files, list) and len(", ".join(map(str, files))) + len(label) + 6 > WIDTH:
                        setattr(record, label, [indented(label, ", ".join(map(str, files)))])
            return True

    logging.getLogger("snakemake.logging").addFilter(WrapLongLines())
