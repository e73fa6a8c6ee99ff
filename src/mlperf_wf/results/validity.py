"""Whether a campaign's runs can still make a valid olympic score: what `status` and the doomed-campaign check both ask."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from mlperf_wf.kinds import RunState


@dataclass
class SetValidity:
    """Whether the runs can still make a valid result under the olympic rule."""

    scored_runs: int
    """N: the runs a result needs (the ruleset's count; fewer when the campaign plans fewer)."""
    may_drop: int
    """Runs of the N that may fail or not converge."""
    not_counting: int
    """Finished runs that failed or did not converge so far."""
    can_still_be_valid: bool
    more_allowed: int | None
    """How many more unfinished runs may fail or not converge with the set still valid (None once finished)."""
    message: str


def set_validity(states: list[str], required: int, may_drop: int) -> SetValidity:
    """Can the runs (in launch order) still make a valid olympic score, and how many more may fail?

    With M runs made for N required, the N consecutive runs whose olympic score is closest to the median of all
    windows are scored (:func:`mlperf_wf.results.scoring.select_window`; a window with more than ``may_drop`` runs that fail
    or do not converge scores infinity), so the set is valid while more than half of the windows are. Unfinished
    runs count as converging; the margin is the fewest of them whose failure would make the set invalid, minus one.
    """
    window = min(required, len(states)) or required
    bad = [RunState(s).bad for s in states]
    open_runs = [i for i, s in enumerate(states) if not RunState(s).finished]
    not_counting = sum(bad)

    def valid(flags: list[bool]) -> bool:
        windows = [sum(flags[start : start + window]) <= may_drop for start in range(len(flags) - window + 1)]
        return sum(windows) > len(windows) / 2  # the median window's score is finite

    if not valid(bad):
        return SetValidity(
            window,
            may_drop,
            not_counting,
            False,
            0 if open_runs else None,
            f"INVALID: {not_counting} runs failed or did not converge; at most {may_drop} of {window} may",
        )
    if not open_runs:
        return SetValidity(
            window, may_drop, not_counting, True, None, f"valid run count: {not_counting} of {window} runs failed or did not converge, at most {may_drop} may"
        )
    margin = len(open_runs)
    for failing in range(1, len(open_runs) + 1):
        if any(not valid([b or i in chosen for i, b in enumerate(bad)]) for chosen in itertools.combinations(open_runs, failing)):
            margin = failing - 1
            break
    if margin == 0:
        message = f"one more non-converged or failed run would make it invalid ({not_counting} so far, at most {may_drop} of {window} may)"
    elif margin >= len(open_runs):
        message = f"can still be valid whatever the {len(open_runs)} unfinished runs do"
    else:
        runs = "run" if margin == 1 else "runs"
        message = f"can still be valid: {margin} more {runs} may fail or not converge ({not_counting} so far, at most {may_drop} of {window} may)"
    return SetValidity(window, may_drop, not_counting, True, margin, message)
