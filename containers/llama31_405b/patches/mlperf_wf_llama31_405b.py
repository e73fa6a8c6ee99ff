"""Round patches for the llama31_405b reference (mlcommons/training aa344c7, large_language_model_pretraining/nemo),
applied at import by ``containers/hooks/sitecustomize.py`` in every process of a run (the launcher and every rank).
The reference's files are not edited. What changes, and why:

1. **The log goes to the run's result file.** ``callbacks.py:36,61`` configures mllog at import with the
   hard-coded ``/mlperf-outputs/mlperf_llama31_405b.log`` (``run_llama31.sh:118`` creates the folder):
   every run made in a container appends to one file, and the import fails where the folder does not exist.
   With ``COMPLIANCE_FILE`` set (the workflow sets it for every run), mllog writes there instead.
2. **The submission values come from the workflow's config.** ``MLLogger.submission_info``
   (``callbacks.py:52-59``) logs ``submission_org`` "reference_implementation", ``submission_platform``
   "DGX-H100" and ``submission_division`` closed. Each key given through ``MLPERF_SUBMISSION_*`` replaces the
   reference's value; the reference's method still logs them, in its order.
3. **The run executes here, not through an SSH tunnel to a Slurm login node.** ``pretrain_llama31.py:29-91``
   builds a NeMo-Run ``SlurmExecutor`` over an ``SSHTunnel`` and submits detached jobs (``exp.run(...,
   detach=True)``, line 536). The workflow already holds the allocation and starts the container on each node,
   so ``SlurmExecutor`` becomes NeMo-Run's ``LocalExecutor`` with the torchrun launcher and the same tasks per
   node (the script's ``launcher = None`` keeps torchrun), and ``Experiment.run`` waits for the jobs
   (``detach=False``) so the result file is complete when the command returns. On several nodes (the workflow
   starts one container per node and sets ``MLPERF_WF_NNODES``/``_NODE_RANK``/``_MASTER_ADDR``/``_MASTER_PORT``),
   torchrun gets them through its own environment variables (``PET_NNODES``, ``PET_NODE_RANK``,
   ``PET_MASTER_ADDR``, ``PET_MASTER_PORT``), and the executor the node count.
4. **Paths the reference hard-codes point into the run's mounts.** ``/preproc_data`` (the dataset,
   ``pretrain_llama31.py:215-226``) becomes ``MLPERF_WF_PREPROC_DATA``; ``/npy_index`` (NeMo's run-time sample
   index, line 237, ">400GB" per config.sh:40-42) becomes ``MLPERF_WF_NPY_INDEX``; the recipe's ``/outputs``
   (lines 110-136) becomes ``MLPERF_WF_NEMO_OUTPUTS``. Each only when its variable is set.

Parts 1, 2 and 4's path rewriting are tested on CPU against mlperf-logging and stand-in classes
(tests/test_llama31_405b_patches.py); part 3 and the NeMo attachment points need the NeMo 24.12 image.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from types import ModuleType

from mlperf_wf_mllog import redirect_log
from mlperf_wf_submission import submission_values
from sitecustomize import after_import

REFERENCE_LOG = "/mlperf-outputs/mlperf_llama31_405b.log"
"""Where callbacks.py:36 sends the mllog output."""
REFERENCE_STACK_OFFSET = 2
"""``MLLogger(default_stack_offset=2)`` (callbacks.py:36): the frame mllog names in each line's metadata."""
PATH_VARIABLES = {"/preproc_data": "MLPERF_WF_PREPROC_DATA", "/npy_index": "MLPERF_WF_NPY_INDEX", "/outputs": "MLPERF_WF_NEMO_OUTPUTS"}
"""Container path the reference hard-codes -> the variable that moves it."""


def moved(path: object) -> object:
    """``path`` with a hard-coded reference folder replaced by its variable's value (other values unchanged)."""
    if not isinstance(path, str):
        return path
    for folder, variable in PATH_VARIABLES.items():
        target = os.environ.get(variable)
        if target and (path == folder or path.startswith(folder + "/")):
            return target + path[len(folder) :]
    return path


