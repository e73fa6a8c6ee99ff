"""NeMo-Run at its pinned commit, as far as the llama31 references use it, for their rehearsals (tests only).

NeMo-Run itself is not in the project's venv, the box's userland (fiddle, torchx, fabric, inquirerpy...; only .venv-reference has it), so the
pieces on the launch path are compiled from its own source at the pinned commit (34259bd: NeMo's reinstall.sh pins
``NEMO_RUN_TAG=34259bd3e752fef94045a9a019e4aaf62bd11ce2``; the rehearsal image holds that tree at ``/opt/NeMo-Run``,
standing for the base image's pip install of it):

- ``core/execution/base.py``: ``Launcher``, ``Torchrun``, ``FaultTolerance``, ``LAUNCHER_MAP``, ``ExecutorMacros``,
  ``Executor`` (its ``clone`` goes through fiddle; the stand-in rebuilds the dataclass from its init fields, as
  fiddle's config round trip does, so an attribute that is not a field is lost, as there);
- ``core/execution/local.py``: ``LocalExecutor`` (``nnodes()`` is hard-coded to 1 there);
- ``run/torchx_backend/components/torchrun.py``: ``torchrun``, the component that writes torchrun's argv.

Only torchx's small helpers are stand-ins (``parse_nnodes``, ``_noquote``, ``specs.AppDef/Role``), and so are
``ExperimentTask.launch`` and ``Experiment.run``'s loop for local executors (:func:`run_experiment`), which run each task
to its end and, as NeMo-Run, go on after a failed one and return normally; ``tests/workflow/test_nemo_run_contract.py``
runs the same experiments through the real NeMo-Run at the pin and through these, and requires the same exit status
and the same tasks started, with the round patches and without. The glue that
NeMo-Run runs between them (``packaging.package`` and the local scheduler's Popen) is re-typed in :func:`task_command`
with its file and lines. Every module is put in ``sys.modules`` under NeMo-Run's own name and handed to the import
hooks the image registered for that name (the round patch's ``after_import``), exactly as an import would.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import enum
import logging
import os
import random
import re
import shlex
import string
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType, SimpleNamespace

NEMO_RUN_IN_IMAGE = Path("/opt/NeMo-Run/src/nemo_run")
"""Where the rehearsal image holds NeMo-Run's source at the pinned commit (``Rehearsal.image_files``)."""
RUNNER_MODULE = "nemo_run.core.runners.fdl_runner"
"""The module torchrun starts for a ``run.Partial`` task (packaging.py:40 ``default_cmd``)."""


def compile_definitions(path: Path, names: set[str], namespace: dict) -> dict:
    """The top-level functions, classes and assignments ``names`` of ``path`` (the pinned source), run in
    ``namespace``: the reference's own code, with the modules it imports given as ``namespace``."""
    tree = ast.parse(path.read_text(), str(path))

    def wanted(node: ast.stmt) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            return node.name in names
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            return any(isinstance(target, ast.Name) and target.id in names for target in targets)
        return False

    body = [node for node in tree.body if wanted(node)]
    name = namespace.get("__name__", path.stem)
    made = sys.modules.setdefault(name, ModuleType(name))  # dataclasses look their module up while they are made
    scope = made.__dict__
    scope.update(namespace)
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), scope)  # the pinned source's own code
    missing = names - scope.keys()
    if missing:
        raise RuntimeError(f"{path} defines no {', '.join(sorted(missing))} at the pinned commit")
    return scope


def fire_import_hooks(name: str, module: ModuleType) -> ModuleType:
    """Register ``module`` as ``name`` and run the patches the image's hooks wait for (``sitecustomize.after_import``)."""
    import sitecustomize

    module.__name__ = name
    sys.modules[name] = module
    for patch in sitecustomize._PENDING.pop(name, []):
        patch(module)
    return module


def module(name: str, **attributes: object) -> ModuleType:
    made = sys.modules.get(name) or ModuleType(name)
    made.__dict__.update({key: value for key, value in attributes.items() if not key.startswith("__")})
    return made


# --- torchx stand-ins (torchx is not installed here) ---------------------------------------------------------------


class _NoQuote(str):
    """torchx.components.dist._noquote: an argument the component leaves unquoted (a macro)."""


