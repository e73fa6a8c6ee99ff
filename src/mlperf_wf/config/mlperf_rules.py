"""What the MLPerf rules say about a benchmark, read from mlperf-logging itself.

Run counts come from ``benchmark_meta``; the quality target from the
``ATLEAST_ONE_CHECK`` of ``eval_accuracy`` in the ruleset's compliance YAML
(closed, and for an open run the open one too). Nothing here is a copy of those numbers.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources

from mlperf_logging import benchmark_meta

from mlperf_wf.config import yaml_files
from mlperf_wf.errors import ConfigError
from mlperf_wf.kinds import Scale

USAGE = "training"
_COMPARISON = re.compile(r"v\['value'\]\s*(<=|>=|<|>)\s*([0-9][0-9.eE+-]*)")
_COMPARISON_TO_STATE = re.compile(r"v\['value'\]\s*(<=|>=|<|>)\s*s\['(\w+)'\]")
_METRIC_RANGE = re.compile(r"([0-9][0-9.eE+-]*)\s*<=\s*v\['value'\]\['(\w+)'\]\s*<=\s*([0-9][0-9.eE+-]*)")
"""A bounded metric of ``aggregated_eval_accuracy`` (stable_diffusion: ``0.0 <= v['value']['FID'] <= 90.0``)."""
_STATE_NUMBER = re.compile(r"'(\w+)':\s*([0-9][0-9.eE+-]*)")


@dataclass(frozen=True)
class QualityTarget:
    """The convergence condition on ``eval_accuracy``."""

    comparison: str
    """One of <=, <, >=, >: how the logged value must compare to ``value``."""
    value: float
    """The target."""
    metric: str | None = None
    """For a benchmark with several metrics (stable_diffusion's FID and CLIP): the ``metric`` metadata of the
    ``eval_accuracy`` events this target applies to; None for the one ``eval_accuracy`` of every other benchmark."""

    @property
    def lower_is_better(self) -> bool:
        return self.comparison in ("<", "<=")

    def reached(self, metric: float) -> bool:
        return {"<=": metric <= self.value, "<": metric < self.value, ">=": metric >= self.value, ">": metric > self.value}[self.comparison]


def allowed_benchmarks(ruleset: str) -> list[str]:
    """Benchmarks mlperf-logging accepts for ``ruleset``."""
    try:
        return list(benchmark_meta.get_allowed_benchmarks(USAGE, ruleset))
    except ValueError:
        known = sorted(benchmark_meta._ALL_ALLOWED_BENCHMARKS[USAGE])
        raise ConfigError(f"ruleset {ruleset!r} is not known to mlperf-logging; known rounds: {', '.join(known)}") from None


def check_benchmark_in_ruleset(benchmark: str, ruleset: str) -> None:
    """Fail clearly when the benchmark is not part of the ruleset."""
    allowed = allowed_benchmarks(ruleset)
    if benchmark not in allowed:
        raise ConfigError(f"ruleset {ruleset}: benchmark {benchmark!r} is not part of this round; allowed: {', '.join(allowed)}")


def newest_ruleset(rulesets: list[str]) -> str:
    """The latest round of ``rulesets`` (versions compared numerically: 10.0.0 after 9.1.0)."""
    return max(rulesets, key=_version)


def _version(ruleset: str) -> tuple[int, ...]:
    return tuple(int(part) for part in ruleset.split("."))


def known_rulesets() -> list[str]:
    """Every training round mlperf-logging can check (a ``training_X.Y.Z`` rules folder and a benchmark list), oldest first."""
    checker = resources.files("mlperf_logging.compliance_checker")
    rounds = [f"{short}.0" for short in benchmark_meta._ALL_ALLOWED_BENCHMARKS[USAGE]]
    return sorted((r for r in rounds if (checker / f"{USAGE}_{r}").is_dir()), key=_version)


def rulesets_of(benchmark: str) -> list[str]:
    """The rounds ``benchmark`` is part of, oldest first, as mlperf-logging lists them (no hand-kept copy)."""
    rounds = [ruleset for ruleset in known_rulesets() if benchmark in benchmark_meta.get_allowed_benchmarks(USAGE, ruleset)]
    if not rounds:
        raise ConfigError(f"submission_benchmark {benchmark!r} is in no training round mlperf-logging knows")
    return rounds


def resolve_ruleset(benchmark: str, requested: str) -> str:
    """The ruleset a benchmark's runs are logged and checked under.

    ``latest``: the newest round the benchmark is part of (rgat was retired after 5.1.0,
    so its runs follow 5.1.0 while llama2_70b_lora follows 6.1.0). A version: that round,
    and the benchmark must be part of it.
    """
    if requested == "latest":
        return newest_ruleset(rulesets_of(benchmark))
    check_benchmark_in_ruleset(benchmark, requested)
    return requested


def required_runs(benchmark: str) -> int:
    """Number of result files a submission needs (``benchmark_meta``)."""
    counts = benchmark_meta.get_result_file_counts(USAGE)
    if benchmark not in counts:
        raise ConfigError(f"benchmark {benchmark!r} has no result-file count in mlperf-logging")
    return int(counts[benchmark])


def _compliance_yaml(ruleset: str, name: str, missing_ok: bool = False) -> list[dict]:
    records = _compliance_records(ruleset, name)
    if records is None:
        if missing_ok:
            return []
        raise ConfigError(f"mlperf-logging has no {USAGE}_{ruleset}/{name}")
    return list(records)


@cache
def _compliance_records(ruleset: str, name: str) -> tuple[dict, ...] | None:
    """The records of one of the round's rule files (package data: read once per process); None when it has none."""
    path = resources.files("mlperf_logging.compliance_checker") / f"{USAGE}_{ruleset}" / name
    return tuple(yaml_files.load(path.read_text()) or []) if path.is_file() else None


def key_rules(benchmark: str, ruleset: str, division: str) -> list[dict]:
    """The KEY entries of the round's rules for ``benchmark``: the common rules, the division's and the benchmark's own."""
    files = ("common.yaml", f"{division}_common.yaml", f"{division}_{benchmark}.yaml")
    return [record.get("KEY") or {} for name in files for record in _compliance_yaml(ruleset, name, missing_ok=name != "common.yaml")]


def required_keys(benchmark: str, ruleset: str, division: str = "closed") -> set[str]:
    """Keys the round's checker requires at least once (``REQ: EXACTLY_ONE`` or ``AT_LEAST_ONE``) for ``benchmark``."""
    return {key["NAME"] for key in key_rules(benchmark, ruleset, division) if key.get("REQ") in ("EXACTLY_ONE", "AT_LEAST_ONE")}


def checked_keys(benchmark: str, ruleset: str, division: str) -> set[str]:
    """Keys whose value the round's ``division`` rules CHECK for ``benchmark``."""
    return {key["NAME"] for key in key_rules(benchmark, ruleset, division) if "CHECK" in key}


def quality_target(benchmark: str, ruleset: str, division: str = "closed") -> QualityTarget:
    """The ``eval_accuracy`` target of ``benchmark`` under ``ruleset``.

    The target is a number in the check (``v['value'] > 0.69``) or a state value the rules' ``BEGIN`` code sets
    (``v['value'] > s['target_accuracy']`` with ``'target_accuracy': 0.69``, as qwen35_397b_grpo's closed rules write it).
    An open run must meet both the benchmark's quality target (the closed rules') and the open rules' own check:
    where the open check bounds the same side, the stricter of the two (llama31_8b's open placeholder ``< 1.0``
    under the closed ``<= 3.3``); where it bounds the other side, only a range (dlrm_dcnv2's AUROC ``<= 1.0``), the
    closed target.
    """
    own = _division_target(benchmark, ruleset, division)
    if division == "closed" or not _compliance_yaml(ruleset, f"closed_{benchmark}.yaml", missing_ok=True):
        return own
    closed = _division_target(benchmark, ruleset, "closed")
    if own.lower_is_better != closed.lower_is_better:
        return closed
    return max(own, closed, key=lambda target: -target.value if target.lower_is_better else target.value)


def _division_target(benchmark: str, ruleset: str, division: str) -> QualityTarget:
    records = _compliance_yaml(ruleset, f"{division}_{benchmark}.yaml")
    state = {name: float(value) for record in records for name, value in _STATE_NUMBER.findall(str((record.get("BEGIN") or {}).get("CODE", "")))}
    # The target is on eval_accuracy; where the rules name the result otherwise (flux1's open rules: a placeholder
    # averaged_validation_loss, "TODO: Update with official metric name"), on the key they check at least once.
    keys = [record.get("KEY", {}) for record in records]
    for key in sorted(keys, key=lambda key: key.get("NAME") != "eval_accuracy"):
        if "ATLEAST_ONE_CHECK" in key:
            for comparison, value in _COMPARISON.findall(key["ATLEAST_ONE_CHECK"]):
                if float(value) != 0.0:
                    return QualityTarget(comparison=comparison, value=float(value))
            for comparison, name in _COMPARISON_TO_STATE.findall(key["ATLEAST_ONE_CHECK"]):
                if name in state:
                    return QualityTarget(comparison=comparison, value=state[name])
    raise ConfigError(f"{USAGE}_{ruleset}/{division}_{benchmark}.yaml: no eval_accuracy target found")


def quality_targets(benchmark: str, ruleset: str, division: str = "closed") -> list[QualityTarget]:
    """Every quality target of ``benchmark``: the one ``eval_accuracy`` target, or, where the rules aggregate several
    metrics into ``aggregated_eval_accuracy`` (stable_diffusion), one target per metric.

    A metric bounded on both sides (``0.0 <= FID <= 90.0``, ``0.15 <= CLIP <= 1.0``) has its target at the bound
    that is not the metric's natural limit: the upper one when the lower is 0 (FID falls to 90), else the lower one
    (CLIP rises to 0.15; 1.0 is the most a cosine can be). Where the division's rules fix no target (the open rules
    of stable_diffusion only check the range), the closed rules' targets are the ones a run aims at.
    """
    records = _compliance_yaml(ruleset, f"{division}_{benchmark}.yaml")
    for record in records:
        key = record.get("KEY", {})
        if key.get("NAME") == "aggregated_eval_accuracy" and "ATLEAST_ONE_CHECK" in key:
            targets = [
                QualityTarget("<=", float(high), metric) if float(low) == 0.0 else QualityTarget(">=", float(low), metric)
                for low, metric, high in _METRIC_RANGE.findall(key["ATLEAST_ONE_CHECK"])
            ]
            if targets:
                return targets
            if division != "closed":
                return quality_targets(benchmark, ruleset, "closed")
    return [quality_target(benchmark, ruleset, division)]


def run_targets(bench, ruleset: str, division: str, scale: str) -> list[QualityTarget]:
    """The targets runs stop at: at tiny scale the benchmark's declared stand-in thresholds where it measures its
    metrics with stand-in encoders (``tiny.standin_targets``), else the rules' (one per metric where there are several)."""
    if scale == Scale.TINY and bench.tiny.standin_targets:
        return [QualityTarget(t.comparison, t.value, t.metric) for t in bench.tiny.standin_targets]
    return quality_targets(bench.submission_benchmark, ruleset, division)


def report_target(targets: list[QualityTarget]) -> dict:
    """The report's ``quality_target``: the one target, or the first with ``all`` listing every metric's."""
    first = asdict(targets[0])
    if not targets[0].metric:
        return {"comparison": first["comparison"], "value": first["value"]}
    return {**first, "all": [asdict(t) for t in targets]}
