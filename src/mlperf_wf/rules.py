"""What the MLPerf rules say about a benchmark, read from mlperf-logging itself.

Run counts come from ``benchmark_meta``; the quality target from the
``ATLEAST_ONE_CHECK`` of ``eval_accuracy`` in the ruleset's closed compliance
YAML. Nothing here is a copy of those numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import yaml
from mlperf_logging import benchmark_meta

from mlperf_wf.errors import ConfigError

USAGE = "training"
_COMPARISON = re.compile(r"v\['value'\]\s*(<=|>=|<|>)\s*([0-9][0-9.eE+-]*)")


@dataclass(frozen=True)
class QualityTarget:
    """The convergence condition on ``eval_accuracy``."""

    comparison: str
    """One of <=, <, >=, >: how the logged value must compare to ``value``."""
    value: float
    """The target."""

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
    return max(rulesets, key=lambda version: tuple(int(part) for part in version.split(".")))


def resolve_ruleset(benchmark: str, rulesets: list[str], requested: str) -> str:
    """The ruleset a benchmark's runs are logged and checked under.

    ``latest``: the newest round the benchmark is part of (rgat was retired after 5.1.0,
    so its runs follow 5.1.0 while llama2_70b_lora follows 6.1.0). A version: that round,
    and the benchmark must be part of it.
    """
    if requested == "latest":
        return newest_ruleset(rulesets)
    check_benchmark_in_ruleset(benchmark, requested)
    return requested


def required_runs(benchmark: str) -> int:
    """Number of result files a submission needs (``benchmark_meta``)."""
    counts = benchmark_meta.get_result_file_counts(USAGE)
    if benchmark not in counts:
        raise ConfigError(f"benchmark {benchmark!r} has no result-file count in mlperf-logging")
    return int(counts[benchmark])


def _compliance_yaml(ruleset: str, name: str) -> list[dict]:
    folder = resources.files("mlperf_logging.compliance_checker") / f"{USAGE}_{ruleset}"
    path = folder / name
    if not path.is_file():
        raise ConfigError(f"mlperf-logging has no {USAGE}_{ruleset}/{name}")
    return yaml.safe_load(path.read_text()) or []


def quality_target(benchmark: str, ruleset: str, division: str = "closed") -> QualityTarget:
    """The ``eval_accuracy`` target of ``benchmark`` under ``ruleset``."""
    for record in _compliance_yaml(ruleset, f"{division}_{benchmark}.yaml"):
        key = record.get("KEY", {})
        if key.get("NAME") == "eval_accuracy" and "ATLEAST_ONE_CHECK" in key:
            for comparison, value in _COMPARISON.findall(key["ATLEAST_ONE_CHECK"]):
                if float(value) != 0.0:
                    return QualityTarget(comparison=comparison, value=float(value))
    raise ConfigError(f"{USAGE}_{ruleset}/{division}_{benchmark}.yaml: no eval_accuracy target found")
