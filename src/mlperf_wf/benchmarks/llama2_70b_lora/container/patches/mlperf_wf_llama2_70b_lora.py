"""Round patches for the llama2_70b_lora reference (mlcommons/training aa344c7), applied at import.

Loaded by ``containers/hooks/sitecustomize.py`` in every process of a run; the reference's files
are not edited. What it changes, and why:

1. **Keys ruleset 6.1.0 requires** (the reference predates them): ``lowest_numerical_precision_in_
   {linear,attn,comm}``, ``{tensor,pipeline,context,expert}_parallelism``, ``micro_batch_size`` and
   ``config_filename``, logged once, before ``run_start``, with the values of this run: the precision
   from the Trainer's own ``bf16``/``fp16`` arguments (weights, attention and the ZeRO-3 collectives
   all run in that dtype), parallelism 1 for each kind (the reference is pure data parallelism: ZeRO-3
   shards optimizer state and weights across data-parallel ranks, nothing else), the micro batch from
   ``per_device_train_batch_size``, and the accelerate config the run was launched with.
2. **A run_stop for every run.** The reference writes run_stop from ``on_step_begin``, which never
   runs after the last step: a run that ends at ``max_steps`` logs none, and neither does one that
   reaches the target at its last evaluation. At the end of training this logs the evaluation the
   reference had not logged yet (as the reference logs one: block_stop, eval_accuracy, block_start),
   then run_stop with status ``success`` or ``aborted`` (the status
   mlperf-logging's summarizer and RCP checker count as not converged). And where the reference itself stops with
   ``success`` on an evaluation it never logged (the target met at the first evaluation: its ``on_step_begin`` logs
   run_stop without the eval_accuracy that met it, which every round's checker rejects), that evaluation is logged
   first (block_stop, eval_accuracy, after a block_start when it is the first), as the reference logs one.
3. **The submission values** (``submission_org``/``platform``/``division``/``status``) come from
   the workflow's config through ``MLPERF_SUBMISSION_*`` instead of the reference's hard-coded
   "referece" strings.
4. **Seeded LoRA initialisation.** The reference builds the LoRA model before the Trainer seeds
   torch, so two runs with one seed differ; seeding first makes a run a function of its seed.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

from mlperf_wf_submission import submission_values
from sitecustomize import after_import

CONFIG_FILENAME_VARIABLE = "MLPERF_CONFIG_FILENAME"
"""The accelerate config of the run (the workflow sets it from the command's ``--config_file``)."""


def precision_of(args: object) -> str:
    """The dtype of the run's matrix multiplies, in the checker's vocabulary."""
    if getattr(args, "bf16", False):
        return "bfloat16"
    if getattr(args, "fp16", False):
        return "fp16"
    return "fp32"


def launch_config_filename() -> str:
    """``--config_file`` of the accelerate launch that started this process (from the workflow, else
    the launcher's own command line)."""
    named = os.environ.get(CONFIG_FILENAME_VARIABLE)
    if named:
        return named
    try:
        parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().split(b"\0")
    except OSError:
        parent = []
    words = [word.decode(errors="replace") for word in parent]
    if "--config_file" in words[:-1]:
        return words[words.index("--config_file") + 1]
    return "accelerate-default-config"


def round_keys(args: object) -> dict[str, object]:
    """The keys 6.1.0 requires, with this run's values."""
    precision = precision_of(args)
    keys: dict[str, object] = {f"lowest_numerical_precision_in_{part}": precision for part in ("linear", "attn", "comm")}
    keys.update({f"{kind}_parallelism": 1 for kind in ("tensor", "pipeline", "context", "expert")})
    keys["micro_batch_size"] = int(args.per_device_train_batch_size)
    keys["config_filename"] = launch_config_filename()
    return keys


class _RecordingLogger:
    """The reference's LoraLogger, noting what was logged and logging the round keys before run_start."""

    def __init__(self, inner: object, args: object, constants: ModuleType) -> None:
        self._inner = inner
        self._args = args
        self._constants = constants
        self.run_stopped = False
        self.logged_eval_samples: set[int] = set()

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    @property
    def inner(self) -> object:
        """The reference's LoraLogger."""
        return self._inner

    def _forward(self, method: str, key: str, value: object, metadata: dict | None, **kwargs: object) -> None:
        # Two frames deeper than the reference's own call (this and the method): mllog must still name the reference's line.
        mllogger = self._inner.mllogger
        mllogger.default_stack_offset += 2
        try:
            getattr(self._inner, method)(key, value=value, metadata=metadata, **kwargs)
        finally:
            mllogger.default_stack_offset -= 2

    def start(self, key: str, value: object = None, metadata: dict | None = None, **kwargs: object) -> None:
        if key == self._constants.RUN_START:
            for name, logged in round_keys(self._args).items():
                self._inner.event(key=name, value=logged)
        self._forward("start", key, value, metadata, **kwargs)

    def event(self, key: str, value: object = None, metadata: dict | None = None, **kwargs: object) -> None:
        if key == self._constants.EVAL_ACCURACY and metadata:
            self.logged_eval_samples.add(int(metadata.get("samples_count", -1)))
        self._forward("event", key, value, metadata, **kwargs)

    def end(self, key: str, value: object = None, metadata: dict | None = None, **kwargs: object) -> None:
        if key == self._constants.RUN_STOP:
            self.run_stopped = True
            samples = int((metadata or {}).get("samples_count", -1))
            if (metadata or {}).get("status") == self._constants.SUCCESS and samples not in self.logged_eval_samples:
                # The reference stops on the evaluation it has not logged yet when the target is met at the first
                # evaluation after the previous logging step: log it as the reference logs one, then the run_stop.
                if not self.logged_eval_samples:  # no block was opened yet: the reference opens one after each evaluation
                    self._inner.start(self._constants.BLOCK_START, value="", metadata={"samples_count": 0})
                self._inner.end(self._constants.BLOCK_STOP, value="", metadata={"samples_count": samples})
                self._inner.event(self._constants.EVAL_ACCURACY, value=value, metadata={"samples_count": samples})
                self.logged_eval_samples.add(samples)
        self._forward("end", key, value, metadata, **kwargs)


def _patch_logging_utils(module: ModuleType) -> None:
    callback = module.MLPerfCallback
    constants = module.constants
    original_init = callback.__init__
    original_train_begin = callback.on_train_begin

    def __init__(self, *args: object, **kwargs: object) -> None:
        original_init(self, *args, **kwargs)
        self.submission_info.update(submission_values())

    def on_train_begin(self, args: object, state: object, control: object, **kwargs: object) -> object:
        self.mllogger = _RecordingLogger(self.mllogger, args, constants)
        return original_train_begin(self, args, state, control, **kwargs)

    def on_train_end(self, args: object, state: object, control: object, **kwargs: object) -> object:
        logger = self.mllogger
        if not isinstance(logger, _RecordingLogger) or logger.run_stopped:
            return control
        evals = [entry for entry in state.log_history if "eval_loss" in entry]
        last = evals[-1] if evals else None
        own = logger.inner  # logged from here: mllog names this file
        if last is not None and last["step"] > args.eval_delay and last["step"] * self.gbs not in logger.logged_eval_samples:
            # the reference's own sequence for an evaluation (block_stop, eval_accuracy, block_start)
            own.end(constants.BLOCK_STOP, value="", metadata={"samples_count": last["step"] * self.gbs})
            own.event(constants.EVAL_ACCURACY, value=last["eval_loss"], metadata={"samples_count": last["step"] * self.gbs})
            own.start(constants.BLOCK_START, value="", metadata={"samples_count": last["step"]})
        reached = last is not None and last["eval_loss"] <= own.target_eval_loss
        logger.run_stopped = True
        own.end(
            constants.RUN_STOP,
            value=last["eval_loss"] if last else None,
            metadata={"samples_count": state.global_step * self.gbs, "status": constants.SUCCESS if reached else constants.ABORTED},
        )
        return control

    callback.__init__ = __init__
    callback.on_train_begin = on_train_begin
    callback.on_train_end = on_train_end


def _patch_utils(module: ModuleType) -> None:
    if not hasattr(module, "create_and_prepare_model"):
        return  # another module named utils
    original = module.create_and_prepare_model

    def create_and_prepare_model(args: object) -> object:
        from transformers import set_seed

        set_seed(args.seed)
        return original(args)

    module.create_and_prepare_model = create_and_prepare_model


after_import("mlperf_logging_utils", _patch_logging_utils)
after_import("utils", _patch_utils)
