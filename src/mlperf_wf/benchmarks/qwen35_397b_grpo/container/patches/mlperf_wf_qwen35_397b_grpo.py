"""Round patches for the qwen35_397b_grpo reference (NeMo-RL 3fca04c9, mlcommons/training llm_post_training), applied at import.

Loaded by ``containers/hooks/sitecustomize.py`` in every process of a run (the driver and every Ray worker); the
reference's files are not edited. The reference's MLPerf logger (``nemo_rl/algorithms/mlperf_grpo_logging.py``,
inside the image only) writes through mlperf-logging's ``MLLogger``; this module wraps that class:

1. **Keys ruleset 6.1.0 requires that the reference never logs** (its GBS-256 RCP log lacks them and the checker
   warns): ``lowest_numerical_precision_in_{linear,attn,comm}`` and ``config_filename``. They are logged once,
   just before the reference's ``init_stop``, unless the reference logged them itself: the precisions from
   ``MLPERF_WF_PRECISION`` (the benchmark definition sets ``bfloat16``: the RCPs ran policy and generation math
   in BF16, README.md:583-588), the config file from ``MLPERF_CONFIG_FILENAME`` (the GBS recipe the run uses).
2. **The submission values** come from the workflow's config through ``MLPERF_SUBMISSION_*`` instead of the
   reference's own (``MLPERF_SUBMITTER``/``MLPERF_SYSTEM_NAME``... of the site data config).
3. **cache_clear** (AT_LEAST_ONE) is logged by NeMo-RL's ``run.sub`` in a separate process after its page-cache drop
   (docker/mlperf/run.sub:477-493), which the workflow's per-node launcher does not start: the workflow's launch line
   drops the cache on every node, and this module logs whether that worked (``MLPERF_WF_CACHE_CLEARED``) just
   before the reference's ``init_start``, unless something logged it already.

The log file is the run's result file already: the command passes ``++logger.mlperf.log_file`` (the Hydra
override run_and_time.sh sets, qwen35_grpo_rcp_launch_instructions.md:200). Not patched, and failing the 6.1.0
checker as the reference's own logs do: ``eval_samples`` is 256 (the reference validates on 256 tasks; the
rules want 251).
"""

import os
from types import ModuleType

from mlperf_wf_mllog import cache_cleared
from mlperf_wf_submission import submission_values
from sitecustomize import after_import

PRECISION_VARIABLE = "MLPERF_WF_PRECISION"
CONFIG_FILENAME_VARIABLE = "MLPERF_CONFIG_FILENAME"
PRECISION_KEYS = ("lowest_numerical_precision_in_linear", "lowest_numerical_precision_in_attn", "lowest_numerical_precision_in_comm")


def missing_values() -> dict[str, str]:
    """The 6.1.0 keys the reference does not log, with this run's values."""
    values = {key: os.environ.get(PRECISION_VARIABLE, "bfloat16") for key in PRECISION_KEYS}
    values["config_filename"] = os.environ.get(CONFIG_FILENAME_VARIABLE) or "grpo_qwen35_397b_swe_openhands_async_gbs256.yaml"
    return values


def _patch_mllog(module: ModuleType) -> None:
    logger_class = module.MLLogger
    original = logger_class._log_helper
    constants = module.constants

    def _log_helper(self, event_type, key, value=None, metadata=None, namespace=None, time_ms=None, stack_offset=None, clear_line=None):
        logged: set[str] = self.__dict__.setdefault("_mlperf_wf_logged", set())
        if event_type == constants.POINT_IN_TIME and key in submission_values():
            value = submission_values()[key]
        if event_type == constants.INTERVAL_START and key == constants.INIT_START and constants.CACHE_CLEAR not in logged:
            logged.add(constants.CACHE_CLEAR)
            original(self, constants.POINT_IN_TIME, constants.CACHE_CLEAR, cache_cleared(), namespace=namespace, stack_offset=stack_offset)
        if event_type == constants.INTERVAL_END and key == constants.INIT_STOP:
            for extra_key, extra_value in missing_values().items():
                if extra_key not in logged:
                    logged.add(extra_key)
                    original(self, constants.POINT_IN_TIME, extra_key, extra_value, namespace=namespace, stack_offset=stack_offset)
        logged.add(key)
        return original(self, event_type, key, value, metadata, namespace, time_ms, stack_offset, clear_line)

    logger_class._log_helper = _log_helper


after_import("mlperf_logging.mllog.mllog", _patch_mllog)
