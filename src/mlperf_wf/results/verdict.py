"""One verdict per finished run, the same for every reader.

The report, ``mlperf-wf score``, ``mlperf-wf status``, the package and the summary all decide whether a run counts
through :func:`run_verdict`, from the same files of the run's folder:

- ``result.txt``: the run's log. Gone while the run's ``provenance.json`` or ``compliance.json`` remain: **missing**.
- ``provenance.json``: what the train job recorded, the sha256 of the log it wrote and the host it ran on. A log whose
  bytes are not those, or that logs another benchmark (or division, seed) than the run's: **refused**, as the workflow's
  compliance job refuses it.
- ``compliance.json``: the official checker's verdict. A log that is not the bytes it checked: **refused**; else its
  verdict is the run's (passed, non_converged, failed); without one (not checked yet, or the check failed and Snakemake
  removed it) the log is checked here by :func:`mlperf_wf.results.scoring.score_file`, the same rules.
- the log's times: a ``run_stop`` before its ``run_start`` is **refused**, never a negative time to train or energy.
- the run's power logs: a window that does not cover the run, a file logged as another node, a node 0 log sampled on
  another host than the run's: the energy is refused by name (``power_problems``); the run's time still counts.

Checks made elsewhere plug in as ``extra_problems`` (one line each, per call) or as a function in
:data:`RUN_CHECKS` (applied by every reader to every run): any problem refuses the run by name.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlperf_wf.kinds import Outcome, Verdict
from mlperf_wf.results import compliance, scoring

VERDICT_FILE = "compliance.json"
PROVENANCE_FILE = "provenance.json"

RunCheck = Callable[[Path, dict], list[str]]
"""A further check of one run: (its result file, its provenance record, {} when it has none) -> its problems, one line
each, empty when there is none."""
RUN_CHECKS: list[RunCheck] = []
"""Checks every reader applies to every run beside this module's own (e.g. that a run's campaign identity is its
set's); a module that defines one appends it here when imported."""


@dataclass
class RunVerdict:
    """What every reader says of one run."""

    result_file: str
    outcome: Outcome
    """passed, non_converged, failed, refused or missing."""
    reason: str
    """Why the run does not count, in one line naming the file (empty when it counts)."""
    problems: list[str]
    """Everything found wrong, a few words each: the refusals first, then the checker's findings."""
    score: scoring.RunScore
    """The run's score (minutes, seed, energy), with ``outcome`` and ``reason`` set; minutes and energy are None
    unless the run counts."""
    compliance: Verdict | None = None
    """The compliance verdict of the log (the compliance job's, else the same rules applied here); None when missing."""
    verdict_from: str | None = None
    """compliance.json, or scored here (no compliance.json)."""
    power_problems: list[str] = field(default_factory=list)
    """Why the run has power logs but no energy (or what the summarizer only warns about)."""

    @property
    def counts(self) -> bool:
        """Whether the run counts towards a score as having reached the target."""
        return self.outcome == Outcome.PASSED

    @property
    def power_refused(self) -> bool:
        """The run has power logs, and no energy is computed from them."""
        return self.score.power_folder is not None and self.score.energy_joules is None and self.counts