def _parse_nnodes(j: str) -> tuple[int, int, int, str]:
    """torchx.components.dist.parse_nnodes: ``[[min:]max x] nproc`` (a bare nproc is one node);
    tests/workflow/test_torchx_contract.py holds it to torchx's own."""
    match = re.fullmatch(r"(?:(?:(\d+):)?(\d+)x)?(\d+)", j)
    if not match:
        raise ValueError(f"torchx: bad -j {j!r}")
    minimum, maximum, nproc = match.groups()
    if maximum is None:
        return 1, 1, int(nproc), "1"
    return int(minimum or maximum), int(maximum), int(nproc), f"{minimum}:{maximum}" if minimum else maximum


_SPECS = SimpleNamespace(
    AppDef=lambda name, roles: SimpleNamespace(name=name, roles=roles),
    Role=lambda **fields: SimpleNamespace(**fields),
    resource=lambda **fields: SimpleNamespace(**fields),
    parse_mounts=lambda mounts: list(mounts),
)


# --- fiddle stand-in for Executor.clone (base.py: fdl.build(self.to_config())) ---------------------------------------


def _to_config(executor: object, allow_post_init: bool = True) -> tuple[type, dict]:
    return type(executor), {f.name: copy.deepcopy(getattr(executor, f.name)) for f in dataclasses.fields(executor) if f.init}


_FDL = SimpleNamespace(cast=lambda _cls, config: config, build=lambda config: config[0](**config[1]))
_FDL_DATACLASSES = SimpleNamespace(convert_dataclasses_to_configs=_to_config)


@dataclasses.dataclass(kw_only=True)
class _Packager:
    """nemo_run.core.packaging.base.Packager (fields the launch path reads)."""

    debug: bool = False


def load(source: Path = NEMO_RUN_IN_IMAGE) -> SimpleNamespace:
    """NeMo-Run's executors and torchrun component from the pinned source, each handed to the image's import hooks."""
    typing_names = {name: getattr(typing, name) for name in ("Optional", "Protocol", "Type", "Union", "runtime_checkable", "Self")}
    base = compile_definitions(
        source / "core" / "execution" / "base.py",
        {"Launcher", "Torchrun", "FaultTolerance", "LAUNCHER_MAP", "ExecutorMacros", "Executor", "LogSupportedExecutor"},
        {
            "__name__": "nemo_run.core.execution.base",
            "copy": copy,
            "os": os,
            "asdict": dataclasses.asdict,
            "dataclass": dataclasses.dataclass,
            "field": dataclasses.field,
            "Template": string.Template,
            "fdl": _FDL,
            "fdl_dc": _FDL_DATACLASSES,
            "Role": object,
            "Config": object,
            "Packager": _Packager,
            **typing_names,
        },
    )
    base_module = fire_import_hooks("nemo_run.core.execution.base", module("nemo_run.core.execution.base", **base))
    local = compile_definitions(
        source / "core" / "execution" / "local.py",
        {"LocalExecutor"},
        {"__name__": "nemo_run.core.execution.local", "logging": logging, "os": os, "dataclass": dataclasses.dataclass, "Executor": base["Executor"]},
    )
    local["logger"] = logging.getLogger("nemo_run.core.execution.local")
    local_module = fire_import_hooks("nemo_run.core.execution.local", module("nemo_run.core.execution.local", **local))
    component = compile_definitions(
        source / "run" / "torchx_backend" / "components" / "torchrun.py",
        {"torchrun", "_TORCH_DEBUG_FLAGS"},
        {
            "__name__": "nemo_run.run.torchx_backend.components.torchrun",
            "os": os,
            "random": random,
            "shlex": shlex,
            "Optional": typing.Optional,
            "torchx": SimpleNamespace(IMAGE=""),
            "specs": _SPECS,
            "torchx_dist": SimpleNamespace(parse_nnodes=_parse_nnodes, _noquote=_NoQuote),
            "ExecutorMacros": base["ExecutorMacros"],
        },
    )
    component_module = fire_import_hooks(
        "nemo_run.run.torchx_backend.components.torchrun", module("nemo_run.run.torchx_backend.components.torchrun", **component)
    )

    class Experiment:
        """Stand-in: the rehearsal runs the tasks itself (:func:`task_command`), in the order the script adds them."""

        def run(self, *args: object, **kwargs: object) -> None:
            return None

    top = module(
        "nemo_run",
        LocalExecutor=local_module.LocalExecutor,
        SlurmExecutor=_unpatched("SlurmExecutor"),
        SSHTunnel=_unpatched("SSHTunnel"),
        GitArchivePackager=lambda **kwargs: _Packager(),
        Experiment=Experiment,
        Config=lambda target, **kwargs: SimpleNamespace(target=target, kwargs=kwargs),
    )
    top = fire_import_hooks("nemo_run", top)
    task = fire_import_hooks("nemo_run.run.task", module("nemo_run.run.task", ExperimentTask=ExperimentTask))
    return SimpleNamespace(run=top, base=base_module, local=local_module, torchrun=component_module, task=task)


