"""Round patches for the flux1 reference (torchtitan ``experiments/flux`` at 9603aa83, the mlcommons/training
text_to_image submodule), applied at import.

Loaded by ``containers/hooks/sitecustomize.py`` in every process of a run (torchrun and each rank); the reference's
files are not edited. T: = torchtitan/experiments/flux/ at 9603aa83. What it changes, and why:

1. **The log goes to the run's result file.** ``MLPerfLogger`` configures mllog with
   ``<job.dump_folder>/mlperf_compliance.log`` (T:train.py:55-62, T:mlperf_logging.py:42-48); with
   ``COMPLIANCE_FILE`` set (the workflow sets it for every run), that file is used instead.
2. **The submission values** come from the workflow's config through ``MLPERF_SUBMISSION_*`` instead of the
   reference's hard-coded ``reference``/``closed``/``onprem`` (T:mlperf_logging.py:50-60).
3. **``evaluation_frequency`` is the interval the loop uses.** The reference logs the constant 262144
   (T:train.py:481) but evaluates every ``ceil(eval.eval_freq / GBS)`` steps (T:train.py:472). 6.1.0 checks
   ``ceil(262144 / GBS) x GBS``; the patch logs exactly that product (262144 for every batch that divides it, such as
   run.sub's 512), so a batch that does not divide 262,144 is logged as it runs, not as 262,144.
4. **Keys 6.1.0 requires that the reference never logs**: ``lowest_numerical_precision_in_{linear,attn,comm}``
   (FSDP's ``mixed_precision_param``, bfloat16 by default, for the matmuls and attention; ``mixed_precision_reduce``,
   float32, for the gradient reduction), ``{tensor,pipeline,context,expert}_parallelism`` (torchtitan's parallel
   degrees; this torchtitan has no expert parallelism: 1), ``micro_batch_size`` (``training.batch_size``, per GPU)
   and ``config_filename`` (``job.config_file``). They are logged right after the reference's own run-start block,
   inside its ``init_start``/``init_stop`` interval.

The job configuration is taken where torchtitan's ``Trainer.__init__`` receives it (``FluxTrainer`` calls it first,
T:train.py:53-54). Written for the image's Python (3.11 on pytorch/pytorch:2.7.1).
"""

from __future__ import annotations

import functools
import math
import os
from types import ModuleType

from mlperf_wf_mllog import result_file
from mlperf_wf_submission import submission_values
from sitecustomize import after_import

REFERENCE_LOG_NAME = "mlperf_compliance.log"
"""The file name MLPerfLogger writes in ``job.dump_folder``."""
PRECISION_NAMES = {"bfloat16": "bfloat16", "float32": "fp32", "float16": "fp16"}
"""torchtitan's dtype names -> the rounds' ``lowest_numerical_precision_in_*`` values."""

_job: dict[str, object] = {}


def _redirect_config(mllog: ModuleType) -> None:
    original = mllog.config

    @functools.wraps(original)
    def config(*args: object, **kwargs: object) -> object:
        target = result_file()
        filename = kwargs.get("filename")
        if target and isinstance(filename, str) and os.path.basename(filename) == REFERENCE_LOG_NAME:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            kwargs["filename"] = target
        return original(*args, **kwargs)

    mllog.config = config


def _keep_job_config(module: ModuleType) -> None:
    original = module.Trainer.__init__

    @functools.wraps(original)
    def init(self: object, job_config: object, *args: object, **kwargs: object) -> None:
        _job["config"] = job_config
        original(self, job_config, *args, **kwargs)

    module.Trainer.__init__ = init


def evaluation_interval(eval_freq: int, global_batch_size: int) -> int:
    """Samples between two evaluations as the loop runs them: ``ceil(eval_freq / GBS)`` steps of GBS (T:train.py:472)."""
    return math.ceil(eval_freq / global_batch_size) * global_batch_size


def run_values(job_config: object) -> dict[str, object]:
    """The 6.1.0 keys the reference does not log, from the run's job configuration."""
    training, parallelism, job = job_config.training, job_config.parallelism, job_config.job
    param = PRECISION_NAMES.get(str(training.mixed_precision_param), str(training.mixed_precision_param))
    reduce = PRECISION_NAMES.get(str(training.mixed_precision_reduce), str(training.mixed_precision_reduce))
    return {
        "lowest_numerical_precision_in_linear": param,
        "lowest_numerical_precision_in_attn": param,
        "lowest_numerical_precision_in_comm": reduce,
        "tensor_parallelism": int(parallelism.tensor_parallel_degree),
        "pipeline_parallelism": int(parallelism.pipeline_parallel_degree),
        "context_parallelism": int(parallelism.context_parallel_degree),
        "expert_parallelism": int(getattr(parallelism, "expert_parallel_degree", 1) or 1),
        "micro_batch_size": int(training.batch_size),
        "config_filename": os.path.basename(str(job.config_file or "")) or "flux_schnell_mlperf.toml",
    }


def _patch_logger(module: ModuleType) -> None:
    logger_class = module.MLPerfLogger
    original_init, original_run_start = logger_class.__init__, logger_class.log_run_start

    @functools.wraps(original_init)
    def init(self: object, *args: object, **kwargs: object) -> None:
        original_init(self, *args, **kwargs)
        self.submission_info.update(submission_values())

    @functools.wraps(original_run_start)
    def log_run_start(self: object, gbs: int, *args: object, **kwargs: object) -> None:
        job_config = _job.get("config")
        if job_config is not None and "eval_freq" in kwargs:
            kwargs["eval_freq"] = evaluation_interval(int(job_config.eval.eval_freq), int(gbs))
        original_run_start(self, gbs, *args, **kwargs)
        if job_config is not None:
            for key, value in run_values(job_config).items():
                self.mllogger.event(key=key, value=value)

    logger_class.__init__ = init
    logger_class.log_run_start = log_run_start


after_import("mlperf_logging.mllog", _redirect_config)
after_import("torchtitan.train", _keep_job_config)
after_import("torchtitan.experiments.flux.mlperf_logging", _patch_logger)