def read_provenance(path: Path) -> dict | None:
    """``provenance.json`` as a dict; None when it is absent or not a JSON object."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def run_verdict(
    result_file: Path | str,
    ruleset: str,
    declared: dict[str, str] | None = None,
    identity: compliance.RunIdentity | None = None,
    extra_problems: Sequence[str] = (),
    verdict_file: Path | None = None,
    provenance: dict | None = None,
) -> RunVerdict:
    """Judge one run from its files (see the module docstring).

    ``identity``: the run the log must be (benchmark, division, seed); the sha256 its train job recorded is read from
    ``provenance`` (default: ``provenance.json`` beside the log) when ``identity`` does not give one.
    ``extra_problems``: other reasons to refuse the run (e.g. its campaign identity differs from its set's).
    ``verdict_file``: the compliance job's verdict (default: ``compliance.json`` beside the log)."""
    result = Path(result_file)
    verdict_file = verdict_file if verdict_file is not None else result.parent / VERDICT_FILE
    provenance_file = result.parent / PROVENANCE_FILE
    if provenance is None:
        provenance = read_provenance(provenance_file) or {}
    if not result.is_file():
        return _missing(result, verdict_file, provenance_file, extra_problems)
    score = scoring.score_file(str(result), ruleset, declared, host=provenance.get("host"))
    sha256 = compliance.file_sha256(result)
    written = provenance.get("result_sha256")
    if identity is None and written:
        identity = compliance.RunIdentity(None)
    if identity is not None and identity.written_sha256 is None and written:
        identity = dataclasses.replace(identity, written_sha256=written)
    refused = identity.problems(compliance.read_facts(result), sha256) if identity is not None else []
    recorded = _recorded(verdict_file)
    if recorded is not None and recorded.sha256 != sha256:
        then = f"{recorded.sha256[:12]} was checked" if recorded.sha256 else "the verdict records no digest"
        refused.append(f"not the log its compliance check read (sha256 {sha256[:12]} now, {then}); delete {verdict_file} to check it again")
    refused += score.sense_problems
    refused += list(extra_problems)
    for run_check in RUN_CHECKS:
        refused += run_check(result, provenance)
    checked = recorded.verdict if recorded is not None else score.verdict or Verdict.FAILED
    found = list(recorded.problems) if recorded is not None else list(score.problems)
    if refused:
        outcome, reason = Outcome.REFUSED, f"{result}: {refused[0]}"
    elif checked.counts:
        outcome, reason = Outcome.PASSED, ""
    elif checked == Verdict.NON_CONVERGED:
        outcome, reason = Outcome.NON_CONVERGED, f"{result}: did not reach the target (run_stop status {score.status!r})"
    else:
        outcome, reason = Outcome.FAILED, f"{result}: compliance check failed" + (f": {found[0]}" if found else "")
    if outcome != Outcome.PASSED:
        score.minutes, score.compliant, score.energy_joules = None, False, None
    score.outcome, score.reason = str(outcome), reason
    score.problems = list(dict.fromkeys([*refused, *found]))
    return RunVerdict(
        result_file=str(result),
        outcome=outcome,
        reason=reason,
        problems=score.problems,
        score=score,
        compliance=checked,
        verdict_from=VERDICT_FILE if recorded is not None else "scored here",
        power_problems=list(score.power_problems),
    )


def _recorded(verdict_file: Path) -> compliance.ComplianceResult | None:
    """The compliance job's verdict; None when there is none (or it is being written)."""
    if not verdict_file.is_file():
        return None
    try:
        return compliance.read(verdict_file)
    except (OSError, ValueError, TypeError):
        return None


def _missing(result: Path, verdict_file: Path, provenance_file: Path, extra_problems: Sequence[str]) -> RunVerdict:
    left = [path.name for path in (provenance_file, verdict_file) if path.is_file()]
    remain = f"; its {' and '.join(left)} remain: the run finished once" if left else ""
    reason = f"{result}: the run's log is gone{remain}; delete {result.parent} to redo the run"
    problems = [reason.split(": ", 1)[1], *extra_problems]
    score = scoring.RunScore(
        file=str(result), minutes=None, seed=None, status=None, compliant=False, messages=[], problems=problems, outcome=str(Outcome.MISSING), reason=reason
    )
    return RunVerdict(result_file=str(result), outcome=Outcome.MISSING, reason=reason, problems=problems, score=score)


def duplicate_seeds(verdicts: Sequence[RunVerdict | scoring.RunScore]) -> list[int]:
    """Seeds logged by more than one run (the rules require a different seed per run)."""
    seeds = [(v.score if isinstance(v, RunVerdict) else v).seed for v in verdicts]
    seeds = [s for s in seeds if s is not None]
    return sorted({s for s in seeds if seeds.count(s) > 1})


def report_verdicts(report: dict) -> list[RunVerdict]:
    """Each run of a ``report.json``, judged again from its files now (the readers after the report: the package, the
    summary): a run whose files changed since the report was made gets its verdict of now."""
    from mlperf_wf.config import registry

    known = report.get("benchmark") in registry.benchmark_names()
    declared = registry.declared_open_rules(report["benchmark"], report.get("scale")) if known else None
    identity = compliance.RunIdentity(report.get("submission_benchmark"), report.get("division"))
    return [run_verdict(Path(run["result_file"]), report["ruleset"], declared, identity) for run in report.get("runs", [])]


def disagreements(report: dict, verdicts: Sequence[RunVerdict]) -> list[str]:
    """Runs whose verdict now is not the one ``report.json`` recorded (or that count now and did not, or the reverse),
    one line each naming the run; a report made before verdicts were recorded is compared by whether runs counted."""
    found = []
    for run, judged in zip(report.get("runs", []), verdicts, strict=True):
        recorded = run.get("verdict") or ("passed" if run.get("minutes") is not None else None)
        if recorded is not None and recorded != judged.outcome:
            why = f": {judged.reason}" if judged.reason else ""
            found.append(f"run {run.get('index')} is {judged.outcome} now, report.json says {recorded}{why}")
        elif judged.power_refused and run.get("energy_joules") is not None:
            found.append(f"run {run.get('index')}'s power logs are refused now ({'; '.join(judged.power_problems)}), report.json has an energy from them")
    return found


def outcome_counts(verdicts: Sequence[RunVerdict]) -> str:
    """``9 passed, 1 refused``: how many runs have each outcome."""
    counted = {outcome: sum(1 for v in verdicts if v.outcome == outcome) for outcome in Outcome}
    return ", ".join(f"{n} {outcome}" for outcome, n in counted.items() if n)


def judged_score(path: str, ruleset: str, declared: dict[str, str] | None, benchmark: str) -> scoring.RunScore:
    """The run's score as :func:`mlperf_wf.results.verdict.run_verdict` judges it (the checks every reader applies);
    a workflow run's log must be its benchmark's."""
    from mlperf_wf.config import registry

    known = benchmark in registry.benchmark_names() and (Path(path).parent / "provenance.json").is_file()
    identity = compliance.RunIdentity(registry.load_benchmark(benchmark).submission_benchmark) if known else None
    return run_verdict(Path(path), ruleset, declared, identity=identity).score