class AppState(enum.Enum):
    """torchx's ``specs.api.AppState`` (the states a NeMo-Run task ends in)."""

    UNSUBMITTED = 0
    SUCCEEDED = 4
    FAILED = 5
    UNKNOWN = 7


class ExperimentTask:
    """run/task.py's ``ExperimentTask`` as far as ``Experiment.run`` uses it with a local executor: ``launch(wait=True)``
    starts the task's process (the local scheduler's Popen of the role's argv, env over the process's) and, waited for,
    sets ``state`` from its exit (run/task.py:176-187); a failed task raises nothing."""

    def __init__(self, task_id: str, argv: list[str], env: dict[str, str]) -> None:
        self.id = task_id
        self.argv = argv
        self.env = env
        self.launched = False
        self.state = AppState.UNSUBMITTED

    def launch(self, wait: bool, runner: object, dryrun: bool = False, direct: bool = False) -> None:
        status = subprocess.run(self.argv, env={**os.environ, **self.env}, check=False).returncode
        self.state = AppState.SUCCEEDED if status == 0 else AppState.FAILED
        self.launched = True


def run_experiment(tasks: list[ExperimentTask]) -> None:
    """``Experiment.run(sequential=True)`` with local executors (run/experiment.py:574-612): each task launched and
    waited for in turn; a launch that raises is logged and the next task launched; how a task ended is never looked at,
    so this returns (and the script exits 0) whatever the tasks did. Only the image's round patch, wrapping
    ``ExperimentTask.launch`` through its import hook, can end the process at a failed task."""
    for task in tasks:
        try:
            task.launch(wait=True, runner=None)
        except Exception as error:  # experiment.py:610-612: logged, then the next task
            print(f"Error running task {task.id}: {error}", file=sys.stderr, flush=True)


def _unpatched(name: str):
    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"nemo_run.{name} is the reference's SSH-tunnelled Slurm submission, which the round patch replaces; it was not replaced")

    return refuse


def task_command(nemo_run: SimpleNamespace, name: str, executor: object) -> tuple[list[str], dict[str, str]]:
    """torchrun's argv and added environment for task ``name`` of an experiment on ``executor``: NeMo-Run's
    ``packaging.package`` for a ``run.Partial`` with a torchrun launcher (packaging.py:45-69 and 125-143), then the
    local scheduler's Popen of ``role.entrypoint`` + ``role.args`` with the role's env over the process's."""
    env = {} | executor.env_vars
    # packaging.py:51-69: "-n NAME -p <packager config> <task config>" (fiddle's serialized configs; placeholders here)
    args = ["-n", name, "-p", f"{name}-packager-config", f"{name}-task-config"]
    launcher = executor.get_launcher()
    if not isinstance(launcher, nemo_run.base.Torchrun):
        raise RuntimeError(f"task {name}: the executor's launcher is {launcher!r}, not torchrun: NeMo-Run would start the task without torchrun")
    app = nemo_run.torchrun.torchrun(
        *args,
        script=None,
        name=name,
        m=RUNNER_MODULE,
        image="",
        h=None,
        cpu=-1,
        gpu=-1,
        memMB=1024,
        j=f"{executor.nnodes()}x{executor.nproc_per_node()}",
        rdzv_backend=launcher.rdzv_backend,
        rdzv_port=launcher.rdzv_port,
        env=env,
        mounts=[],
        debug=executor.packager.debug,
        max_retries=executor.retries,
    )
    role = app.roles[0]
    return [role.entrypoint, *role.args], dict(role.env)


def flag(argv: list[str], name: str) -> str | None:
    """The value after ``name`` in a torchrun argv."""
    return argv[argv.index(name) + 1] if name in argv else None
