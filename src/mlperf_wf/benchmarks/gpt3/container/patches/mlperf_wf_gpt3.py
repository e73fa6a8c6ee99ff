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
   the first ``init_start`` with ``MLPERF_WF_CACHE_CLEARED`` (true when the launch line dropped the page cache
   on every node, else false: the value says what happened).

4. **A converged run logs ``run_stop success`` and stops.** ``evaluate`` fills the validation loss only on the last
   pipeline stage (training.py:879-885), and ``evaluate_and_print_results`` checks the target on that loss
   (:962-966), so only the last stage calls ``log_run_stop``, whose barrier the other stages never enter
   (mlperf-common's ``MLLoggerWrapper.log_run_stop``: ``sync=True``), and whose line only global rank 0 writes
   (``unique=True``): with PP > 1 rank 0 is in the first stage, so a converged run logs no success and hangs. The
   patched ``evaluate`` broadcasts the loss from the last rank (the global last rank is in the last stage) to every
   rank, as the deepseek reference broadcasts its loss from the last stage, so every rank takes the same branch
   and rank 0 logs ``run_stop`` with ``status: success``; then every rank logs the reference's end-of-run keys
   (``trained_samples``, ``epoch_stop``, as its time-limit exit does at :812-823) and exits 0, instead of training
   on to the time limit and logging a second ``run_stop`` (``aborted``, :230-232).

Written for the image's Python (3.10 in nvcr.io/nvidia/pytorch:24.04-py3).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

from mlperf_wf_mllog import cache_cleared, result_file
from mlperf_wf_submission import submission_values
from sitecustomize import after_import


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
        self.converged = False
        """Set when the reference logs ``run_stop`` with ``success`` (every rank calls it once the loss is shared)."""

    def log_run_stop(self, status: str, *args: object, **kwargs: object) -> object:
        if status == "success":
            self.converged = True
        return self._inner.log_run_stop(status, *args, **kwargs)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def start(self, key: str | None = None, *args: object, **kwargs: object) -> object:
        if key == "init_start" and not self._cache_clear_logged:
            self._cache_clear_logged = True
            self._inner.event(key="cache_clear", value=cache_cleared(), sync=False)
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


VALIDATION_LOSS = "lm loss"
"""The key of the loss ``evaluate`` returns and ``evaluate_and_print_results`` checks against the target."""


def loss_from_last_stage(total_loss_dict: dict) -> dict:
    """The last rank's validation loss on every rank (the other stages' ``evaluate`` returns an empty dict)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return total_loss_dict
    last = dist.get_world_size() - 1
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    shared = torch.zeros(2, dtype=torch.float64, device=device)  # [has a loss, the loss]
    if dist.get_rank() == last and VALIDATION_LOSS in total_loss_dict:
        shared[0], shared[1] = 1.0, float(total_loss_dict[VALIDATION_LOSS].item())
    dist.broadcast(shared, src=last)
    if dist.get_rank() != last and shared[0].item() == 1.0:
        return {**total_loss_dict, VALIDATION_LOSS: shared[1:2].clone()}
    return total_loss_dict


def _patch_training(module: ModuleType) -> None:
    """Share the validation loss with every stage, and end a converged run right after its ``run_stop``."""
    evaluate, evaluate_and_print_results = module.evaluate, module.evaluate_and_print_results

    def evaluate_on_every_stage(*args: object, **kwargs: object) -> tuple:
        total_loss_dict, collected = evaluate(*args, **kwargs)
        return loss_from_last_stage(total_loss_dict), collected

    def stop_when_converged(*args: object, **kwargs: object) -> object:
        result = evaluate_and_print_results(*args, **kwargs)
        logger = module.mllogger
        if getattr(logger, "converged", False):
            run_args = module.get_args()
            tokens = (run_args.consumed_train_samples - run_args.ext_lr_steps) * run_args.seq_length
            logger.event(key="trained_samples", value=tokens, sync=False)
            logger.end(key=logger.constants.EPOCH_STOP, metadata={"epoch_num": tokens}, sync=False)
            sys.exit(0)
        return result

    module.evaluate = evaluate_on_every_stage
    module.evaluate_and_print_results = stop_when_converged


INDEX_MAPS_VARIABLE = "MLPERF_WF_INDEX_MAPS"
"""The writable folder the index maps go to (the plan's ``megatron_index_maps`` scratch area)."""


def index_map_prefix(folder: str, data_prefix: str) -> str:
    """The prefix ``_build_index_mappings`` names the maps of ``data_prefix`` with: the dataset's own path under
    ``folder`` (two datasets of one name in different folders keep apart), whose parent is made here."""
    prefix = os.path.join(folder, os.path.abspath(data_prefix).lstrip("/"))
    os.makedirs(os.path.dirname(prefix), exist_ok=True)  # every rank that builds datasets: exist_ok, no race
    return prefix


def _patch_gpt_dataset(module: ModuleType) -> None:
    folder = os.environ.get(INDEX_MAPS_VARIABLE)
    if not folder:
        return
    build = module._build_index_mappings

    def build_in_writable_folder(name: str, data_prefix: str, *args: object, **kwargs: object) -> object:
        return build(name, index_map_prefix(folder, data_prefix), *args, **kwargs)

    # GPTDataset.__init__ looks the function up in the module when it runs, so it calls this one
    module._build_index_mappings = build_in_writable_folder


after_import("megatron", _patch_megatron)
after_import("megatron.data.gpt_dataset", _patch_gpt_dataset)
after_import("megatron.training", _patch_training)
