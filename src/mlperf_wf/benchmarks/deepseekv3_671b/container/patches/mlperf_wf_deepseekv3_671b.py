"""Round patches for the deepseekv3_671b reference (mlcommons/training aa344c7, llm_moe_pretraining/nemo), applied at import.

Loaded by ``containers/hooks/sitecustomize.py`` in every rank (srun starts one ``pretrain_deepseek_v3_671b.py`` per
GPU); the reference's files are not edited. What it changes, and why:

1. **The log goes to the run's result file.** mlperf-common's ``MLLoggerWrapper`` (callback.py:60) logs through
   mllog's default logger, which writes only to the job's output. With ``COMPLIANCE_FILE`` set (the workflow sets
   it for every run), mllog is configured with that file as well (mllog itself writes ``time_ms`` on each line).
2. **Keys 6.1.0 requires that the reference never logs**: ``{tensor,pipeline,context,expert}_parallelism``,
   ``micro_batch_size``, ``config_filename`` and ``lowest_numerical_precision_in_{linear,attn,comm}``; and
   ``moe_aux_loss_coeff`` when the reference has not logged it itself (older revisions did not). They are logged
   on rank 0 when the script calls Megatron-Bridge's ``pretrain(config, ...)``, i.e. after its own hyperparameters
   and before ``init_stop``, from that ``config`` (the run's real ConfigContainer): the model's parallel sizes,
   ``train.micro_batch_size``, ``model.moe_aux_loss_coeff``, the mixed-precision recipe; ``config_filename`` is the
   reference config whose values the run uses (``MLPERF_CONFIG_FILENAME``, set by the workflow).
3. **The learning rate and the first evaluation are checked against the closed rules** at the config's real
   global batch: LR 2.4e-5 x sqrt(GBS/16384), and ``START_EVAL_AT_ITER`` (the iteration of the first evaluation,
   read by the script, :170-172) = floor(42 + 24576/GBS), which 6.1.0's FIRST_CHECK turns into samples. A mismatch
   is said on stderr; in the closed division (``MLPERF_SUBMISSION_DIVISION=closed``) the run stops before
   training, since its log would fail the checker after hours (a site that changes ``--gbs`` must change both).
4. **The starting checkpoint is R2's published conversion.** The script loads ``/checkpoint`` at ``ckpt_step`` 0
   (:198-205), so Megatron-Bridge opens ``/checkpoint/iter_0000000``. The reference README has MLCommons' Hugging Face
   checkpoint converted by hand (``run_conversion.sh``, README.md:187-196); the workflow mounts R2's conversion
   (``deepseekv3_checkpoint_bf16_megatron_bridge``) there instead. When ``/checkpoint`` holds a Hugging Face folder
   (a site mounting the unconverted checkpoint), the run stops before training with one line saying so, instead of
   Megatron-Bridge's FileNotFoundError after start-up.
5. **The submission values** come from the workflow's config through ``MLPERF_SUBMISSION_*`` instead of
   mlperf-common's hard-coded closed/onprem and ``<nodes>x<platform>``.

Written for the image's Python (3.12 on nvcr.io/nvidia/pytorch:25.12).
"""

from __future__ import annotations

import functools
import math
import os
import sys
from types import ModuleType

from mlperf_wf_mllog import result_file
from mlperf_wf_submission import submission_values
from sitecustomize import after_import

CONFIG_FILENAME_VARIABLE = "MLPERF_CONFIG_FILENAME"
"""The reference config (``config_<system>.sh``) whose values the run uses."""
CLOSED_PEAK_LR = 2.4e-5
"""The closed rule's learning rate at GBS 16384 (closed_deepseekv3_671b.yaml: 2.4e-5 x sqrt(GBS/16384), within 1e-9)."""
CONVERTED_CHECKPOINT_ID = "deepseekv3_checkpoint_bf16_megatron_bridge"
"""The catalog entry of R2's Megatron-Bridge conversion of the starting checkpoint."""
_logged_keys: set[str] = set()


def rank() -> int:
    """This process's rank before torch.distributed starts (as the reference's get_rank, pretrain_deepseek_v3_671b.py:31-39)."""
    return int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))


def closed_learning_rate(global_batch_size: int) -> float:
    """The closed rule's peak learning rate at ``global_batch_size``."""
    return CLOSED_PEAK_LR * math.sqrt(global_batch_size / 16384)


def _attribute(obj: object, path: str) -> object:
    for name in path.split("."):
        obj = getattr(obj, name, None)
    return obj


def precisions(config: object) -> dict[str, str]:
    """lowest_numerical_precision_in_{linear,attn,comm}, from the config's mixed-precision recipe (a name such as
    ``bf16_mixed`` or a MixedPrecisionConfig) or, failing that, the model config's own flags."""
    recipe = getattr(config, "mixed_precision", None)
    model = getattr(config, "model", None)
    if isinstance(recipe, str):
        base = "bfloat16" if "bf16" in recipe else "fp16" if "fp16" in recipe else "fp32"
        fp8 = "fp8" in recipe
        return {
            "lowest_numerical_precision_in_linear": "fp8" if fp8 else base,
            "lowest_numerical_precision_in_attn": base,
            "lowest_numerical_precision_in_comm": base,
        }
    source = recipe if recipe is not None else model
    base = "bfloat16" if getattr(source, "bf16", False) else "fp16" if getattr(source, "fp16", False) else "fp32"
    fp8 = bool(getattr(source, "fp8", None))
    comm = "fp32" if getattr(source, "grad_reduce_in_fp32", False) else base
    return {
        "lowest_numerical_precision_in_linear": "fp8" if fp8 else base,
        "lowest_numerical_precision_in_attn": "fp8" if fp8 and getattr(source, "fp8_dot_product_attention", False) else base,
        "lowest_numerical_precision_in_comm": "fp8" if fp8 and getattr(source, "fp8_param_gather", False) else comm,
    }


