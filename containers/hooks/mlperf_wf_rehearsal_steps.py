"""The rehearsal hook: stops a run after a few training steps and records each rank (``mlperf-wf rehearse``).

``sitecustomize`` imports this module in every process of a run where ``MLPERF_WF_REHEARSAL_STEPS`` is set (the
rehearsal's train job sets it, for every benchmark). It counts training steps as the calls of ``step`` of every
``torch.optim.Optimizer`` (torch's global post-step hook, which the fused and distributed optimizers of Apex,
Transformer Engine, Megatron and TorchRec subclass): a training step is the most steps one optimizer object took, so a
step that steps several optimizers (a chained or per-group optimizer) counts once. After ``N`` steps it writes this
rank's record and ends the process with status 0, on every rank at the same step. A framework step that is not a torch
optimizer's (bert's TensorFlow) is not counted: such a run is not stopped, and its ranks' records say so at exit.

Where the framework must end the run itself (``MLPERF_WF_REHEARSAL_STOP=framework``: the rehearsal job set its own step
limit to ``N``, as qwen35_397b_grpo's NeMo-RL, whose driver fails when one of its Ray actors ends), the hook only counts:
it writes the rank's record after every step (status 0) and never ends the process, so the record stands when the
driver kills its actors at shutdown (``ray.kill``: no ``atexit``). A process there that is no rank but opened inputs
(the driver, which reads the data) writes ``opened-<host>-<pid>.json`` at exit: its inputs only.

A rank's record (``MLPERF_WF_REHEARSAL_RANKS/rank-<host>-<pid>.json``): rank, local rank, node, world size, rendezvous
address, the files opened for reading under each input folder (Python's ``open`` audit events: ``MLPERF_WF_REHEARSAL_INPUTS``,
``role=folder,...``), the time of each step, whether CUDA was present and the peak GPU memory
(``torch.cuda.max_memory_allocated``), and the exit status. A process records itself where it took a step or joined
a ``torch.distributed`` world (a launcher process does neither).

Runs down to Python 3.6 (see ``sitecustomize``); audit events need 3.8 (older: no files recorded).
"""

import json
import os
import socket
import sys
import time
from typing import Any, Dict, List, Optional

STEPS_VARIABLE = "MLPERF_WF_REHEARSAL_STEPS"
RANKS_VARIABLE = "MLPERF_WF_REHEARSAL_RANKS"
INPUTS_VARIABLE = "MLPERF_WF_REHEARSAL_INPUTS"
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

    def hook(event: str, args: Any) -> None:
        if event != "open" or _done:
            return
        path, mode, flags = args
        if not isinstance(path, (str, bytes)):
            return  # a file descriptor
        if any(letter in mode for letter in "wax+") if isinstance(mode, str) else flags & WRITE_FLAGS:
            return  # a write (or a rank's check that a mount is read-only) is no input read
        try:
            path = os.path.abspath(os.fsdecode(path))
            for role, folder in inputs.items():
                if path.startswith(folder) or path + "/" == folder:
                    seen = _opened[role]
                    if path not in seen["files"]:
                        seen["count"] += 1
                        if len(seen["files"]) < FILES_KEPT:
                            seen["files"].append(path)
                    break
        except Exception:  # the audit never fails the reference's own open
            pass

    sys.addaudithook(hook)


def _distributed() -> Optional[Any]:
    torch = sys.modules.get("torch")
    try:
        dist = torch.distributed if torch is not None else None
        return dist if dist is not None and dist.is_available() and dist.is_initialized() else None
    except Exception:
        return None


def _gpu() -> Dict[str, Any]:
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return {"cuda": True, "peak_gpu_memory_bytes": int(torch.cuda.max_memory_allocated())}
    except Exception:
        pass
    return {"cuda": False, "peak_gpu_memory_bytes": None}


def record(status: Optional[int], how: str) -> Dict[str, Any]:
    """This rank's record (see the module docstring)."""
    env = os.environ
    dist = _distributed()
    rank = dist.get_rank() if dist is not None else int(env.get("RANK", env.get("SLURM_PROCID", "0")))
    world = dist.get_world_size() if dist is not None else int(env.get("WORLD_SIZE", env.get("SLURM_NTASKS", "1")))
    times, previous = [], _started
    for end in _step_ends:
        times.append(round(end - previous, 6))
        previous = end
    found = {
        "rank": rank,
        "local_rank": int(env.get("LOCAL_RANK", env.get("SLURM_LOCALID", "0"))),
        "node": socket.gethostname(),
        "pid": os.getpid(),
        "world_size": world,
        "rendezvous": "{}:{}".format(env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", "")),
        "steps_wanted": int(env.get(STEPS_VARIABLE, "0") or 0),
        "steps": max(_steps_of.values()) if _steps_of else 0,
        "step_seconds": times,
        "opened": _opened,
        "status": status,
        "how": how,
    }
    found.update(_gpu())
    return found


def write(found: Dict[str, Any], kind: str = "rank") -> None:
    """The record as ``<kind>-<host>-<pid>.json``, whole or not at all (written beside it, then renamed)."""
    folder = os.environ.get(RANKS_VARIABLE)
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "{}-{}-{}.json".format(kind, found["node"], found["pid"]))
    partial = os.path.join(folder, ".{}-{}-{}.partial".format(kind, found["node"], found["pid"]))
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


def _at_exit_framework() -> None:
    """Where the framework ends the run: a rank's error is recorded over its last step's record; a process that is no
    rank but opened inputs records those."""
    if _step_ends:
        if _exit_status.get("error"):
            how = "ended after {} training steps ({})".format(len(_step_ends), _exit_status["error"])
            write(record(_exit_status.get("status"), how))
        return
    if any(seen["count"] for seen in _opened.values()):
        found = record(None, "no rank: opened inputs")
        write({key: found[key] for key in ("node", "pid", "opened", "how")}, kind="opened")


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


def _at_exit() -> None:
    """A process that ends another way than after its N steps: recorded where it is a rank (stepped or in a world)."""
    if _framework_stops():
        _at_exit_framework()
        return
    if _done or not (_step_ends or _distributed() is not None):
        return
    how = f"ended after {len(_step_ends)} of {os.environ.get(STEPS_VARIABLE)} training steps"
    if _exit_status.get("error"):
        how += " ({})".format(_exit_status["error"])
    write(record(_exit_status.get("status"), how))


_exit_status: Dict[str, Any] = {}


def _note_exception(kind: Any, value: Any, trace: Any) -> None:
    _exit_status["status"] = 1
    _exit_status["error"] = f"{kind.__name__}: {value}"
    _previous_excepthook(kind, value, trace)


_previous_excepthook = sys.excepthook


def install() -> None:
    """Count the steps and record the opened inputs from now on in this process."""
    import atexit

    from sitecustomize import after_import

    _audit_opens(_inputs())
    after_import("torch.optim.optimizer", _count_steps)
    atexit.register(_at_exit)
    sys.excepthook = _note_exception


if os.environ.get(STEPS_VARIABLE):
    install()
