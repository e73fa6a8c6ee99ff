"""Round patches for the retinanet reference (mlcommons/training aa344c7, retired_benchmarks/retinanet), applied at import.

Loaded by ``containers/hooks/sitecustomize.py`` in every process torchrun starts; the reference's files are
not edited. It wraps ``ssd_logger.mllogger`` (the one ``SSDLogger`` every module of ``ssd/`` logs through),
because rulesets 5.0.0 and 5.1.0 ask for more than the reference logs:

1. **The log goes to the run's result file**: ``SSDLogger`` already writes to ``$COMPLIANCE_FILE`` (the
   workflow sets it for every run), so nothing is changed there.
2. **The submission values come from the workflow's config.** ``train.py:120-122`` logs
   ``submission_benchmark`` as mllog's ``constants.SSD`` ("ssd"; the 5.x rounds know the benchmark as
   "retinanet"), ``submission_division`` "closed" and ``submission_status`` "onprem"; each key given
   through ``MLPERF_SUBMISSION_*`` replaces the reference's value, and "ssd" becomes "retinanet" without one.
3. **Keys common.yaml requires that the reference never logs**: ``submission_org`` and
   ``submission_platform`` (EXACTLY_ONE), logged right after ``submission_status`` from
   ``MLPERF_SUBMISSION_ORG``/``_PLATFORM`` ("reference_implementation" without them, as the other references
   say); ``cache_clear`` (AT_LEAST_ONE), logged before ``init_start`` with ``MLPERF_WF_CACHE_CLEARED`` (true when
   the launch line dropped the page cache, else false: the value says what happened).

Written for the image's Python (3.7 in pytorch/pytorch:1.10.0-cuda11.3-cudnn8-devel).
"""

from __future__ import annotations

import functools
from types import ModuleType

from mlperf_wf_mllog import cache_cleared
from mlperf_wf_submission import submission_values
from sitecustomize import after_import

BENCHMARK = "retinanet"
"""The submission_benchmark value of rulesets 5.0.0 and 5.1.0."""
UNNAMED = "reference_implementation"
"""What the other references log for an organisation or platform nobody named."""


def _patch_ssd_logger(module: ModuleType) -> None:
    logger = module.mllogger
    original_event = logger.event
    original_start = logger.start
    state = {"cache_clear": False}

    @functools.wraps(original_event)
    def event(*args: object, **kwargs: object) -> object:
        key = kwargs.get("key")
        values = submission_values()
        if key == "submission_benchmark":
            kwargs["value"] = values.get(key, BENCHMARK if kwargs.get("value") == "ssd" else kwargs.get("value"))
        elif key in values:
            kwargs["value"] = values[key]
        logged = original_event(*args, **kwargs)
        if key == "submission_status":
            for extra in ("submission_org", "submission_platform"):
                original_event(key=extra, value=values.get(extra, UNNAMED))
        return logged

    @functools.wraps(original_start)
    def start(*args: object, **kwargs: object) -> object:
        if kwargs.get("key") == "init_start" and not state["cache_clear"]:
            state["cache_clear"] = True
            original_event(key="cache_clear", value=cache_cleared())
        return original_start(*args, **kwargs)

    logger.event = event
    logger.start = start


after_import("ssd_logger", _patch_ssd_logger)