def run_values(config: object, argv: list[str]) -> dict[str, object]:
    """The keys the reference does not log, with this run's values (the command line where the config lacks one)."""
    flags = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    values: dict[str, object] = {}
    for key, attribute, flag in (
        ("tensor_parallelism", "model.tensor_model_parallel_size", "--tensor_parallel_size"),
        ("pipeline_parallelism", "model.pipeline_model_parallel_size", "--pipeline_parallel_size"),
        ("context_parallelism", "model.context_parallel_size", "--context_parallel_size"),
        ("expert_parallelism", "model.expert_model_parallel_size", "--expert_model_parallel_size"),
        ("micro_batch_size", "train.micro_batch_size", "--mbs"),
    ):
        value = _attribute(config, attribute)
        if value is None:
            sys.stderr.write(f"mlperf-wf deepseekv3_671b patch: config has no {attribute}; logging {flag} {flags.get(flag)} instead\n")
            value = flags.get(flag, 1)
        values[key] = int(value)
    values.update(precisions(config))
    values["config_filename"] = os.environ.get(CONFIG_FILENAME_VARIABLE) or "run_deepseek_v3_671b.sh"
    coefficient = _attribute(config, "model.moe_aux_loss_coeff")
    if coefficient is not None:
        values["moe_aux_loss_coeff"] = float(coefficient)
    return values


def closed_first_evaluation(global_batch_size: int) -> int:
    """The iteration of the first evaluation 6.1.0's closed FIRST_CHECK expects at ``global_batch_size``."""
    return math.floor(42 + 24576 / global_batch_size)


def check_learning_rate(config: object) -> None:
    """Compare the config's peak LR and first-evaluation iteration with the closed rules at its real GBS; stop a
    closed run that would fail them."""
    gbs, lr = _attribute(config, "train.global_batch_size"), _attribute(config, "optimizer.lr")
    if gbs is None:
        return
    problems = []
    expected = closed_learning_rate(int(gbs))
    if lr is not None and abs(float(lr) - expected) >= 1e-9:
        problems.append(f"--lr {lr} at global batch {gbs}; the closed rule wants 2.4e-5 x sqrt({gbs}/16384) = {expected:.9g}")
    first = os.environ.get("START_EVAL_AT_ITER")
    if first is not None and first.strip() != str(closed_first_evaluation(int(gbs))):
        problems.append(
            f"START_EVAL_AT_ITER {first} at global batch {gbs}; 6.1.0's closed rule wants the first evaluation at floor(42 + 24576/{gbs}) = "
            f"{closed_first_evaluation(int(gbs))}"
        )
    if not problems:
        return
    message = "mlperf-wf deepseekv3_671b patch: " + "; ".join(problems)
    sys.stderr.write(message + "\n")
    if os.environ.get("MLPERF_SUBMISSION_DIVISION") == "closed":
        raise SystemExit(message)


def is_hugging_face_checkpoint(folder: str) -> bool:
    """A Hugging Face folder (``config.json``, safetensors) rather than a Megatron checkpoint (``latest_checkpointed_iteration.txt``)."""
    if not os.path.isdir(folder) or os.path.exists(os.path.join(folder, "latest_checkpointed_iteration.txt")):
        return False
    return os.path.isfile(os.path.join(folder, "config.json")) and any(name.endswith(".safetensors") for name in os.listdir(folder))


def refuse_hugging_face_checkpoint(config: object) -> None:
    """Stop before training when ``checkpoint.load`` is the Hugging Face checkpoint rather than its Megatron-Bridge conversion."""
    load = getattr(getattr(config, "checkpoint", None), "load", None)
    if load and is_hugging_face_checkpoint(load):
        raise SystemExit(
            f"mlperf-wf deepseekv3_671b patch: {load} holds the Hugging Face checkpoint; the reference loads its Megatron-Bridge conversion "
            f"at iter_0000000 (pretrain_deepseek_v3_671b.py:198-205): mount R2's {CONVERTED_CHECKPOINT_ID} there (the benchmark's checkpoint input)"
        )


def _patch_callback(module: ModuleType) -> None:
    reference_logger = module.mllogger
    submission = submission_values()
    original_log = reference_logger._log

    # Every call goes through MLLoggerWrapper._log; one frame more here, so the file:line mllog records stays the caller's.
    def _log(log_fn: object, *args: object, **kwargs: object) -> object:
        key = kwargs.get("key", args[0] if args else None)
        if key in submission:
            kwargs["value"] = submission[key]
        if isinstance(key, str):
            _logged_keys.add(key)
        if kwargs.get("stack_offset") is None:
            kwargs["stack_offset"] = reference_logger.default_stack_offset + (2 if kwargs.get("internal_call") else 1)
        return original_log(log_fn, *args, **kwargs)

    reference_logger._log = _log


def _patch_pretrain(module: ModuleType) -> None:
    original = module.pretrain

    @functools.wraps(original)
    def pretrain(config: object, *args: object, **kwargs: object) -> object:
        check_learning_rate(config)
        refuse_hugging_face_checkpoint(config)
        if rank() == 0:
            reference_logger = sys.modules["callback"].mllogger
            for key, value in run_values(config, sys.argv).items():
                if key not in _logged_keys:
                    reference_logger.event(key=key, value=value)
        return original(config, *args, **kwargs)

    module.pretrain = pretrain


def _log_to_result_file(mllog: ModuleType) -> None:
    target = result_file()
    if target:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        mllog.config(filename=target)


after_import("mlperf_logging.mllog", _log_to_result_file)
after_import("callback", _patch_callback)
after_import("megatron.bridge.training.pretrain", _patch_pretrain)
