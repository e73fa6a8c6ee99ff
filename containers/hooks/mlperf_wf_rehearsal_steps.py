"""The rehearsal hook: stops a run after a few training steps and records each rank (``mlperf-wf rehearse``).

``sitecustomize`` imports this module in every process of a run where ``MLPERF_WF_REHEARSAL_STEPS`` is set (the
rehearsal's train job sets it, for every benchmark). It counts training steps of either framework a reference trains
with:

- torch: the calls of ``step`` of every ``torch.optim.Optimizer`` (torch's global post-step hook, which the fused and
  distributed optimizers of Apex, Transformer Engine, Megatron and TorchRec subclass): a training step is the most
  steps one optimizer object took, so a step that steps several optimizers (a chained or per-group optimizer) counts
  once.
- TensorFlow's Estimator API (bert's ``run_pretraining.py``): once ``tensorflow_estimator``'s estimator module is
  imported, ``Estimator.train`` (which ``TPUEstimator.train`` calls too, and ``train_and_evaluate``) gets one more
  ``SessionRunHook``, and a training step is one session run of its training loop (one step on CPUs and GPUs, where
  ``MirroredStrategy`` runs a step of every replica in one session run). ``evaluate`` and ``predict`` are never
  counted.

Where the framework must end the run itself (``MLPERF_WF_REHEARSAL_STOP=framework``: the rehearsal job set its own step
limit to ``N``, as qwen35_397b_grpo's NeMo-RL, whose driver fails when one of its Ray actors ends), the hook only counts:
it writes the rank's record after every step (status 0) and never ends the process, so the record stands when the
driver kills its actors at shutdown (``ray.kill``: no ``atexit``).

After ``N`` steps it writes this rank's record and ends the process with status 0, on every rank at the same step.

A rank's record (``MLPERF_WF_REHEARSAL_RANKS/rank-<host>-<pid>.json``): the framework that stepped, rank, local rank,
node, world size, rendezvous address, the files opened for reading under each input folder (Python's ``open`` audit
events: ``MLPERF_WF_REHEARSAL_INPUTS``, ``role=folder,...``), the time of each step, whether a CUDA GPU was present
and the peak GPU memory (``torch.cuda.max_memory_allocated``; for TensorFlow the largest peak of the process's GPUs,
``tf.config.experimental.get_memory_info``, which TensorFlow 2.5 and later have), and the exit status. The rank and
world come from ``torch.distributed`` where a world is formed, from ``TF_CONFIG`` where TensorFlow's multi-worker
world is described, else from the launcher's variables (``RANK``/``LOCAL_RANK``/``WORLD_SIZE``, then SLURM's task
variables): a TensorFlow process that drives all its node's GPUs is its node's one task, so its rank is the node's
task rank and its world the job's tasks. A process records itself where it took a step, joined a ``torch.distributed``
world or entered ``Estimator.train`` (a launcher process, or an evaluation process, does none of these).

Runs down to Python 3.6 (see ``sitecustomize``) and in every image, with or without torch or TensorFlow (nothing of
either is imported here); audit events need 3.8 (older: no files recorded).
"""

import functools
import importlib
import json
import os
import re
import socket
import sys
import time
from typing import Any, Dict, List, Optional

STEPS_VARIABLE = "MLPERF_WF_REHEARSAL_STEPS"
RANKS_VARIABLE = "MLPERF_WF_REHEARSAL_RANKS"
INPUTS_VARIABLE = "MLPERF_WF_REHEARSAL_INPUTS"
ESTIMATOR_MODULE = "tensorflow_estimator.python.estimator.estimator"
"""The module of TensorFlow's ``Estimator`` (TensorFlow 1.13 and later, and 2.x)."""
STOP_VARIABLE = "MLPERF_WF_REHEARSAL_STOP"
FRAMEWORK_STOP = "framework"
"""``STOP_VARIABLE``'s value where the framework's own step limit ends the run (the hook counts and records only)."""
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
FILES_KEPT = 200
"""Opened files named per input in a record (every one is counted)."""

