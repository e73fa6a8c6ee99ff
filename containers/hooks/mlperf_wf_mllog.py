"""What the round patches share about mllog's output: the run's result file (copied into every image with
the hooks; Python 3.6 and newer, see sitecustomize.py).

The workflow gives each run its own result file through ``COMPLIANCE_FILE``. The references write theirs
elsewhere: beside the script, or a hard-coded ``/mlperf-outputs/<benchmark>.log`` configured at import
(one appended file for every run made in a container, in a folder that must exist before the import).
"""

import functools
import os
from types import ModuleType
from typing import Callable, Optional

RESULT_FILE_VARIABLE = "COMPLIANCE_FILE"
"""The run's result file inside the container (the workflow sets it for every run)."""


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
