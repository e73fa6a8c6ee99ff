"""What the workflow's config says about the submission, as the patch modules read it.

The workflow sets ``MLPERF_SUBMISSION_*`` for every full-scale run (from ``submission:``,
``division`` and the benchmark's definition); the references hard-code their own strings.
"""

import os
from typing import Dict

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
