"""mlperf-workflow: MLPerf Training benchmarks end to end, as a Snakemake workflow."""

__version__ = "0.1.0"

YOUNG_COLLECTION_THRESHOLD = 10_000
"""Allocations between two collections of the garbage collector's youngest generation in our processes (Python's
default is 700). A process of ours starts by importing torch, transformers or Snakemake: about a million objects that
live until it ends, which the default makes the collector walk again and again."""


def skip_needless_garbage_collection() -> None:
    """Spare this process the collector's walks over objects that live until it ends (15 % of ``make test``'s CPU in a
    system-wide profile; ``bench/gc_threshold.py``): raise the youngest generation's threshold to
    :data:`YOUNG_COLLECTION_THRESHOLD` (cycles are still collected, 14 times less often), and at exit freeze what is
    left, so that the interpreter's shutdown does not walk the whole heap (0.3-0.9 CPU s after importing torch) to free
    memory the process is about to return anyway. Called first by each entry point: the ``mlperf-wf`` CLI, the
    Snakefile, the test session."""
    import atexit
    import gc

    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    atexit.register(gc.freeze)