_started = time.time()
_steps_of: Dict[int, int] = {}
"""Optimizer object id -> its steps so far."""
_step_ends: List[float] = []
_framework: Dict[str, Any] = {"name": None, "in_training": False}
"""The framework whose training steps were counted, and whether ``Estimator.train`` was entered."""
_TENSORFLOW_STEPS = object()
"""The key of TensorFlow's session runs in ``_steps_of`` (one counter for every ``Estimator.train`` of the process)."""
_opened: Dict[str, Dict[str, Any]] = {}
_done = False


def _inputs() -> Dict[str, str]:
    found = {}
    for item in os.environ.get(INPUTS_VARIABLE, "").split(","):
        role, _, folder = item.partition("=")
        if role and folder:
            found[role] = os.path.abspath(folder).rstrip("/") + "/"
    return found


def _audit_opens(inputs: Dict[str, str]) -> None:
    if not inputs or not hasattr(sys, "addaudithook"):
        return
    for role in inputs:
        _opened[role] = {"count": 0, "files": []}

    def count(path: str) -> None:
        for role, folder in inputs.items():
            if path.startswith(folder) or path + "/" == folder:
                seen = _opened[role]
                if path not in seen["files"]:
                    seen["count"] += 1
                    if len(seen["files"]) < FILES_KEPT:
                        seen["files"].append(path)
                break

    def hook(event: str, args: Any) -> None:
        if _done:
            return
        try:
            if event == "open":
                path, mode, flags = args
                if not isinstance(path, (str, bytes)):
                    return  # a file descriptor
                if any(letter in mode for letter in "wax+") if isinstance(mode, str) else flags & WRITE_FLAGS:
                    return  # a write (or a rank's check that a mount is read-only) is no input read
                count(os.path.abspath(os.fsdecode(path)))
            elif event == "subprocess.Popen":
                # a file handed to a program the process starts (NeMo-Gym's task SIFs to apptainer) is read by it
                for path in _paths_in(args[1]):
                    count(path)
        except Exception:  # the audit never fails the reference's own open or program
            pass

    sys.addaudithook(hook)


def _paths_in(argv: Any) -> List[str]:
    """The absolute paths among a program's arguments (each word of each, as a shell's ``-c`` line holds several):
    the word, a ``--flag=value``'s value, and the parts of a ``host:container`` or comma-separated list (a bind's)."""
    found = []
    for argument in [argv] if isinstance(argv, (str, bytes)) else list(argv or ()):
        try:
            words = os.fsdecode(argument).split()  # a shell's command line (sh -c '...') is one argument
        except TypeError:
            continue
        for word in words:
            pieces = re.split("[,:]", word) + (re.split("[,:]", word.partition("=")[2]) if "=" in word else [])
            found += [os.path.abspath(piece) for piece in pieces if piece.startswith("/")]
    return found


def _distributed() -> Optional[Any]:
    torch = sys.modules.get("torch")
    try:
        dist = torch.distributed if torch is not None else None
        return dist if dist is not None and dist.is_available() and dist.is_initialized() else None
    except Exception:
        return None


def _gpu() -> Dict[str, Any]:
    if _framework["name"] == "tensorflow":
        return _tensorflow_gpu()
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return {"cuda": True, "peak_gpu_memory_bytes": int(torch.cuda.max_memory_allocated())}
    except Exception:
        pass
    return {"cuda": False, "peak_gpu_memory_bytes": None}


def _tensorflow_gpu() -> Dict[str, Any]:
    """Whether the TensorFlow process has GPUs, and the largest peak of their memory (None before TensorFlow 2.5)."""
    tf = sys.modules.get("tensorflow")
    try:
        config = tf.config if tf is not None else None
        listed = getattr(config, "list_physical_devices", None) or config.experimental.list_physical_devices
        gpus = listed("GPU")
    except Exception:
        return {"cuda": False, "peak_gpu_memory_bytes": None}
    if not gpus:
        return {"cuda": False, "peak_gpu_memory_bytes": None}
    peaks = []
    memory_info = getattr(config.experimental, "get_memory_info", None)
    for index in range(len(gpus)) if memory_info is not None else ():
        try:
            peaks.append(int(memory_info(f"GPU:{index}")["peak"]))
        except Exception:  # a GPU this process never placed anything on
            continue
    return {"cuda": True, "peak_gpu_memory_bytes": max(peaks) if peaks else None}


