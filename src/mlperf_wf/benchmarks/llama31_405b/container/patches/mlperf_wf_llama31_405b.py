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
   so ``SlurmExecutor`` becomes NeMo-Run's ``LocalExecutor`` with the torchrun launcher, the same tasks per node
   and the node count (the script's ``launcher = None`` keeps torchrun), and ``Experiment.run`` waits for the jobs
   (``detach=False``) so the result file is complete when the command returns.
4. **Paths the reference hard-codes point into the run's mounts.** ``/preproc_data`` (the dataset,
   ``pretrain_llama31.py:215-226``) becomes ``MLPERF_WF_PREPROC_DATA``; ``/npy_index`` (NeMo's run-time sample
   index, line 237, ">400GB" per config.sh:40-42) becomes ``MLPERF_WF_NPY_INDEX``; the recipe's ``/outputs``
   (lines 110-136) becomes ``MLPERF_WF_NEMO_OUTPUTS``. Each only when its variable is set.
5. **One world over all nodes.** NeMo-Run's ``LocalExecutor.nnodes()`` is 1 (core/execution/local.py at
   34259bd, the commit NeMo 24.12 pins), so its torchrun component writes ``--nnodes 1 --rdzv-endpoint
   localhost:0 --node-rank 0`` and a random ``--rdzv-id`` per node: each node formed its own world (torchrun's
   flags win over ``PET_*`` variables) and Lightning refuses the trainer's ``num_nodes``. The executor here
   reports its ``nodes``; for a task on several nodes the component's multi-node arguments (shell macros of
   NeMo-Run's Slurm executor, which the local scheduler never expands) become the workflow's values
   (``MLPERF_WF_NNODES``, ``_NODE_RANK``, ``_MASTER_ADDR``/``_PORT``) and one rendezvous id shared by all nodes.
