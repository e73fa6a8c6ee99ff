"""mlperf-workflow's start-up hooks for reference implementations.

Python imports ``sitecustomize`` at start-up in every process when this folder is on
``PYTHONPATH``: the reference's launcher, every rank it starts, every worker it spawns.
This module imports the patch modules named in ``MLPERF_WF_HOOKS`` (comma-separated; the
benchmark's image sets it, and so does the ``local`` launcher). A patch module asks for a
function to run right after a module of the reference is imported (:func:`after_import`), so
a round's missing keys or a wrong name are fixed without editing the reference's files.

A hook module that cannot be imported stops the process: a run without its patches would
train for hours and then fail the compliance check.

Every module of this folder runs in every image, down to Python 3.6 (bert's tensorflow:2.4.0-gpu): no
``from __future__ import annotations`` (3.7+), and annotations from ``typing`` (they are evaluated there).
An error here would not stop Python: it prints "Error in sitecustomize" and runs the reference unpatched.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Callable, Dict, List, Optional

HOOKS_VARIABLE = "MLPERF_WF_HOOKS"
CACHE_CLEARED_VARIABLE = "MLPERF_WF_CACHE_CLEARED"
"""Set by the workflow's full-scale launch line: whether it dropped the page cache (``mlperf_wf_mllog``)."""
_PENDING: Dict[str, List[Callable[[ModuleType], None]]] = {}


def after_import(module_name: str, patch: Callable[[ModuleType], None]) -> None:
    """Run ``patch(module)`` once ``module_name`` has been imported (now, if it already is)."""
    module = sys.modules.get(module_name)
    if module is not None:
        patch(module)
    else:
        _PENDING.setdefault(module_name, []).append(patch)


class _PatchingLoader(importlib.abc.Loader):
    """The module's own loader, followed by the patches waiting for it."""

    def __init__(self, loader: importlib.abc.Loader, patches: List[Callable[[ModuleType], None]]) -> None:
        self._loader = loader
        self._patches = patches

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        for patch in self._patches:
            patch(module)


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """Finds a watched module with the other finders and wraps its loader."""

    def find_spec(self, fullname: str, path: object, target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname not in _PENDING:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, _PENDING.pop(fullname))
                return spec
        return None


def _chain_next_sitecustomize() -> None:
    """Run the ``sitecustomize`` this one shadows (a distribution's or the image's), if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    others = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None and os.path.abspath(spec.origin or "") != os.path.abspath(__file__):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _load_hooks() -> None:
    for name in (part.strip() for part in os.environ.get(HOOKS_VARIABLE, "").split(",")):
        if not name:
            continue
        try:
            importlib.import_module(name)
        except Exception as err:
            sys.stderr.write(f"mlperf-wf hooks: {HOOKS_VARIABLE} names {name!r}, which cannot be imported: {err!r}\n")
            sys.stderr.flush()
            os._exit(3)  # SystemExit here would add Python's own start-up traceback


REHEARSAL_STEPS_VARIABLE = "MLPERF_WF_REHEARSAL_STEPS"
"""Set by ``mlperf-wf rehearse``'s job: stop the run after that many training steps (``mlperf_wf_rehearsal_steps``)."""


def _load_rehearsal_hook() -> None:
    """In a rehearsal, for every benchmark and before the round patches: the hook that stops the run and records each
    rank (its audit of opened inputs starts before the reference's code runs)."""
    if not os.environ.get(REHEARSAL_STEPS_VARIABLE):
        return
    try:
        importlib.import_module("mlperf_wf_rehearsal_steps")
    except Exception as err:
        sys.stderr.write(f"mlperf-wf hooks: {REHEARSAL_STEPS_VARIABLE} is set, but the rehearsal hook cannot be imported: {err!r}\n")
        sys.stderr.flush()
        os._exit(3)  # a rehearsal that is never stopped would run until its time limit


def _log_cache_clear_as_launched() -> None:
    """Where the launch line says whether it dropped the page cache, mlperf-logging's ``cache_clear`` says the same,
    for every benchmark (the references log a hard-coded true)."""
    if os.environ.get(CACHE_CLEARED_VARIABLE) is None:
        return
    from mlperf_wf_mllog import log_cache_clear_as_launched

    after_import("mlperf_logging.mllog.mllog", log_cache_clear_as_launched)


def _guard_result_file_handlers() -> None:
    """Each process writes the run's result file through a file of its own (merged after the run), and a write error
    fails the process (logging would print it and go on)."""
    import logging

    from mlperf_wf_mllog import guard_result_file_handlers

    guard_result_file_handlers(logging)


sys.meta_path.insert(0, _AfterImportFinder())
_chain_next_sitecustomize()
_log_cache_clear_as_launched()
_guard_result_file_handlers()
_load_rehearsal_hook()
_load_hooks()
