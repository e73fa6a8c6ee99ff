"""Round patches for the rgat reference (mlcommons/training aa344c7, retired_benchmarks/rgat), applied at import.

Loaded by ``containers/hooks/sitecustomize.py`` in every process of a run: the launcher and each GPU
process that ``torch.multiprocessing.spawn`` starts (each imports ``train_rgnn_multi_gpu.py`` again).
The reference's files are not edited. What it changes in ``mlperf_logging_utils``, and why:

1. **The log goes to the run's result file.** ``train_rgnn_multi_gpu.py`` calls
   ``get_mlperf_logger(path=<the script's folder>)`` at import, so every process appends to
   ``mlperf_gnn.log`` beside the script: one file that collects every run made in the container, and
   that cannot be written at all in a read-only image (Apptainer). With ``COMPLIANCE_FILE`` set (the
   workflow sets it for every run), mllog writes there instead. It still appends: the launcher and
   every spawned process configure mllog, each with its own handler on the one file, and the
   workflow gives each run a fresh result file.
2. **The submission values come from the workflow's config.** ``submission_info`` logs
   ``submission_benchmark`` as mllog's ``constants.GNN`` ("gnn"), which rulesets 5.0.0 and 5.1.0
   reject (they know the benchmark only as "rgat"), and ``submission_org``/``submission_platform`` as
   "reference_implementation". Each ``submission_*`` key given through ``MLPERF_SUBMISSION_*`` (the
   workflow sets them for full-scale runs) replaces the reference's value; a key without a variable
   keeps the reference's value, except that "gnn" becomes "rgat". The reference's own function still
   logs the keys, in its order, with its file and line in the metadata.

Written for the images' Pythons (3.9 on the A100 base, 3.8 on nvcr.io/nvidia/pytorch:22.12).
"""

from __future__ import annotations

import functools
import os
from types import ModuleType

from mlperf_wf_mllog import result_file
from mlperf_wf_submission import ConfiguredSubmission, submission_values
from sitecustomize import after_import

BENCHMARK = "rgat"
"""The name rulesets 5.0.0 and 5.1.0 know the benchmark by (the reference logs mllog's "gnn")."""


def _patch_logging_utils(module: ModuleType) -> None:
    original_logger = module.get_mlperf_logger
    original_submission_info = module.submission_info
    constants = module.constants

    @functools.wraps(original_logger)
    def get_mlperf_logger(path: str, filename: str = "mlperf_gnn.log") -> object:
        target = result_file()
        if target is None:
            return original_logger(path, filename)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        return original_logger(os.path.dirname(target), os.path.basename(target))

    @functools.wraps(original_submission_info)
    def submission_info(mllogger: object, benchmark_name: str, submitter_name: str) -> object:
        values: dict[str, object] = {}
        if benchmark_name == constants.GNN:
            values[constants.SUBMISSION_BENCHMARK] = BENCHMARK
        values.update(submission_values())
        return original_submission_info(ConfiguredSubmission(mllogger, values), benchmark_name, submitter_name)

    module.get_mlperf_logger = get_mlperf_logger
    module.submission_info = submission_info


after_import("mlperf_logging_utils", _patch_logging_utils)