6. **The data index is built once.** The script adds ``build_data_index`` (one process on one node) before the
   training, and the reference's Slurm executor runs it once in its own job. Here every node's container runs the
   script, so every node would build the index into the one shared ``index_mapping_dir`` at once (NeMo's builder
   writes its files in place). On several nodes node 0 builds it and leaves a marker; the other nodes wait for the
   marker (``MLPERF_WF_INDEX_WAIT_SECONDS``, default the script's 1 h for that task) or node 0's failure note. A
   node 0 that dies before it can write the note is ended with the others by the run's ``srun --kill-on-bad-exit=1``.
   One copy, not one per node: the reference's own index is over 400 GB (config.sh:40-42) and it reads one.
7. **A failed task fails the job.** NeMo-Run's ``Experiment.run`` launches the training even when
   ``build_data_index`` failed and never exits non-zero for a failed task (run/experiment.py:588-612 at 34259bd), so
   a failed run would end its job with 0 and no retry. The shared hook ``mlperf_wf_nemo_run`` (containers/hooks) ends
   the launcher with status 1 at the first task that did not succeed, before the next task starts
   (tests/workflow/test_nemo_run_contract.py, against the real NeMo-Run).

Parts 1, 2 and 4's path rewriting are tested on CPU against mlperf-logging and stand-in classes
(tests/benchmarks/llama31_405b/test_llama31_405b_reference.py); parts 3, 5 and 6 on the two-node rehearsal with NeMo-Run's own executor and
torchrun component compiled from its pinned source (tests/benchmarks/llama31_405b/rehearsal.py).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time
from pathlib import Path
from types import ModuleType

from mlperf_wf_mllog import redirect_log
from mlperf_wf_nemo_run import fail_with_the_first_failed_task
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
    """A ``SlurmExecutor`` stand-in: NeMo-Run's ``LocalExecutor`` with torchrun, the tasks per node and the nodes asked for."""
    base = nemo_run.LocalExecutor

    @dataclasses.dataclass(kw_only=True)
    class WorkflowExecutor(base):
        """Keeps torchrun when the script sets ``launcher = None`` (its Slurm executor let srun start the tasks), and
        tells NeMo-Run's torchrun component its nodes (``LocalExecutor.nnodes()`` is always 1)."""

        nodes: int = 1

        def nnodes(self) -> int:
            return self.nodes

        def __setattr__(self, name: str, value: object) -> None:
            super().__setattr__(name, "torchrun" if name == "launcher" and value is None else value)

    # importable by name, as fiddle's serialization of the experiment's tasks needs
    WorkflowExecutor.__module__, WorkflowExecutor.__qualname__ = __name__, "WorkflowExecutor"
    globals()["WorkflowExecutor"] = WorkflowExecutor

    def make(**kwargs: object):
        executor = WorkflowExecutor(**{k: v for k, v in kwargs.items() if k in ("ntasks_per_node", "nodes")})
        executor.launcher = "torchrun"
        return executor

    return make


def multi_node_values() -> dict[str, str]:
    """This node's place in the run (``MLPERF_WF_*`` of the workflow's multi_node_args); empty on one node."""
    names = ("MLPERF_WF_NNODES", "MLPERF_WF_NODE_RANK", "MLPERF_WF_MASTER_ADDR", "MLPERF_WF_MASTER_PORT")
    return {name: os.environ[name] for name in names if os.environ.get(name)}


def node_rank() -> int:
    return int(os.environ.get("MLPERF_WF_NODE_RANK") or 0)


def nodes_started() -> int:
    return int(os.environ.get("MLPERF_WF_NNODES") or 1)


def multi_node_arguments(args: list[str], nnodes: int) -> list[str]:
    """torchrun's arguments with the rendezvous of the workflow's nodes instead of the component's macros and its
    per-node random id (part 5)."""
    values = multi_node_values()
    if nodes_started() != nnodes or len(values) < 4:
        raise RuntimeError(
            f"llama31_405b: a task on --nodes {nnodes} needs the workflow's multi-node values on each node; "
            f"found {values or 'none'} (MLPERF_WF_NNODES must be {nnodes})"
        )
    address, port = values["MLPERF_WF_MASTER_ADDR"], values["MLPERF_WF_MASTER_PORT"]
    replaced = {
        "--rdzv-endpoint": f"{address}:{port}",
        "--nnodes": str(nnodes),
        "--node-rank": values["MLPERF_WF_NODE_RANK"],
        "--rdzv-id": re.sub(r"[^A-Za-z0-9_-]", "-", f"mlperf-wf-{address}-{port}"),
    }
    out = list(args)
    for index, word in enumerate(out[:-1]):
        if word in replaced:
            out[index + 1] = type(out[index + 1])(replaced[word])
    return out


def patch_torchrun_component(component: ModuleType) -> None:
    """NeMo-Run's torchrun component (run/torchx_backend/components/torchrun.py) on several nodes: part 5."""
    original = component.torchrun

    @functools.wraps(original)
    def torchrun(*args: object, j: str = "1x2", **kwargs: object) -> object:
        app = original(*args, j=j, **kwargs)
        nnodes = int(j.split("x")[0].split(":")[-1])
        if nnodes > 1:
            for role in app.roles:
                role.args = multi_node_arguments(role.args, nnodes)
        return app

    component.torchrun = torchrun


def patch_nemo_run(nemo_run: ModuleType) -> None:
    """Local execution in the workflow's allocation (part 3 of the module docstring)."""
    nemo_run.SlurmExecutor = local_executor(nemo_run)
    nemo_run.SSHTunnel = lambda **kwargs: None
    original_run = nemo_run.Experiment.run

    @functools.wraps(original_run)
    def run(self: object, *args: object, **kwargs: object) -> object:
        kwargs["detach"] = False
        return original_run(self, *args, **kwargs)

    nemo_run.Experiment.run = run


INDEX_BUILT = ".mlperf-wf-index-built"
"""Node 0's marker in ``index_mapping_dir``: the index is complete (part 6)."""
INDEX_FAILED = ".mlperf-wf-index-failed"
"""Node 0's note in ``index_mapping_dir``: building the index failed (the waiting nodes stop too)."""
INDEX_WAIT_VARIABLE = "MLPERF_WF_INDEX_WAIT_SECONDS"
INDEX_WAIT_SECONDS = 3600
"""pretrain_llama31.py:426 gives the data-index task one hour."""


def build_once(original):
    """``build_pretraining_datamodule`` that runs on node 0 only; the other nodes wait for its marker (part 6)."""

    @functools.wraps(original)
    def build_pretraining_datamodule(*args: object, **kwargs: object) -> object:
        if nodes_started() <= 1:
            return original(*args, **kwargs)
        datamodule = kwargs["datamodule"] if "datamodule" in kwargs else args[0]
        folder = Path(datamodule.index_mapping_dir)
        if node_rank() == 0:
            folder.mkdir(parents=True, exist_ok=True)
            try:
                result = original(*args, **kwargs)
            except BaseException as error:
                (folder / INDEX_FAILED).write_text(f"{error!r}\n")
                raise
            (folder / INDEX_BUILT).write_text("node 0\n")
            return result
        limit = float(os.environ.get(INDEX_WAIT_VARIABLE) or INDEX_WAIT_SECONDS)
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if (folder / INDEX_BUILT).exists():
                return None
            if (folder / INDEX_FAILED).exists():
                raise RuntimeError(f"llama31_405b: node 0 failed to build the data index in {folder}: {(folder / INDEX_FAILED).read_text().strip()}")
            time.sleep(2)
        raise RuntimeError(f"llama31_405b: node {node_rank()} waited {limit:.0f} s ({INDEX_WAIT_VARIABLE}) for node 0's data index in {folder}")

    return build_pretraining_datamodule


def patch_data_module(module: ModuleType) -> None:
    """``PreTrainingDataModule(paths=..., index_mapping_dir=...)`` reads the moved paths; the index is built once."""
    cls = module.PreTrainingDataModule
    original = cls.__init__

    @functools.wraps(original)
    def init(self: object, *args: object, **kwargs: object) -> None:
        for name in ("paths", "index_mapping_dir"):
            if name in kwargs:
                kwargs[name] = moved_all(kwargs[name])
        original(self, *args, **kwargs)

    cls.__init__ = init
    if hasattr(module, "build_pretraining_datamodule"):
        module.build_pretraining_datamodule = build_once(module.build_pretraining_datamodule)


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
after_import("nemo_run.run.torchx_backend.components.torchrun", patch_torchrun_component)
after_import("nemo.collections.llm.gpt.data.pre_training", patch_data_module)
after_import("nemo.collections.llm.recipes.llama31_405b", patch_recipe)
fail_with_the_first_failed_task()