def moved_all(value: object) -> object:
    """:func:`moved` through lists and dicts (NeMo's ``paths`` is a dict of lists of weights and prefixes)."""
    if isinstance(value, dict):
        return {key: moved_all(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(moved_all(item) for item in value)
    return moved(value)


def patch_callbacks(callbacks: ModuleType) -> None:
    """``MLLogger.submission_info`` logs the configured ``submission_*`` values."""
    original = callbacks.MLLogger.submission_info

    @functools.wraps(original)
    def submission_info(self: object) -> object:
        values = submission_values()
        event = self.event

        def configured(*args: object, key: str, value: object = None, **kwargs: object) -> object:
            if kwargs.get("stack_offset") is None:
                # One frame more than the reference's logger expects (this one): the logged file and line stay callbacks.py's.
                kwargs["stack_offset"] = REFERENCE_STACK_OFFSET + 1
            return event(*args, key=key, value=values.get(key, value), **kwargs)

        self.event = configured
        try:
            return original(self)
        finally:
            del self.event

    callbacks.MLLogger.submission_info = submission_info


def local_executor(nemo_run: ModuleType):
    """A ``SlurmExecutor`` stand-in: NeMo-Run's ``LocalExecutor`` with torchrun and the tasks per node asked for."""
    base = nemo_run.LocalExecutor

    class WorkflowExecutor(base):
        """Keeps torchrun when the script sets ``launcher = None`` (its Slurm executor let srun start the tasks)."""

        def __setattr__(self, name: str, value: object) -> None:
            super().__setattr__(name, "torchrun" if name == "launcher" and value is None else value)

    fields = {field.name for field in dataclasses.fields(base)} if dataclasses.is_dataclass(base) else set()

    def make(**kwargs: object):
        executor = WorkflowExecutor(**{k: v for k, v in kwargs.items() if k in fields and k in ("ntasks_per_node", "nodes")})
        executor.launcher = "torchrun"
        for name in ("ntasks_per_node", "nodes"):
            if name in kwargs:
                setattr(executor, name, kwargs[name])
        if hasattr(executor, "env_vars") and isinstance(executor.env_vars, dict):
            executor.env_vars.update(torchrun_environment())
        return executor

    return make


MULTI_NODE_VARIABLES = {
    "MLPERF_WF_NNODES": "PET_NNODES",
    "MLPERF_WF_NODE_RANK": "PET_NODE_RANK",
    "MLPERF_WF_MASTER_ADDR": "PET_MASTER_ADDR",
    "MLPERF_WF_MASTER_PORT": "PET_MASTER_PORT",
}
"""The workflow's multi-node values -> the torchrun environment variables that carry them."""


def torchrun_environment() -> dict[str, str]:
    """torchrun's ``PET_*`` variables for this node, from the workflow's multi-node values (empty on one node)."""
    return {pet: os.environ[ours] for ours, pet in MULTI_NODE_VARIABLES.items() if os.environ.get(ours)}


def patch_nemo_run(nemo_run: ModuleType) -> None:
    """Local execution in the workflow's allocation (part 3 of the module docstring)."""
    os.environ.update(torchrun_environment())  # inherited by the torchrun NeMo-Run starts
    nemo_run.SlurmExecutor = local_executor(nemo_run)
    nemo_run.SSHTunnel = lambda **kwargs: None
    original_run = nemo_run.Experiment.run

    @functools.wraps(original_run)
    def run(self: object, *args: object, **kwargs: object) -> object:
        kwargs["detach"] = False
        return original_run(self, *args, **kwargs)

    nemo_run.Experiment.run = run


def patch_data_module(module: ModuleType) -> None:
    """``PreTrainingDataModule(paths=..., index_mapping_dir=...)`` reads the moved paths."""
    cls = module.PreTrainingDataModule
    original = cls.__init__

    @functools.wraps(original)
    def init(self: object, *args: object, **kwargs: object) -> None:
        for name in ("paths", "index_mapping_dir"):
            if name in kwargs:
                kwargs[name] = moved_all(kwargs[name])
        original(self, *args, **kwargs)

    cls.__init__ = init


def patch_recipe(recipe: ModuleType) -> None:
    """``pretrain_recipe(dir="/outputs", ...)`` writes NeMo's logs and checkpoints where the run's mounts are."""
    original = recipe.pretrain_recipe

    @functools.wraps(original)
    def pretrain_recipe(*args: object, **kwargs: object) -> object:
        if "dir" in kwargs:
            kwargs["dir"] = moved(kwargs["dir"])
        return original(*args, **kwargs)

    recipe.pretrain_recipe = pretrain_recipe


after_import("mlperf_logging.mllog", redirect_log(REFERENCE_LOG))
after_import("callbacks", patch_callbacks)
after_import("nemo_run", patch_nemo_run)
after_import("nemo.collections.llm.gpt.data.pre_training", patch_data_module)
after_import("nemo.collections.llm.recipes.llama31_405b", patch_recipe)
