"""Round patches for the bert reference (mlcommons/training aa344c7, retired_benchmarks/bert), applied at import.

Loaded by ``containers/hooks/sitecustomize.py`` in both processes of a run (training and
evaluation, each a ``run_pretraining.py``); the reference's files are not edited. It changes
``mlp_logging`` (and, for the seed, TensorFlow's estimator ``RunConfig``), because ruleset 5.0.0
asks for more than the reference logs:

1. **The log goes to the run's result file** (``COMPLIANCE_FILE``), not ``bert.log`` in the
   working directory; both processes append to it.
2. **The submission values** come from ``MLPERF_SUBMISSION_*`` instead of "reference_implementation".
3. **Keys closed_bert.yaml requires that the reference does not log**, with the run's own flag values:
   ``opt_lamb_weight_decay_rate`` (the reference logs it as ``opt_weight_decay``),
   ``opt_learning_rate_training_steps`` (logged as the misspelt ``opt_learning_rate_trainnig_steps``),
   ``num_warmup_steps``; ``cache_clear`` (common.yaml), whether the workflow's launch line dropped the page
   cache on the host as NVIDIA's run.sub does (``MLPERF_WF_CACHE_CLEARED``, which needs root there); and ``seed``.
4. **A seed that is used**: the reference takes none; ``SEED`` (set by the workflow for each run) becomes
   the estimator's ``tf_random_seed`` and is logged.
5. **Progress metadata the checker reads**: the reference gives ``step_num``/``first_step_num``; block,
   eval and eval_accuracy events also get ``epoch_num`` and ``samples_count`` = steps x global batch
   (bert's RCPs count samples). ``eval_start`` is logged when its evaluation ends (with its start time),
   as only then is the checkpoint's step known.
6. **One run_stop, with a status**: the training process's run_stop (logged when it reaches
   num_train_steps, with no status) is dropped; the evaluation process logs run_stop with status
   ``success`` at the first evaluation that reaches the target (the clock stops there, as the rules say), or
   ``aborted`` when it has evaluated the last checkpoint without reaching it; never a second one (it also
   looks in the result file, so a restarted evaluation process does not log another).

7. **One evaluation per checkpoint.** The evaluation process loops ``estimator.evaluate`` with no pause
   (run_pretraining.py:617-642): it scores the latest checkpoint again and again, back to back, on the GPU it shares
   with a training replica (8 GPUs, GBS 256: training needs them all), slowing every synchronous training step for
   the whole run, and logs the same checkpoint's ``eval_accuracy`` many times. ``Estimator.evaluate`` here first waits
   (polling the model folder's ``checkpoint`` file every 5 s) until the training has written a checkpoint this
   process has not scored; the first evaluation (the starting checkpoint) does not wait, and after 30 minutes without
   a new checkpoint it scores the same one again, as the reference does.

Written for the image's Python (3.6 in tensorflow/tensorflow:2.4.0-gpu), so no annotations that need newer.
"""

import functools
import os
import time

from mlperf_wf_mllog import cache_cleared, lines_logged_so_far, result_file
from mlperf_wf_submission import submission_values
from sitecustomize import after_import

SEED_VARIABLE = "SEED"
TARGET = 0.720
"""closed_bert.yaml's ATLEAST_ONE_CHECK: masked-LM accuracy >= 0.720."""


def run_seed():
    """The run's seed from the workflow, or None."""
    value = os.environ.get(SEED_VARIABLE)
    return int(value) if value else None


class _State:
    pending_eval_start_ms = None
    stopped = False


def _run_stop_logged():
    """Whether the run already logged a run_stop (a restarted evaluation process must not log a second): in the result
    file, or in any process's own file while the run runs (mlperf_wf_mllog.lines_logged_so_far)."""
    return any('"key": "run_stop"' in line for line in lines_logged_so_far())


def _samples(flags, step):
    return int(step) * int(flags.train_batch_size)


