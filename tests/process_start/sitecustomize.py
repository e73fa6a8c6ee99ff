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
import importlib.util
import os
import sys

YOUNG_COLLECTION_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation (Python's default is 700); cycles are still
collected, 14 times less often."""


def skip_needless_garbage_collection() -> None:
    """Raise the youngest generation's threshold and, at exit, freeze what is left, so that shutdown does not walk
    the whole heap (0.3-0.9 CPU s after importing torch)."""
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    atexit.register(gc.freeze)


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
    run_the_sitecustomize_this_one_hides()
