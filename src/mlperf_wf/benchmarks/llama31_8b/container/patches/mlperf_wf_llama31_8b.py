"""Round patches for the llama31_8b reference (mlcommons/training aa344c7, small_llm_pretraining/nemo), applied at import.

Loaded by ``containers/hooks/sitecustomize.py`` in every process of a run (the NeMo-Run launcher and each
torchrun rank); the reference's files are not edited. What it changes, and why:

1. **The log goes to the run's result file.** ``callbacks.py`` configures mllog at import with the
   hard-coded ``/mlperf-outputs/mlperf_llama31_8b.log`` (callbacks.py:36): one appended file for every run
   made in the container, in a folder that must exist (and be writable) before the import. With
   ``COMPLIANCE_FILE`` set (the workflow sets it for every run), mllog is configured with that file instead.
2. **Keys the rounds require that the reference never logs**: ``max_steps`` (every round, 5.1.0-6.1.0) and,
   for 6.1.0, ``lowest_numerical_precision_in_{linear,attn,comm}``, ``{tensor,pipeline,context,expert}
   _parallelism``, ``micro_batch_size`` and ``config_filename``. They are logged once, with the
   reference's configuration, just before its ``init_stop``: ``max_steps`` and the parallel sizes from the
   Lightning trainer and NeMo's MegatronStrategy, the precisions from NeMo's MegatronMixedPrecision (the
   reference's fp8 "hybrid" with fp8 parameters: linear layers and the parameter all-gather in fp8,
   attention in bf16), the micro batch from the MLPerfCallback, and the reference config file whose values
   the run uses (``MLPERF_CONFIG_FILENAME``, set by the workflow).
3. **The submission values** come from the workflow's config through ``MLPERF_SUBMISSION_*`` instead of
   the reference's hard-coded organisation, division, status and platform.
4. **A failed task fails the job.** NeMo-Run's ``Experiment.run`` launches the training even when
   ``build_data_index`` failed and never exits non-zero for a failed task (run/experiment.py:588-612 at 34259bd), so
   a failed run would end its job with 0 and no retry. The shared hook ``mlperf_wf_nemo_run`` (containers/hooks) ends
   the launcher with status 1 at the first task that did not succeed, before the next task starts
   (tests/workflow/test_nemo_run_contract.py, against the real NeMo-Run).

Written for the image's Python (3.12 on nvcr.io/nvidia/pytorch:25.01).
"""

from __future__ import annotations

import functools
import os
from types import ModuleType

from mlperf_wf_mllog import redirect_log
from mlperf_wf_nemo_run import fail_with_the_first_failed_task
from mlperf_wf_submission import submission_values
from sitecustomize import after_import

REFERENCE_LOG = "/mlperf-outputs/mlperf_llama31_8b.log"
"""Where callbacks.py's MLLogger writes (its default argument)."""
CONFIG_FILENAME_VARIABLE = "MLPERF_CONFIG_FILENAME"
"""The reference config (``config_<system>.sh``) whose values the run uses."""


def _dtype_name(config: object) -> str:
    if getattr(config, "bf16", False):
        return "bfloat16"
    if getattr(config, "fp16", False):
        return "fp16"
    return "fp32"


def precisions(trainer: object) -> dict[str, str]:
    """lowest_numerical_precision_in_{linear,attn,comm} of the run, from NeMo's MegatronMixedPrecision."""
    strategy = getattr(trainer, "strategy", None)
    plugin = getattr(strategy, "precision_plugin", None) or getattr(trainer, "precision_plugin", None)
    config = getattr(plugin, "dtype_config", None)
    base = _dtype_name(config)
    fp8 = bool(getattr(config, "fp8", None))
    comm = "fp32" if getattr(config, "grad_reduce_in_fp32", False) else base
    return {
        "lowest_numerical_precision_in_linear": "fp8" if fp8 else base,
        "lowest_numerical_precision_in_attn": "fp8" if fp8 and getattr(config, "fp8_dot_product_attention", False) else base,
        "lowest_numerical_precision_in_comm": "fp8" if fp8 and getattr(config, "fp8_param_gather", False) else comm,
    }


def run_values(trainer: object, callback: object) -> dict[str, object]:
    """The keys the reference does not log, with this run's values."""
    strategy = getattr(trainer, "strategy", None)
    values: dict[str, object] = {"max_steps": int(trainer.max_steps)}
    values.update(precisions(trainer))
    for key, attribute in (
        ("tensor_parallelism", "tensor_model_parallel_size"),
        ("pipeline_parallelism", "pipeline_model_parallel_size"),
        ("context_parallelism", "context_parallel_size"),
        ("expert_parallelism", "expert_model_parallel_size"),
    ):
        values[key] = int(getattr(strategy, attribute, None) or 1)
    values["micro_batch_size"] = int(callback.mbs)
    values["config_filename"] = os.environ.get(CONFIG_FILENAME_VARIABLE) or "run_llama31.sh"
    return values


def _patch_callbacks(module: ModuleType) -> None:
    reference_logger = module.mllogger
    constants = module.constants
    submission = submission_values()
    pending: dict[str, object] = {}

    original_event = reference_logger.event
    original_end = reference_logger.end

    # Every reference call now passes through one frame more: stack_offset 3 keeps its file and line in the log.
    def event(**kwargs: object) -> object:
        kwargs.setdefault("stack_offset", 3)
        if kwargs.get("key") in submission:
            kwargs["value"] = submission[kwargs["key"]]
        return original_event(**kwargs)

    def end(**kwargs: object) -> object:
        kwargs.setdefault("stack_offset", 3)
        if kwargs.get("key") == constants.INIT_STOP:
            for key in list(pending):
                original_event(key=key, value=pending.pop(key))
        return original_end(**kwargs)

    reference_logger.event = event
    reference_logger.end = end

    original_on_train_start = module.MLPerfCallback.on_train_start

    @functools.wraps(original_on_train_start)
    def on_train_start(self: object, trainer: object, pl_module: object) -> object:
        pending.update(run_values(trainer, self))
        return original_on_train_start(self, trainer, pl_module)

    module.MLPerfCallback.on_train_start = on_train_start


after_import("mlperf_logging.mllog", redirect_log(REFERENCE_LOG))
after_import("callbacks", _patch_callbacks)
fail_with_the_first_failed_task()