def _tensorflow_world() -> Optional[Dict[str, Any]]:
    """Rank, world size and rendezvous of TensorFlow's multi-worker world (``TF_CONFIG``), where one is described."""
    try:
        described = json.loads(os.environ.get("TF_CONFIG", "") or "{}")
        cluster, task = described.get("cluster") or {}, described.get("task") or {}
        members = [(kind, index) for kind in ("chief", "worker") for index in range(len(cluster.get(kind) or ()))]
        if not members or (task.get("type"), int(task.get("index", 0))) not in members:
            return None
        first = cluster[members[0][0]][0]
        return {"rank": members.index((task["type"], int(task.get("index", 0)))), "world_size": len(members), "rendezvous": first}
    except Exception:
        return None


def record(status: Optional[int], how: str) -> Dict[str, Any]:
    """This rank's record (see the module docstring)."""
    env = os.environ
    dist = _distributed()
    rank = dist.get_rank() if dist is not None else int(env.get("RANK", env.get("SLURM_PROCID", "0")))
    world = dist.get_world_size() if dist is not None else int(env.get("WORLD_SIZE", env.get("SLURM_NTASKS", "1")))
    rendezvous = "{}:{}".format(env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", ""))
    if _framework["name"] == "tensorflow":
        # the launch line's MASTER_ADDR is torch's; a TensorFlow process joins a world only through TF_CONFIG
        tensorflow_world = _tensorflow_world()
        rendezvous = ""
        if tensorflow_world is not None:
            rank, world, rendezvous = tensorflow_world["rank"], tensorflow_world["world_size"], tensorflow_world["rendezvous"]
    times, previous = [], _started
    for end in _step_ends:
        times.append(round(end - previous, 6))
        previous = end
    found = {
        "framework": _framework["name"] or ("torch" if dist is not None else None),
        "rank": rank,
        "local_rank": int(env.get("LOCAL_RANK", env.get("SLURM_LOCALID", "0"))),
        "node": socket.gethostname(),
        "pid": os.getpid(),
        "world_size": world,
        "rendezvous": rendezvous,
        "steps_wanted": int(env.get(STEPS_VARIABLE, "0") or 0),
        "steps": max(_steps_of.values()) if _steps_of else 0,
        "step_seconds": times,
        "opened": _opened,
        "status": status,
        "how": how,
    }
    found.update(_gpu())
    return found


def write(found: Dict[str, Any]) -> None:
    """The record as ``rank-<host>-<pid>.json``, whole or not at all (written beside it, then renamed)."""
    folder = os.environ.get(RANKS_VARIABLE)
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "rank-{}-{}.json".format(found["node"], found["pid"]))
    partial = os.path.join(folder, ".rank-{}-{}.partial".format(found["node"], found["pid"]))
    with open(partial, "w") as stream:
        json.dump(found, stream, indent=1)
    os.replace(partial, path)


def _stop() -> None:
    """N steps taken: record, flush every log, and end the process (0) without the reference's own teardown."""
    global _done
    found = record(0, f"stopped after {len(_step_ends)} training steps")
    _done = True
    write(found)
    import logging

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    if _framework["name"] is None:
        _framework["name"] = "torch"
    key = id(optimizer)
    _steps_of[key] = _steps_of.get(key, 0) + 1
    if _steps_of[key] > len(_step_ends):
        _step_ends.append(time.time())
        if _framework_stops():
            _record_step()
        elif len(_step_ends) >= int(os.environ.get(STEPS_VARIABLE, "0") or 0):
            _stop()


def _framework_stops() -> bool:
    return os.environ.get(STOP_VARIABLE) == FRAMEWORK_STOP


def _record_step() -> None:
    """The framework ends the run: this rank's record after each step, the process left running."""
    write(record(0, f"took {len(_step_ends)} training steps; the run is ended by the framework's own step limit"))


