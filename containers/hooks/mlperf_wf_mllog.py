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
import sys
from types import ModuleType
from typing import Callable, Optional

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


def fail_on_result_write_errors(logging_module: ModuleType) -> None:
    """A patch for ``logging``: every ``FileHandler`` opened on the run's result file (``COMPLIANCE_FILE``) raises
    on a write error (:func:`raise_write_errors`), whichever code configures it (mllog.config in the references)."""
    file_handler = logging_module.FileHandler
    if getattr(file_handler, "_mlperf_wf_raises", False):
        return
    original_init = file_handler.__init__

    @functools.wraps(original_init)
    def __init__(self, filename, *args, **kwargs):
        original_init(self, filename, *args, **kwargs)
        target = result_file()
        if target and os.path.abspath(os.fspath(filename)) == target:
            raise_write_errors(self)

    file_handler.__init__ = __init__
    file_handler._mlperf_wf_raises = True
