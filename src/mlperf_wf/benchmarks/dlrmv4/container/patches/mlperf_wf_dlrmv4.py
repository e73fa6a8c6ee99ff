"""Round patches for the dlrmv4 reference (mlcommons/training#889 at a67b8459, recommendation_v4/), applied at import.

Loaded by ``containers/hooks/sitecustomize.py`` in every process of a run: the launcher
(``train_ranker.py``) and every rank it spawns (``torch.multiprocessing``, start method spawn, so each
imports the reference's modules again). The reference's files are not edited. What it changes in
``generative_recommenders.dlrm_v4.train.mlperf_logging_utils.MLPerfLogger``, and why:

1. **The keys 6.1.0 requires that the reference does not log.** ``log_run_start`` logs the
   hyperparameters and then ``init_stop``; 6.1.0's common rules also require ``config_filename``,
   ``micro_batch_size``, ``tensor/pipeline/context/expert_parallelism`` and
   ``lowest_numerical_precision_in_{linear,attn,comm}``. They are logged just before ``init_stop``, with
   the values the run uses: ``micro_batch_size`` is the per-rank ``BATCH_SIZE`` (gin ``batch_size``,
   default 1024); the dense model is data-parallel and the tables are sharded by TorchRec, so no tensor,
   pipeline, context or expert parallelism (1 each); linear and attention run in bf16
   (``make_model.bf16_training = True`` in yambda_5b.gin, Triton bf16 kernels) and the sparse
   all-to-all in ``SPARSE_A2A_FWD``/``SPARSE_A2A_BWD`` (gin default fp16), the lower of the two;
   ``config_filename`` is ``MLPERF_CONFIG_FILENAME`` (set by the workflow) or the gin file the run reads.
2. **The submission values come from the workflow's config.** ``submission_info`` logs org "AMD" and
   division "closed" whatever the submitter; each ``submission_*`` key given through
   ``MLPERF_SUBMISSION_*`` replaces the reference's value (the others keep it).

The log already goes to the run's result file: the workflow's command sets ``MLPERF_LOG_PATH``, which
the reference reads (R:run_and_time.sh:49). Written for Python 3.6 and newer, like the hooks.
"""

import functools
import os
from types import ModuleType

from mlperf_wf_submission import submission_values
from sitecustomize import after_import

MODULE = "generative_recommenders.dlrm_v4.train.mlperf_logging_utils"
CONFIG_FILENAME_VARIABLE = "MLPERF_CONFIG_FILENAME"
DEFAULT_CONFIG = "generative_recommenders/dlrm_v4/train/gin/yambda_5b.gin"
PRECISION_NAMES = {"fp32": "fp32", "float32": "fp32", "bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "fp16", "float16": "fp16"}
PRECISION_ORDER = ["fp16", "bfloat16", "fp32"]
"""Lowest first (16-bit formats before fp32)."""


def _comm_precision() -> str:
    """The lower of the sparse all-to-all precisions (yambda_5b.gin: SPARSE_A2A_FWD/BWD, default fp16)."""
    names = [PRECISION_NAMES.get(os.environ.get(name, "fp16").lower(), "fp32") for name in ("SPARSE_A2A_FWD", "SPARSE_A2A_BWD")]
    return min(names, key=PRECISION_ORDER.index)


def round_keys() -> dict[str, object]:
    """The 6.1.0 keys the reference does not log, with the run's values."""
    values = {
        "config_filename": os.environ.get(CONFIG_FILENAME_VARIABLE) or DEFAULT_CONFIG,
        "micro_batch_size": int(os.environ.get("BATCH_SIZE", "1024")),
        "lowest_numerical_precision_in_linear": "bfloat16",
        "lowest_numerical_precision_in_attn": "bfloat16",
        "lowest_numerical_precision_in_comm": _comm_precision(),
    }
    for kind in ("tensor", "pipeline", "context", "expert"):
        values[f"{kind}_parallelism"] = 1
    return values


def _patch(module: ModuleType) -> None:
    logger_class = module.MLPerfLogger
    original_submission_info = logger_class.submission_info
    original_log_run_start = logger_class.log_run_start

    @functools.wraps(original_submission_info)
    def submission_info(self: object, *args: object, **kwargs: object) -> object:
        configured = submission_values()
        original_event = self.event

        def event(key: str, value: object = None, *rest: object, **more: object) -> object:
            return original_event(key, configured.get(key, value), *rest, **more)

        self.event = event
        try:
            return original_submission_info(self, *args, **kwargs)
        finally:
            del self.event

    @functools.wraps(original_log_run_start)
    def log_run_start(self: object, *args: object, **kwargs: object) -> object:
        original_end = self.end
        init_stop = self.constants.INIT_STOP

        def end(key: str, *rest: object, **more: object) -> object:
            if key == init_stop:
                for name, value in round_keys().items():
                    self.event(key=name, value=value)
            return original_end(key, *rest, **more)

        self.end = end
        try:
            return original_log_run_start(self, *args, **kwargs)
        finally:
            del self.end

    logger_class.submission_info = submission_info
    logger_class.log_run_start = log_run_start


after_import(MODULE, _patch)
