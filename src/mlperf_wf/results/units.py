"""Times and lists as a reader reads them: a duration in the unit that fits it, run numbers in words.

Every time the results record is in minutes (the summarizer's unit); a tiny campaign's score is a second or two and a
full-scale one can take hours, so each is shown in seconds, minutes or hours, whichever keeps its number readable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

UNITS = (("seconds", 1 / 60), ("minutes", 1.0), ("hours", 60.0))
"""Each unit and its length in minutes, shortest first."""


def unit_of(minutes: float) -> tuple[str, float]:
    """The unit that fits ``minutes`` (under a minute: seconds; from two hours: hours) and its length in minutes."""
    if abs(minutes) < 1.0:
        return UNITS[0]
    if abs(minutes) >= 120.0:
        return UNITS[2]
    return UNITS[1]


def unit_for(values: Iterable[float | None]) -> tuple[str, float]:
    """The unit that fits the largest of ``values`` (minutes; None skipped): one unit for an axis."""
    known = [abs(value) for value in values if value is not None]
    return unit_of(max(known)) if known else UNITS[1]


def duration(minutes: float | None, digits: int = 3) -> str:
    """``minutes`` in the unit that fits it, e.g. ``1.24 seconds``, ``12.5 minutes``, ``2.5 hours``; None: ``—``."""
    if minutes is None:
        return "—"
    unit, length = unit_of(minutes)
    return f"{minutes / length:.{digits}g} {unit}"


def in_words(items: Sequence[object]) -> str:
    """``0, 1 and 2``: a list as a sentence says it (empty: ``none``)."""
    words = [str(item) for item in items]
    if not words:
        return "none"
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def metric_of(benchmark: str) -> str:
    """What the benchmark's ``eval_accuracy`` events measure, as its definition names it (``quality_metric``: a loss,
    an AUC, a mAP, ...); ``eval_accuracy`` for a benchmark this project does not define."""
    from mlperf_wf.config import registry

    return registry.load_benchmark(benchmark).quality_metric if benchmark in registry.benchmark_names() else "eval_accuracy"


def progress_unit(convergence_unit: str | None) -> str:
    """``samples`` or ``epochs``: what a run's ``samples_to_converge`` counts (the report's ``convergence_unit``)."""
    return "epochs" if convergence_unit == "epoch_num" else "samples"


def runs_in_words(indices: Sequence[object]) -> str:
    """``run 3`` or ``runs 0, 1 and 2``."""
    return f"run {indices[0]}" if len(indices) == 1 else f"runs {in_words(indices)}"
