"""What the round patches share about mllog's output: the run's result file, and what ``cache_clear`` says
(copied into every image with the hooks; Python 3.6 and newer, see sitecustomize.py).

The workflow gives each run its own result file through ``COMPLIANCE_FILE``. The references write theirs
elsewhere: beside the script, or a hard-coded ``/mlperf-outputs/<benchmark>.log`` configured at import
(one appended file for every run made in a container, in a folder that must exist before the import).

The references log ``cache_clear: true`` because their launch scripts drop the page cache first; the workflow's
launch line does that on every node of the run and says whether it worked in ``MLPERF_WF_CACHE_CLEARED``
(``true``/``false``). Where the launch set it, every ``cache_clear`` mlperf-logging writes carries that value
(:func:`log_cache_clear_as_launched`, installed by ``sitecustomize``), so a run whose drop failed says false.
"""

import functools
import os
import socket
import sys
from types import ModuleType
from typing import Callable, List, Optional

RESULT_FILE_VARIABLE = "COMPLIANCE_FILE"
"""The run's result file inside the container (the workflow sets it for every run)."""
CACHE_CLEARED_VARIABLE = "MLPERF_WF_CACHE_CLEARED"
"""``true`` when the launch line dropped the page cache on every node before the run, ``false`` when it could not."""
CACHE_CLEAR_KEY = "cache_clear"


def result_file() -> Optional[str]:
    """Absolute path of the run's result file, or None when the run names none."""
    target = os.environ.get(RESULT_FILE_VARIABLE)
    return os.path.abspath(target) if target else None


def redirect_log(reference_log: str) -> Callable[[ModuleType], None]:
    """A patch for ``mlperf_logging.mllog``: ``config(filename=reference_log)`` writes to the run's result
    file instead (its folder created), when the run names one; any other file is left alone."""

    def patch(mllog: ModuleType) -> None:
        original_config = mllog.config

        @functools.wraps(original_config)
        def config(*args: object, **kwargs: object) -> object:
            target = result_file()
            if target and kwargs.get("filename") == reference_log:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                kwargs["filename"] = target
            return original_config(*args, **kwargs)

        mllog.config = config

    return patch


def cache_cleared() -> bool:
    """Whether the launch dropped the page cache before this run (``MLPERF_WF_CACHE_CLEARED``; unset: it did not)."""
    return os.environ.get(CACHE_CLEARED_VARIABLE, "").strip().lower() in ("true", "1")


def log_cache_clear_as_launched(mllog_module: ModuleType) -> None:
    """A patch for ``mlperf_logging.mllog.mllog``: every ``cache_clear`` event is written with :func:`cache_cleared`
    instead of the value the reference gives (its hard-coded true).

    It replaces the module's ``_encode_log``, which ``MLLogger`` calls by name for every line, so the logger's own
    frames, and the file and line it records as the caller, stay as they were. An mlperf-logging without it is left
    alone (the patch modules that log ``cache_clear`` themselves use :func:`cache_cleared`)."""
    original = getattr(mllog_module, "_encode_log", None)
    if original is None or getattr(original, "_mlperf_wf_cache_clear", False):
        return

    @functools.wraps(original)
    def _encode_log(namespace, time_ms, event_type, key, value, metadata):
        if key == CACHE_CLEAR_KEY:
            value = cache_cleared()
        return original(namespace, time_ms, event_type, key, value, metadata)

    _encode_log._mlperf_wf_cache_clear = True
    mllog_module._encode_log = _encode_log


class ResultWriteError(OSError):
    """Writing the run's result file failed: the run fails rather than leave a log with holes."""


def raise_write_errors(handler: object) -> None:
    """Make a ``logging`` handler raise on a failed write instead of printing it and going on (``logging``'s
    ``handleError`` swallows every error, so a full disk left a trainer exiting 0 with a log cut mid-line)."""

    def handle_error(record: object) -> None:
        error = sys.exc_info()[1]
        raise ResultWriteError(f"{getattr(handler, 'baseFilename', handler)}: writing the run's log failed: {error!r}") from error

    handler.handleError = handle_error  # type: ignore[attr-defined]


PARTS_VARIABLE = "MLPERF_WF_MLLOG_PARTS"
"""Set by the workflow's full-scale launch line: the folder where each process that logs into the run's result file
writes a file of its own, which the train job merges into the result file after the run."""


def part_file(folder: str, target: str) -> str:
    """This process's own file in ``folder`` for the lines it logs into the result file ``target``:
    ``<target's name>.<host>.<pid>`` (the folder made here)."""
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"{os.path.basename(target)}.{socket.gethostname()}.{os.getpid()}")


def lines_logged_so_far() -> List[str]:
    """The lines of the run's result file and, while the run runs, of every process's own file in
    ``MLPERF_WF_MLLOG_PARTS``: what the run has logged so far, whichever process logged it (unordered)."""
    target, parts = result_file(), os.environ.get(PARTS_VARIABLE)
    files = [target] if target else []
    if parts and os.path.isdir(parts):
        files += [os.path.join(parts, name) for name in sorted(os.listdir(parts))]
    lines = []
    for path in files:
        try:
            with open(path, errors="replace") as handle:
                lines += handle.readlines()
        except OSError:
            continue
    return lines


def guard_result_file_handlers(logging_module: ModuleType) -> None:
    """A patch for ``logging``: every ``FileHandler`` opened on the run's result file (``COMPLIANCE_FILE``), whichever
    code configures it (mllog.config in the references), writes this process's own file in ``MLPERF_WF_MLLOG_PARTS``
    where the launch line set it (:func:`part_file`), and raises on a write error (:func:`raise_write_errors`).

    One writer per file: the ranks of a run log from several nodes (gpt3's last pipeline rank its ``eval_accuracy``
    while rank 0 logs ``eval_stop``, every rank of llama31_405b before the world forms, deepseekv3_671b's last stage
    every step), and appends from several nodes to one file on NFS or Lustre interleave or tear lines. The train job
    merges the files into the result file in time order once the run has ended (``mlperf-wf merge-mllog``). The
    handler keeps the file it was asked for in ``mlperf_wf_result_file``."""
    file_handler = logging_module.FileHandler
    if getattr(file_handler, "_mlperf_wf_raises", False):
        return
    original_init = file_handler.__init__

    @functools.wraps(original_init)
    def __init__(self, filename, *args, **kwargs):
        target, parts = result_file(), os.environ.get(PARTS_VARIABLE)
        mine = bool(target) and os.path.abspath(os.fspath(filename)) == target
        original_init(self, part_file(parts, target) if mine and parts else filename, *args, **kwargs)
        if mine:
            self.mlperf_wf_result_file = target
            raise_write_errors(self)

    file_handler.__init__ = __init__
    file_handler._mlperf_wf_raises = True
