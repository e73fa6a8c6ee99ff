"""Run by every Python process the test suite starts (``tests/conftest.py`` puts this folder first on
``PYTHONPATH``): the workers, each ``mlperf-wf`` and Snakemake they start, the cluster in a box's job steps.

Each of those processes imports torch, transformers or Snakemake: about a million objects that live until it ends,
which Python's default threshold (700 allocations) makes the garbage collector walk again and again, and walk once
more at shutdown to free memory the process is about to return anyway: 15 % of the suite's CPU in a system-wide
profile (``bench/gc_threshold.py``). A test run starts ~2000 such processes on two cores; a user's campaign starts a
few per job, where it does not matter, so the package leaves the collector alone.
"""

import atexit
import gc
import importlib.machinery
import importlib.util
import os
import sys
import types

YOUNG_COLLECTION_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation (Python's default is 700); cycles are still
collected, 14 times less often."""


def skip_needless_garbage_collection() -> None:
    """Raise the youngest generation's threshold and, at exit, freeze what is left, so that shutdown does not walk
    the whole heap (0.3-0.9 CPU s after importing torch)."""
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    atexit.register(gc.freeze)


class _PandasWhenFirstUsed(types.ModuleType):
    """Stands for ``pandas`` in ``sys.modules`` until an attribute it lacks is asked for: then pandas is imported in
    full (in its place in ``sys.modules``) and the attribute is the real module's. (``importlib.util.LazyLoader`` is
    no use here: every later ``import pandas`` reads the module's ``__spec__``, which loads it.)"""

    def __getattr__(self, name: str) -> object:
        if sys.modules.get("pandas") is self:
            del sys.modules["pandas"]
        return getattr(importlib.import_module("pandas"), name)


def _started_as() -> str:
    """The module of ``python -m MODULE``, else the name of the script Python runs (``''`` for ``-c`` or none)."""
    argv = sys.orig_argv[1:3]
    if argv[:1] == ["-m"]:
        return argv[1] if len(argv) > 1 else ""
    return os.path.basename(argv[0]) if argv else ""


def import_pandas_when_first_used_in_snakemake() -> None:
    """Snakemake loads every executor plugin at start-up, and the SLURM plugin imports pandas at the top of its module
    for its efficiency report, a setting no test turns on (Snakemake itself imports pandas inside the functions that
    use it): ``bench/snakemake_start.py`` prints what that costs a Snakemake start and a tiny campaign's dry run (1.0x to
    1.26x across two runs of it on a 2-vCPU AMD EPYC VM, 0.14 to 0.48 CPU s). In a Snakemake process, pandas is
    imported when first used."""
    if _started_as() != "snakemake":
        return
    spec = importlib.util.find_spec("pandas")
    if spec is None:
        return
    stand_in = _PandasWhenFirstUsed("pandas")
    stand_in.__spec__ = importlib.machinery.ModuleSpec("pandas", None, origin=spec.origin)
    sys.modules["pandas"] = stand_in


def run_the_sitecustomize_this_one_hides() -> None:
    """Python imports one ``sitecustomize``: the first on ``sys.path``. Where a process also has another on its path
    (the round patches' start-up hooks, ``containers/hooks/sitecustomize.py``), run that one as Python would have
    without this folder, under the same name, so that ``from sitecustomize import ...`` finds it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in filter(None, sys.path):  # at start-up the script's folder ('') is not on the path yet
        candidate = os.path.join(os.path.abspath(entry), "sitecustomize.py")
        if os.path.dirname(candidate) != here and os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("sitecustomize", candidate)
            module = importlib.util.module_from_spec(spec)
            sys.modules["sitecustomize"] = module
            spec.loader.exec_module(module)
            return


skip_needless_garbage_collection()
if __name__ == "sitecustomize":  # started by Python, not imported by the test session's conftest
    import_pandas_when_first_used_in_snakemake()
    run_the_sitecustomize_this_one_hides()