def _patch_mlp_logging(module):
    constants = module.CONSTANTS
    original_get_logger = module.get_mlperf_logger
    original_print = module._mllog_print
    original_run_params = module.mlperf_run_param_log
    flags = module.FLAGS

    @functools.wraps(original_get_logger)
    def get_mlperf_logger(path, filename="mlperf.log"):
        target = result_file()
        if not target:
            return original_get_logger(path, filename)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        return original_get_logger(os.path.dirname(target), os.path.basename(target))

    def _with_progress(metadata):
        metadata = dict(metadata or {})
        if "step_num" in metadata:
            samples = _samples(flags, metadata["step_num"])
            metadata.setdefault("epoch_num", samples)
            metadata.setdefault("samples_count", samples)
        if "first_step_num" in metadata:
            first = _samples(flags, int(metadata["first_step_num"]) - 1)
            metadata.setdefault("first_epoch_num", first)
            metadata.setdefault("samples_count", first)
            metadata.setdefault("epoch_count", _samples(flags, metadata.get("step_count", flags.save_checkpoints_steps)))
        return metadata

    @functools.wraps(original_print)
    def _mllog_print(logger, *args, **kwargs):
        key = kwargs.get("key", args[0] if args else None)
        if key == constants.RUN_STOP:
            return None  # the evaluation process logs the run's one run_stop (point 6)
        if key == constants.EVAL_START:
            _State.pending_eval_start_ms = int(time.time() * 1000)
            return None
        kwargs["metadata"] = _with_progress(kwargs.get("metadata"))
        if key == constants.EVAL_STOP and _State.pending_eval_start_ms is not None:
            original_print(module.mllogger.start, key=constants.EVAL_START, metadata=kwargs["metadata"], time_ms=_State.pending_eval_start_ms)
            _State.pending_eval_start_ms = None
        result = original_print(logger, *args, **kwargs)
        if key == constants.EVAL_ACCURACY and not _State.stopped and not _run_stop_logged():
            step = int(kwargs["metadata"].get("step_num", 0))
            reached = float(kwargs.get("value")) >= TARGET
            if reached or step >= int(flags.num_train_steps):
                _State.stopped = True
                status = constants.SUCCESS if reached else constants.ABORTED
                original_print(module.mllogger.end, key=constants.RUN_STOP, metadata=dict(kwargs["metadata"], status=status))
        return result

    @functools.wraps(original_run_params)
    def mlperf_run_param_log():
        original_run_params()
        module.mllog_event(key=constants.CACHE_CLEAR, value=cache_cleared())
        module.mllog_event(key="opt_lamb_weight_decay_rate", value=flags.lamb_weight_decay_rate)
        module.mllog_event(key="opt_learning_rate_training_steps", value=flags.num_train_steps)
        module.mllog_event(key="num_warmup_steps", value=flags.num_warmup_steps)
        seed = run_seed()
        if seed is not None:
            module.mllog_event(key=constants.SEED, value=seed)

    module.get_mlperf_logger = get_mlperf_logger
    module._mllog_print = _mllog_print
    module.mlperf_run_param_log = mlperf_run_param_log
    _patch_submission_values(module)


def _patch_submission_values(module):
    """submission_* events carry the configured values (the reference's function still logs each key once)."""
    configured = submission_values()
    if not configured:
        return
    patched_print = module._mllog_print

    @functools.wraps(patched_print)
    def _mllog_print(logger, *args, **kwargs):
        key = kwargs.get("key", args[0] if args else None)
        if key in configured:
            kwargs["value"] = configured[key]
        return patched_print(logger, *args, **kwargs)

    module._mllog_print = _mllog_print


def _patch_estimator_seed(module):
    """tf.estimator.RunConfig(tf_random_seed=SEED) unless the caller gives one."""
    seed = run_seed()
    if seed is None:
        return
    run_config = module.RunConfig
    original_init = run_config.__init__

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("tf_random_seed", seed)
        original_init(self, *args, **kwargs)

    run_config.__init__ = __init__


NEW_CHECKPOINT_POLL_SECONDS = 5.0
NEW_CHECKPOINT_WAIT_SECONDS = 1800.0
"""How long an evaluation waits for the training's next checkpoint before it evaluates the same one again (the
reference's behaviour): one interval of 586 steps takes minutes, so this is only a bound against waiting forever."""


def latest_checkpoint(model_dir):
    """The checkpoint TensorFlow's ``checkpoint`` state file in ``model_dir`` names last (``model_checkpoint_path``), as
    ``tf.train.latest_checkpoint`` reads it, or None."""
    try:
        with open(os.path.join(model_dir, "checkpoint")) as handle:
            for line in handle:
                if line.startswith("model_checkpoint_path:"):
                    return line.split(":", 1)[1].strip().strip('"')
    except OSError:
        return None
    return None


def _patch_estimator_evaluate(module):
    """Each evaluation scores a checkpoint it has not scored yet (see 7. in the module docstring)."""
    estimator = module.Estimator
    original_evaluate = estimator.evaluate
    evaluated = {}

    @functools.wraps(original_evaluate)
    def evaluate(self, *args, **kwargs):
        if kwargs.get("checkpoint_path") is None and len(args) < 4:
            model_dir = getattr(self, "model_dir", None)
            waited = 0.0
            while model_dir in evaluated and latest_checkpoint(model_dir) == evaluated[model_dir] and waited < NEW_CHECKPOINT_WAIT_SECONDS:
                time.sleep(NEW_CHECKPOINT_POLL_SECONDS)
                waited += NEW_CHECKPOINT_POLL_SECONDS
            evaluated[model_dir] = latest_checkpoint(model_dir)
        return original_evaluate(self, *args, **kwargs)

    estimator.evaluate = evaluate


after_import("mlp_logging", _patch_mlp_logging)
after_import("tensorflow_estimator.python.estimator.run_config", _patch_estimator_seed)
after_import("tensorflow_estimator.python.estimator.estimator", _patch_estimator_evaluate)
