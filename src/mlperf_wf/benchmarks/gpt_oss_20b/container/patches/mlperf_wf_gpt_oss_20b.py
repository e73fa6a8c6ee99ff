"""Round patches for the gpt_oss_20b reference (mlcommons/training aa344c7, small_llm_moe_pretraining/primus),
applied at import.

Loaded by ``containers/hooks/sitecustomize.py`` in every process of a run (torchrun and each rank of
``src/train.py``); the reference's files, Primus and primus_mllog are not edited. What it changes, and why:

1. **The log goes to the run's result file, whole.** primus_mllog's ``MLPerfLogger.configure`` writes to
   ``MLLOG_OUTPUT_FILE`` (default ``/results/mlperf_output.log``, one appended file for every run made with the
   same folder). With ``COMPLIANCE_FILE`` set (the workflow sets it for every run) it writes there instead, and
   rank 0 opens that file when the logger is created: the trainer logs ``cache_clear`` and ``init_start`` before
   ``configure`` runs, so the reference's own file lacks both (they reach only the tee'd stdout of run.sub:54).
2. **The checker's benchmark name and the workflow's submission values.** The reference's config logs
   ``submission_benchmark`` as ``gpt-oss-20b`` (config_B200_1x8x1.sh:58), a name mlperf-logging does not know
   (it checks ``gpt_oss_20b``), and the submitter's own organisation, division and platform. The values of
   ``MLPERF_SUBMISSION_*`` replace them; ``submission_benchmark`` is ``gpt_oss_20b`` even without them.
3. **The 6.1.0 precision keys**, ``lowest_numerical_precision_in_{linear,attn,comm}``, which primus_mllog
   0.1.20 never logs, from the run's Megatron arguments: fp8 where the run computes linear layers in fp8
   (``fp8``), attention in fp8 only with ``fp8_dot_product_attention``; else bf16/fp16/fp32 from ``bf16``/``fp16``.
   Communication: fp8 with ``fp8_param_gather``; otherwise the parameters are all-gathered and the gradients
   reduced in the model's dtype (bf16) unless ``accumulate_allreduce_grads_in_fp32`` keeps the reduction in fp32
   and there is no bf16 parameter gather (no distributed optimizer). The parallelism keys, ``micro_batch_size``
   and ``config_filename`` ($EXP) primus_mllog already logs from the same arguments.
4. **The data where the workflow mounts it.** The reference's yaml hard-codes ``/data/<file>`` in
   ``train/valid/test_data_path`` (conf/gpt_oss_20B-pretrain-nvidia.yaml:88-90); the workflow mounts the verified
   data read-only with its prepared tree at ``MLPERF_WF_DATA_DIR``. Those paths are rewritten to it, and Megatron's
   index cache (``data_cache_path``, which Primus leaves null so Megatron writes beside the data) goes to
   ``MLPERF_WF_DATA_CACHE``.

Written for the image's Python (3.12 on nvcr.io/nvidia/pytorch:25.12).
"""

from __future__ import annotations

import functools
import os
from types import ModuleType

from mlperf_wf_mllog import result_file
from mlperf_wf_submission import submission_values
from sitecustomize import after_import

BENCHMARK = "gpt_oss_20b"
"""The name mlperf-logging checks (the reference logs ``gpt-oss-20b``)."""
REFERENCE_DATA_DIR = "/data"
"""Where the reference's yaml expects the data files (R:run.sub:28 mounts DATADIR there)."""
DATA_DIR_VARIABLE = "MLPERF_WF_DATA_DIR"
DATA_CACHE_VARIABLE = "MLPERF_WF_DATA_CACHE"
DATA_PATH_KEYS = ("train_data_path", "valid_data_path", "test_data_path", "data_path")


def _dtype(args: object) -> str:
    if getattr(args, "bf16", False):
        return "bfloat16"
    if getattr(args, "fp16", False):
        return "fp16"
    return "fp32"


