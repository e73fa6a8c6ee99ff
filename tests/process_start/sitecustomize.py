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


class _ImportedWhenFirstUsed(types.ModuleType):
    """Stands for a module in ``sys.modules`` until an attribute it lacks is asked for: then the module is imported in
    full (in its place in ``sys.modules``) and the attribute is the real module's. (``importlib.util.LazyLoader`` is
    no use here: every later ``import`` of the module reads its ``__spec__``, which loads it.)"""

    def __getattr__(self, name: str) -> object:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


def _started_as() -> str:
    """The module of ``python -m MODULE``, else the name of the script Python runs (``-c`` for ``python -c``, ``''`` for
    none)."""
    argv = sys.orig_argv[1:3]
    if argv[:1] == ["-m"]:
        return argv[1] if len(argv) > 1 else ""
    return os.path.basename(argv[0]) if argv else ""


def _import_when_first_used(name: str) -> None:
    """Put a stand-in for the package ``name`` in ``sys.modules`` (nothing where it is not installed or already imported).
    Its files are found without importing anything (``scipy.stats``'s without importing scipy, which a process that
    never imports ``scipy.stats`` would not have imported either)."""
    if name in sys.modules:
        return
    top, _, below = name.partition(".")
    found = importlib.machinery.PathFinder.find_spec(top)
    if found is None or found.origin is None or found.submodule_search_locations is None:
        return
    origin = os.path.join(os.path.dirname(found.origin), *below.split("."), "__init__.py") if below else found.origin
    if not os.path.isfile(origin):
        return
    stand_in = _ImportedWhenFirstUsed(name)
    stand_in.__spec__ = importlib.machinery.ModuleSpec(name, None, origin=origin, is_package=True)
    sys.modules[name] = stand_in


SNAKEMAKE = ("snakemake",)
"""How a Snakemake process is started: ``python -m snakemake`` or the ``snakemake`` script."""
SCORERS = ("snakemake", "mlperf-wf", "mlperf_wf", "mlperf_logging")
"""How the processes that import mlperf-logging's RCP checker are started (the script's name, or the first part of the
module's of ``python -m``): Snakemake (its plan sizes batches from the RCP tables), the CLI (``mlperf-wf`` or
``python -m mlperf_wf``) and mlperf-logging's own checkers (``python -m mlperf_logging.<checker>``)."""


def import_heavy_modules_when_first_used() -> None:
    """Two imports at the top of a library's module that most of the suite's processes never use: Snakemake loads
    every executor plugin at start-up, and the SLURM plugin imports pandas for its efficiency report, a setting no test
    turns on (Snakemake itself imports pandas inside the functions that use it); mlperf-logging's RCP checker imports
    ``scipy.stats`` for its t-test, while most processes that import the checker only read result files with it (the
    campaign gate, status, report, plot, package, summary). In a process started as one of :data:`SNAKEMAKE` (pandas)
    or :data:`SCORERS` (``scipy.stats``), those modules are imported when first used. ``bench/import_when_first_used.py``
    prints what that saves a process (one run, the median of three, on a 2-vCPU AMD EPYC VM: 1.54x for Snakemake's
    start-up, 1.24x for a tiny dry run, 1.83x for ``mlperf-wf score`` of ten published runs)."""
    started_as = _started_as()
    if started_as in SNAKEMAKE:
        _import_when_first_used("pandas")
    if started_as.partition(".")[0] in SCORERS:
        _import_when_first_used("scipy.stats")


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
    import_heavy_modules_when_first_used()
    run_the_sitecustomize_this_one_hides()
