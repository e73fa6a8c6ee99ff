"""The workflow's closed vocabularies as enums: a scale, a compliance verdict, a run's state. Each member equals its
text (``StrEnum``), which is what the config, the files and the JSON hold, so ``Scale.TINY == "tiny"``. Also the name
of the default preparation (the commands every job runs read these without the catalog)."""

from __future__ import annotations

from enum import StrEnum

DEFAULT_PREPARATION = "default"
"""The preparation a benchmark uses unless the config's ``preparation`` picks another: its ``prepare`` module
reading its ``inputs``."""


class Scale(StrEnum):
    """What a campaign runs."""

    TINY = "tiny"
    """Generated data in the published layout and a tiny model on CPU."""
    FULL = "full"
    """The published datasets and the reference's container on GPUs."""


class Verdict(StrEnum):
    """The compliance verdict of one run's log (``compliance.json``)."""

    PASSED = "passed"
    """The official checker passed it."""
    PASSED_EXCEPT_DECLARED = "passed_except_declared"
    """Its only complaints are failed CHECKs of keys its tiny tier declares it cannot meet, and it reached the target."""
    NON_CONVERGED = "non_converged"
    """Compliant, but the run stopped without reaching the target (the scoring rules may drop one such run)."""
    FAILED = "failed"
    """Anything else."""

    @property
    def counts(self) -> bool:
        """Whether the run counts towards a score as having reached the target."""
        return self in (Verdict.PASSED, Verdict.PASSED_EXCEPT_DECLARED)


class RunState(StrEnum):
    """Where one run of a campaign stands (``mlperf-wf status``)."""

    PASSED = "passed"
    NON_CONVERGED = "non_converged"
    FAILED = "failed"
    RUNNING = "running"
    QUEUED = "queued"
    INTERRUPTED = "interrupted"
    NOT_STARTED = "not_started"
    REFUSED = "refused"
    """Its log is not this run's, changed after its check, or makes no sense (:class:`Outcome`)."""
    MISSING = "missing"
    """It finished once (its provenance or verdict is there) and its log is gone."""

    @property
    def finished(self) -> bool:
        """Whether the run ended (with a verdict, or failing before one)."""
        return self in (RunState.PASSED, RunState.NON_CONVERGED, RunState.FAILED, RunState.REFUSED, RunState.MISSING)

    @property
    def bad(self) -> bool:
        """Whether the run ended without counting (the olympic rule may drop one)."""
        return self in (RunState.NON_CONVERGED, RunState.FAILED, RunState.REFUSED, RunState.MISSING)


class Outcome(StrEnum):
    """What every reader (report, ``score``, ``status``, the package, the summary) says of one finished run's files
    (:func:`mlperf_wf.results.verdict.run_verdict`)."""

    PASSED = "passed"
    """Counts: the compliance verdict is passed (or passed_except_declared) and nothing refuses the log."""
    NON_CONVERGED = "non_converged"
    """Compliant, the target not reached."""
    FAILED = "failed"
    """The compliance check failed the log."""
    REFUSED = "refused"
    """The log is not this run's (another run's bytes, benchmark or identity), changed after its check, or its times
    make no sense (a stop before its start)."""
    MISSING = "missing"
    """The run's folder is there but its log is not."""