def _count_steps(optimizer_module: Any) -> None:
    """torch's global post-step hook (torch 2.0 and later); before it (rgat's torch 1.13), each optimizer's ``step``
    wrapped as it is made (a bound method still, as torch's learning-rate schedulers expect of it)."""
    if hasattr(optimizer_module, "register_optimizer_step_post_hook"):
        optimizer_module.register_optimizer_step_post_hook(_after_step)
        return
    import functools
    import types

    original_init = optimizer_module.Optimizer.__init__

    @functools.wraps(original_init)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        step = self.step

        def counted(optimizer: Any, *step_args: Any, **step_kwargs: Any) -> Any:
            result = step(*step_args, **step_kwargs)
            _after_step(optimizer, step_args, step_kwargs)
            return result

        self.step = types.MethodType(counted, self)

    optimizer_module.Optimizer.__init__ = init


def _count_tensorflow_steps(estimator_module: Any) -> None:
    """Every ``Estimator.train`` of the process (``TPUEstimator.train`` calls it) gets one more ``SessionRunHook``, which
    counts each session run of the training loop as a step; ``evaluate`` and ``predict`` never call ``train``."""
    session_run_hook = importlib.import_module("tensorflow.python.training.session_run_hook")

    class StepCounter(session_run_hook.SessionRunHook):
        """Counts the training loop's session runs (the rehearsal hook's)."""

        def after_run(self, run_context: Any, run_values: Any) -> None:
            _after_step(_TENSORFLOW_STEPS, None, None)

    original_train = estimator_module.Estimator.train

    @functools.wraps(original_train)
    def train(self: Any, input_fn: Any, hooks: Any = None, *args: Any, **kwargs: Any) -> Any:
        _framework["name"] = "tensorflow"
        _framework["in_training"] = True
        return original_train(self, input_fn, [*(hooks or ()), StepCounter()], *args, **kwargs)

    estimator_module.Estimator.train = train


def _at_exit() -> None:
    """A process that ends another way than after its N steps: recorded where it is a rank (stepped, in a world, or
    in an Estimator's training), or as no rank (``rank`` None) where it read inputs: an entry process that loads the
    data and spawns its ranks (rgat's), or a framework-stopped run's driver, whose reads no rank's record holds."""
    if _done:
        return
    if _framework_stops():
        if _step_ends and not _exit_status.get("error"):
            return  # the record of its last step stands (its driver ends it)
        is_rank = bool(_step_ends)  # a process of the world that took no step (a generation worker) is no training rank
    else:
        is_rank = bool(_step_ends or _framework["in_training"] or _distributed() is not None)
    error = " ({})".format(_exit_status["error"]) if _exit_status.get("error") else ""
    if is_rank:
        write(record(_exit_status.get("status"), f"ended after {len(_step_ends)} of {os.environ.get(STEPS_VARIABLE)} training steps{error}"))
    elif any(seen["count"] for seen in _opened.values()):
        status = _exit_status.get("status", 0)
        write(dict(record(status, f"no rank: read the inputs and ended with status {status}{error}"), rank=None, local_rank=None, world_size=None))


_exit_status: Dict[str, Any] = {}


def _note_exception(kind: Any, value: Any, trace: Any) -> None:
    _exit_status["status"] = 1
    _exit_status["error"] = f"{kind.__name__}: {value}"
    _previous_excepthook(kind, value, trace)


_previous_excepthook = sys.excepthook
_previous_exit = sys.exit


def _note_exit(code: Any = None) -> None:
    """``sys.exit``, its status kept for the record written at exit."""
    _exit_status["status"] = code if isinstance(code, int) else (0 if code is None else 1)
    _previous_exit(code)


def install() -> None:
    """Count the steps and record the opened inputs from now on in this process."""
    import atexit

    from sitecustomize import after_import

    _audit_opens(_inputs())
    after_import("torch.optim.optimizer", _count_steps)
    after_import(ESTIMATOR_MODULE, _count_tensorflow_steps)
    atexit.register(_at_exit)
    sys.excepthook = _note_exception
    sys.exit = _note_exit


if os.environ.get(STEPS_VARIABLE):
    install()
