"""Round patches for the gpt3 reference (mlcommons/training aa344c7, retired_benchmarks/gpt3/megatron-lm), applied at import.

Loaded by ``containers/hooks/sitecustomize.py`` in every process of a run (srun starts one per GPU); the
reference's files are not edited. ``megatron/__init__.py`` builds one ``mllogger`` (NVIDIA mlperf-common's
``MLLoggerWrapper``) that ``megatron/training.py`` imports; right after ``megatron`` is imported this module
wraps it. What changes, and why:

1. **The log goes to the run's result file.** The wrapper logs through mlperf-logging's ``mllog``, which
   the reference never points at a file (its runs tee the console). With ``COMPLIANCE_FILE`` set (the
   workflow sets it for every run) mllog also writes there; mlperf-common still decides which rank logs.
2. **The submission values come from the workflow's config.** The reference hard-codes ``Nvidia``,
   ``GA100-<n>``, ``reference`` and ``closed`` (training.py:120-124); each key given through
   ``MLPERF_SUBMISSION_*`` replaces the reference's value.
3. **Keys ruleset 4.1.0 requires that the reference does not log** (common.yaml): ``train_samples``
   (EXACTLY_ONE; the reference logs ``trained_samples`` only at the end), logged next to the reference's
   ``eval_samples`` with the run's own ``--train-samples``; and ``cache_clear`` (AT_LEAST_ONE), logged before
   the first ``init_start`` with ``MLPERF_WF_CACHE_CLEARED`` (1 when the launch dropped the page cache,
   else false: the value says what happened).

Written for the image's Python (3.10 in nvcr.io/nvidia/pytorch:24.04-py3).
"""

from __future__ import annotations

import os
from types import ModuleType

from mlperf_wf_mllog import result_file
from mlperf_wf_submission import submission_values
from sitecustomize import after_import

CACHE_CLEARED_VARIABLE = "MLPERF_WF_CACHE_CLEARED"
"""1 when the launch dropped the page cache before the run."""


def send_mllog_to_result_file() -> None:
    """Point mlperf-logging's mllog at the run's result file (appending: every rank configures it)."""
    target = result_file()
    if target is None:
        return
    from mlperf_logging import mllog

    os.makedirs(os.path.dirname(target), exist_ok=True)
    mllog.config(filename=target)


class RoundLogger:
    """The reference's ``mllogger``, with the configured submission values and the keys the round adds."""

    def __init__(self, inner: object, values: dict[str, object]) -> None:
        self._inner = inner
        self._values = values
        self._cache_clear_logged = False

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def start(self, key: str | None = None, *args: object, **kwargs: object) -> object:
        if key == "init_start" and not self._cache_clear_logged:
            self._cache_clear_logged = True
            self._inner.event(key="cache_clear", value=os.environ.get(CACHE_CLEARED_VARIABLE) == "1", sync=False)
        return self._inner.start(key, *args, **kwargs)

    def event(self, key: str | None = None, value: object = None, *args: object, **kwargs: object) -> object:
        logged = self._inner.event(key, self._values.get(key, value), *args, **kwargs)
        if key == "eval_samples":
            from megatron import get_args

            self._inner.event(key="train_samples", value=int(get_args().train_samples), sync=False)
        return logged


def _patch_megatron(module: ModuleType) -> None:
    send_mllog_to_result_file()
    module.mllogger = RoundLogger(module.mllogger, submission_values())


after_import("megatron", _patch_megatron)
