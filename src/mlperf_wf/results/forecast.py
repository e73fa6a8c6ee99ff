"""A campaign's forecast, read from its finished runs' result files.

The forecast's numbers are the plan's (:func:`mlperf_wf.plan.sizing.forecast`: the RCP tables and the draws of the
missing runs); what is here reads the logs it starts from, as the RCP checker reads them, with the workflow's own
scoring where the checker cannot (``mlperf-wf status`` and the report give it).
"""

from __future__ import annotations

from pathlib import Path

from mlperf_wf.plan import sizing
from mlperf_wf.plan.sizing import Forecast
from mlperf_wf.results import compliance, scoring


def forecast_of_files(converged_files: list[str], not_counting: int, benchmark: str, ruleset: str, division: str, required: int) -> Forecast:
    """The forecast of a campaign from its finished runs' logs, read as the RCP checker reads them
    (``read_submission_file``: the samples or epochs of the last evaluation before a successful ``run_stop``, and the
    logged GBS); ``not_counting`` runs finished without counting (failed, or not converged by the verdict). The RCP
    test applies in the closed division only, as in the summarizer."""
    from mlperf_logging.rcp_checker import rcp_checker

    converged, failed, gbs = [], not_counting, None
    for path in converged_files:
        try:
            with sizing.quiet():
                not_converged, epochs, bs, _ = rcp_checker.read_submission_file(path, ruleset, False)
        except ValueError:  # stable_diffusion: no evaluation meets the checker's hard-coded FID/CLIP (tiny stand-ins)
            not_converged, epochs, bs = _read_as_scored(path, ruleset)
        gbs = gbs if gbs is not None else (int(bs) if bs not in (None, -1) else None)
        if not_converged:
            failed += 1
        else:
            converged.append(float(epochs))
    table = sizing.rcp_table(benchmark, ruleset) if division == "closed" else None
    return sizing.forecast(required, converged, failed, table, gbs, rcp_applies=division == "closed")


def _read_as_scored(path: str, ruleset: str) -> tuple[int, float, int]:
    """What the checker's reader gives, from the workflow's own scoring where that reader cannot read the log."""
    run = scoring.score_file(path, ruleset)
    converged = run.status == "success" and run.samples_to_converge is not None
    gbs = compliance.read_facts(Path(path)).values.get("global_batch_size", -1)
    return (0 if converged else 1), (float(run.samples_to_converge) if converged else sizing.NOT_CONVERGED), gbs
