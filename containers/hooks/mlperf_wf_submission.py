"""What the workflow's config says about the submission, as the patch modules read it.

The workflow sets ``MLPERF_SUBMISSION_*`` for every full-scale run (from ``submission:``,
``division`` and the benchmark's definition); the references hard-code their own strings.
"""

import os
from typing import Any, Dict

VARIABLES = {
    "submission_benchmark": "MLPERF_SUBMISSION_BENCHMARK",
    "submission_org": "MLPERF_SUBMISSION_ORG",
    "submission_platform": "MLPERF_SUBMISSION_PLATFORM",
    "submission_division": "MLPERF_SUBMISSION_DIVISION",
    "submission_status": "MLPERF_SUBMISSION_STATUS",
}


def submission_values() -> Dict[str, str]:
    """``submission_*`` key -> value, for each variable the run was given."""
    return {key: os.environ[name] for key, name in VARIABLES.items() if os.environ.get(name)}


class ConfiguredSubmission:
    """A reference's MLLogger that logs the configured value for each ``submission_*`` key it is given
    (the references pass their own hard-coded strings to ``event``)."""

    def __init__(self, logger: Any, values: Dict[str, str]) -> None:
        self._logger = logger
        self._values = values

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)

    def event(self, key: str, value: Any = None, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("stack_offset") is None:
            # One frame more than the logger expects (this one): the logged file and line stay the reference's.
            kwargs["stack_offset"] = getattr(self._logger, "default_stack_offset", 1) + 1
        return self._logger.event(key, self._values.get(key, value), *args, **kwargs)