def precisions(args: object) -> dict[str, str]:
    """lowest_numerical_precision_in_{linear,attn,comm} of a run with Megatron arguments ``args``."""
    base = _dtype(args)
    fp8 = bool(getattr(args, "fp8", None))
    if fp8 and getattr(args, "fp8_param_gather", False):
        comm = "fp8"
    elif base != "fp32" and (getattr(args, "use_distributed_optimizer", False) or not getattr(args, "accumulate_allreduce_grads_in_fp32", False)):
        comm = base
    else:
        comm = "fp32"
    return {
        "lowest_numerical_precision_in_linear": "fp8" if fp8 else base,
        "lowest_numerical_precision_in_attn": "fp8" if fp8 and getattr(args, "fp8_dot_product_attention", False) else base,
        "lowest_numerical_precision_in_comm": comm,
    }


def corrected_configs(configs: dict[str, object], args: object) -> dict[str, object]:
    """primus_mllog's config dict with the checker's benchmark name, the workflow's submission values and the
    6.1.0 precision keys (inserted before ``init_stop``, which the trainer logs after this dict)."""
    configs = {**configs, **submission_values()}
    if configs.get("submission_benchmark") in (None, "", "gpt-oss-20b"):
        configs["submission_benchmark"] = BENCHMARK
    configs.update(precisions(args))
    return configs


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def _patch_logger(module: ModuleType) -> None:
    logger_class = module.MLPerfLogger
    original_init = logger_class.__init__
    original_configure = logger_class.configure

    @functools.wraps(original_init)
    def __init__(self: object, *args: object, **kwargs: object) -> None:
        original_init(self, *args, **kwargs)
        target = result_file()
        # The trainer logs cache_clear and init_start right after this, before configure() names a file: in the
        # reference they reach only stdout. Rank 0 opens the result file now, so the file holds them once.
        if target and _rank() == 0 and getattr(self, "_save_to_file", True):
            from mlperf_logging import mllog

            os.makedirs(os.path.dirname(target), exist_ok=True)
            mllog.config(filename=target, default_stack_offset=3)
            self._mlperf_wf_file_open = True

    @functools.wraps(original_configure)
    def configure(self: object, filepath: str, args: object) -> dict[str, object]:
        target = result_file()
        if target:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            filepath = target
        if getattr(self, "_mlperf_wf_file_open", False):
            self._save_to_file = False  # its file handler is there already; a second one would write each line twice
        return corrected_configs(original_configure(self, filepath, args), args)

    logger_class.__init__ = __init__
    logger_class.configure = configure


def relocated(value: object, data_dir: str) -> object:
    """A data-path value (``"10 /data/x"``, ``"/data/x"`` or a list of words) with ``/data/`` replaced by ``data_dir``."""
    if isinstance(value, list):
        return [relocated(item, data_dir) for item in value]
    if not isinstance(value, str):
        return value
    prefix = REFERENCE_DATA_DIR.rstrip("/") + "/"
    return " ".join(data_dir.rstrip("/") + "/" + word[len(prefix) :] if word.startswith(prefix) else word for word in value.split(" "))


def relocate_data(module_config: object) -> None:
    """Point the module config's data paths and Megatron's index cache where the workflow mounts them."""
    data_dir = os.environ.get(DATA_DIR_VARIABLE)
    if data_dir:
        for key in DATA_PATH_KEYS:
            if getattr(module_config, key, None) is not None:
                setattr(module_config, key, relocated(getattr(module_config, key), data_dir))
    cache = os.environ.get(DATA_CACHE_VARIABLE)
    if cache and getattr(module_config, "data_cache_path", None) is None:
        module_config.data_cache_path = cache


def _patch_parser(module: ModuleType) -> None:
    original_load = module.load_primus_config

    @functools.wraps(original_load)
    def load_primus_config(*args: object, **kwargs: object) -> object:
        result = original_load(*args, **kwargs)
        primus_config = result[0] if isinstance(result, tuple) else result
        relocate_data(primus_config.get_module_config("pre_trainer"))
        return result

    module.load_primus_config = load_primus_config


after_import("primus_mllog.mlperf_logger", _patch_logger)
after_import("primus.core.launcher.parser", _patch_parser)
