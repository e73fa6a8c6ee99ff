"""From a system size to an RCP-backed plan: batch sizes, RCP coverage, hyperparameters, walltime.

A closed submission's convergence is judged against the reference convergence points (RCPs) of its round:
mlperf-logging's ``rcp_checker`` keeps, per benchmark, the samples (or epochs) to converge of many reference runs at
a few global batch sizes (GBS), prunes the points that converge slower than their neighbours' interpolation, and
tests a submission's olympic mean against the point at its GBS, an interpolation between the two pruned points around
it, or the smallest point. Everything here calls the checker's own code for that (``RCP_Checker``'s statistics,
pruning, interpolation and test); what is ours is reading a system size into GBS choices and the hyperparameters the
RCP at a GBS was made with, which the full-scale plan passes to the reference (``full.sizing`` of a benchmark).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import math
import os
import tempfile
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from functools import cache, cached_property
from pathlib import Path

from mlperf_logging.compliance_checker import mlp_compliance

from mlperf_wf.config import mlperf_rules, registry
from mlperf_wf.errors import ConfigError

USAGE = "training"
BATCH_KEYS = ("global_batch_size", "gradient_accumulation_steps")
"""RCP hyperparameters that follow from the batch geometry, not passed as values of their own."""


@dataclass(frozen=True)
class RcpPoint:
    """One reference convergence point of a round (one record of ``rcps_<benchmark>.json``)."""

    name: str
    """The record's name, e.g. ``llama31_8b_ref_32``."""
    gbs: int
    """Its global batch size."""
    hyperparameters: dict[str, object]
    """The hyperparameters the reference runs used (``Hyperparams``)."""
    converged: tuple[float, ...]
    """Samples (or epochs) to converge of each reference run, sorted."""
    mean: float
    """The checker's olympic mean of ``converged``."""
    stdev: float
    """The checker's standard deviation of ``converged``."""
    min_allowed_mean: float
    """The fastest olympic mean of a submission's run set the checker accepts (``Min Epochs``)."""
    pruned: bool
    """True where the checker's pruning kept the point (the summarizer tests against pruned points only)."""


@dataclass(frozen=True)
class RcpTable:
    """The RCPs of a benchmark in a round, as mlperf-logging's checker reads them."""

    benchmark: str
    ruleset: str
    unit: str
    """``samples``, ``tokens`` (:func:`counts_tokens`) or ``epochs`` (the checker's ``Epochs to converge`` holds samples for
    most LLM benchmarks)."""
    points: tuple[RcpPoint, ...]
    cache_file: Path | None = field(default=None, repr=False, compare=False)
    """Where the checker's numbers of this table are kept between processes (:func:`rcp_table`)."""
    coverages: dict[int, Coverage] = field(default_factory=dict, repr=False, compare=False)
    """The coverage of each GBS asked for so far (:func:`coverage`), kept in ``cache_file`` too."""

    def point(self, gbs: int) -> RcpPoint | None:
        return next((point for point in self.points if point.gbs == gbs), None)

    @cached_property
    def checker(self):
        """The checker itself (``RCP_Checker``), for its interpolation and test; built when first asked for (its module
        imports scipy.stats, a second of every Snakemake parse otherwise)."""
        return _checker(self.benchmark, self.ruleset)


def _checker(benchmark: str, ruleset: str):
    from mlperf_logging.rcp_checker import rcp_checker

    with quiet():
        return rcp_checker.RCP_Checker(USAGE, ruleset, benchmark, verbose=False)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The checker logs each record it tests at INFO (and each non-converged log at WARNING) on the root logger.
    Nested, it leaves logging as it is: ``logging.disable`` clears the cache of every logger of the process."""
    previous = logging.root.manager.disable
    if previous >= logging.WARNING:
        yield
        return
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


RCP_CACHE_VARIABLE = "MLPERF_WF_RCP_CACHE"
"""A folder for the checker's numbers of each RCP table (default ``$XDG_CACHE_HOME/mlperf-workflow/rcp``, i.e.
``~/.cache/...``). The full-scale plan sizes every batch from them in every Snakemake parse; computing them needs the
checker's t-tests (scipy.stats, about a second to import). A file is named by the digest of the RCP file, the
mlperf-logging version and this module's source, so a new round, checker or derivation never reads an old one."""


def _cache_folder() -> Path:
    named = os.environ.get(RCP_CACHE_VARIABLE)
    if named:
        return Path(named)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mlperf-workflow" / "rcp"


def _cache_file(benchmark: str, ruleset: str, source: bytes) -> Path:
    from importlib.metadata import version

    digest = hashlib.sha256(source)
    digest.update(version("mlperf-logging").encode())
    digest.update(Path(__file__).read_bytes())
    return _cache_folder() / f"{USAGE}_{ruleset}_{benchmark}_{digest.hexdigest()[:20]}.json"


def _plain(value: object) -> object:
    """JSON's view of the checker's values (numpy numbers as Python's)."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def _write_cache(table: RcpTable) -> None:
    """The table's points and coverages into its cache file (written whole, then renamed: parses run side by side)."""
    if table.cache_file is None:
        return
    content = {
        "unit": table.unit,
        "points": [_plain(asdict(point)) for point in table.points],
        "coverages": {str(gbs): _plain(asdict(case)) for gbs, case in table.coverages.items()},
    }
    temporary = None
    try:
        table.cache_file.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=table.cache_file.parent, prefix=".rcp-")
        with os.fdopen(handle, "w") as out:
            json.dump(content, out)
        os.replace(temporary, table.cache_file)
    except OSError:  # a cache: without it the numbers are computed again
        if temporary:
            Path(temporary).unlink(missing_ok=True)


def _read_cache(benchmark: str, ruleset: str, cache_file: Path) -> RcpTable | None:
    try:
        content = json.loads(cache_file.read_text())
        points = tuple(RcpPoint(**{**point, "converged": tuple(point["converged"])}) for point in content["points"])
        coverages = {int(gbs): Coverage(**{**case, "basis": tuple(case["basis"])}) for gbs, case in content["coverages"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return RcpTable(benchmark=benchmark, ruleset=ruleset, unit=content["unit"], points=points, cache_file=cache_file, coverages=coverages)


def counts_tokens(benchmark: str) -> bool:
    """Whether the RCPs (and logs: ``epoch_num``) of ``benchmark`` (mlperf-logging's name) count training tokens, not
    samples (gpt3: consumed samples x the sequence length, e.g. the paxml reference's ``c4_mllog.py``: ``epoch_num`` =
    steps x ``global_batch_size_tokens``): its definition gives ``full.sizing.tokens_per_sample``, which turns them
    into samples."""
    definitions = (registry.load_benchmark(name) for name in registry.benchmark_names())
    return any(bench.submission_benchmark == benchmark and bench.full.sizing and bench.full.sizing.tokens_per_sample for bench in definitions)


@cache
def rcp_table(benchmark: str, ruleset: str) -> RcpTable | None:
    """The RCP table of ``benchmark`` in ``ruleset`` (None: the round has no RCPs for it): the checker's numbers,
    from the cache file when an earlier process computed them (:data:`RCP_CACHE_VARIABLE`)."""
    from importlib import resources

    path = resources.files("mlperf_logging.rcp_checker") / f"{USAGE}_{ruleset}" / f"rcps_{benchmark}.json"
    if not path.is_file():
        return None
    cache_file = _cache_file(benchmark, ruleset, path.read_bytes())
    cached = _read_cache(benchmark, ruleset, cache_file)
    if cached is not None:
        return cached
    checker = _checker(benchmark, ruleset)
    points = tuple(
        RcpPoint(
            name=name,
            gbs=int(record["BS"]),
            hyperparameters=dict(record["Hyperparams"]),
            converged=tuple(float(value) for value in sorted(record["Epochs to converge"])),
            mean=float(record["RCP Mean"]),
            stdev=float(record["RCP Stdev"]),
            min_allowed_mean=_fastest_passing(checker, record),
            pruned=name in checker.pruned_rcp_data,
        )
        for name, record in checker.rcp_data.items()
    )
    unit = "samples" if max(point.mean for point in points) > 1000 else "epochs"
    if unit == "samples" and counts_tokens(benchmark):
        unit = "tokens"
    computed = RcpTable(benchmark=benchmark, ruleset=ruleset, unit=unit, points=points, cache_file=cache_file)
    computed.__dict__["checker"] = checker  # the one built above (cached_property's slot)
    _write_cache(computed)
    return computed


@dataclass(frozen=True)
class Coverage:
    """What the official RCP test compares a run set at ``gbs`` against (``rcp_checker.check_directory``'s cases)."""

    gbs: int
    kind: str
    """``exact`` (an RCP at this GBS), ``interpolated`` (between two pruned RCPs), ``below`` (smaller than every
    RCP: tested against the smallest, passes only if converging no faster), ``above`` (larger than every RCP: the
    checker asks for a new RCP) or ``none`` (no RCPs in the round)."""
    message: str
    """The checker's own wording of the case."""
    basis: tuple[str, ...]
    """The RCP records the test rests on."""
    mean: float | None = None
    """The reference mean the run set is compared to."""
    min_allowed_mean: float | None = None
    """The fastest run-set mean that passes."""
    record: dict | None = field(default=None, repr=False, compare=False)
    """The checker's record (exact or interpolated) for its test."""


def coverage(table: RcpTable | None, gbs: int) -> Coverage:
    """The RCP case of ``gbs``, by the checker's own lookups on the pruned points (as the summarizer runs it); kept
    with the table (and its cache file) once made."""
    if table is None:
        return Coverage(gbs, "none", "Cannot find any RCPs", ())
    if gbs not in table.coverages:
        table.coverages[gbs] = _coverage(table, gbs)
        _write_cache(table)
    return table.coverages[gbs]


def _coverage(table: RcpTable, gbs: int) -> Coverage:
    checker, rcp_pass = table.checker, "pruned_rcps"
    record = checker._find_rcp(gbs, rcp_pass)
    if record is not None:
        name = _record_name(checker, record)
        return Coverage(gbs, "exact", "RCP found", (name,), record["RCP Mean"], _fastest_passing(checker, record), record)
    low, high = checker._find_top_min_rcp(gbs, rcp_pass), checker._find_bottom_max_rcp(gbs, rcp_pass)
    if low is not None and high is not None:
        with quiet():
            _, interpolated = checker._create_interp_rcp(gbs, low, high)
        basis = (_record_name(checker, low), _record_name(checker, high))
        return Coverage(gbs, "interpolated", "RCP Interpolation", basis, interpolated["RCP Mean"], _fastest_passing(checker, interpolated), interpolated)
    if low is not None:
        return Coverage(gbs, "above", f"Missing RCP, please submit RCP with BS = {gbs}", (_record_name(checker, low),))
    if high is not None:
        smallest = checker._find_min_rcp(rcp_pass)
        message = "RCP not found but slower convergence on smaller batch size"
        return Coverage(gbs, "below", message, (_record_name(checker, smallest),), smallest["RCP Mean"], _fastest_passing(checker, smallest), smallest)
    return Coverage(gbs, "none", "Cannot find any RCPs", ())


def _fastest_passing(checker, record: dict) -> float:
    """The smallest olympic mean the checker's own test (``_eval_submission_record``) accepts against ``record``, by
    bisection (the test is monotonic in the mean; a round may adjust it, e.g. llama31_405b's allowance from 5.0.0)."""
    low, high = 0.0, float(record["RCP Mean"])
    runs = checker.submission_runs
    with quiet():
        for _ in range(60):
            middle = (low + high) / 2
            passed, _ = checker._eval_submission_record(dict(record), [middle] * runs, "")
            low, high = (low, middle) if passed else (middle, high)
    return high


def _record_name(checker, record: dict) -> str:
    return next(name for name, contents in checker.rcp_data.items() if contents["BS"] == record["BS"])


def passes(table: RcpTable, gbs: int, converged: list[float], case: Coverage | None = None) -> bool:
    """The official test of a run set's samples (or epochs) to converge at ``gbs`` (``_eval_submission_record``);
    False where the checker has nothing to compare with. ``case``: the coverage of ``gbs``, when known."""
    case = case or coverage(table, gbs)
    if case.record is None:
        return False
    record = dict(case.record)  # the checker adjusts the record it is given (llama31_405b's max speedup)
    with quiet():
        passed, _ = table.checker._eval_submission_record(record, list(converged), "")
    return bool(passed)


# ---- a system's batch geometry ----


@dataclass(frozen=True)
class Split:
    """How a global batch is made on a system."""

    gbs: int
    replicas: int
    """Data-parallel replicas: GPUs / GPUs one model replica spans."""
    micro_batch: int
    """Samples per replica per forward/backward pass."""
    accumulation: int
    """Micro-batches per replica per optimizer step."""

    def fits(self, max_micro_batch: int) -> bool:
        """Whether the micro batch is one the reference's configuration runs (``full.sizing.max_micro_batch``)."""
        return self.micro_batch <= max_micro_batch


def replicas(gpus: int, model_parallel: int) -> int:
    """Data-parallel replicas of ``gpus`` GPUs when one model spans ``model_parallel`` of them."""
    if gpus % model_parallel:
        raise ConfigError(f"geometry: {gpus} GPUs do not hold whole model replicas of {model_parallel} GPUs each; use a multiple of {model_parallel}")
    return gpus // model_parallel


def split(gbs: int, replicas: int, max_micro_batch: int, accumulates: bool = True) -> Split | None:
    """The largest micro batch (at most ``max_micro_batch``) that makes ``gbs`` on ``replicas`` with whole
    accumulation steps; None where ``gbs`` is not a multiple of the replicas. A reference that does not accumulate
    gets the whole per-replica share as its micro batch, above ``max_micro_batch`` if need be (``fits`` says)."""
    if gbs % replicas:
        return None
    per_replica = gbs // replicas
    if not accumulates:
        return Split(gbs=gbs, replicas=replicas, micro_batch=per_replica, accumulation=1)
    micro = max(m for m in range(1, min(max_micro_batch, per_replica) + 1) if per_replica % m == 0)
    return Split(gbs=gbs, replicas=replicas, micro_batch=micro, accumulation=per_replica // micro)


SAME_MEMORY_CLASS = 0.97
"""GPUs sold with the same memory report a few percent apart (an H200's "141 GB" is 140.4 GiB in nvidia-smi, an
H100's "80 GB" 79.6 GiB against an A100's 80.0): within this fraction of the reference's, a GPU holds its micro batch."""


def micro_batch_limit(sizing_def, gpu_memory_gib: float | None) -> int:
    """The largest micro batch a GPU of ``gpu_memory_gib`` is taken to hold: the reference's ``max_micro_batch``, in
    proportion to the memory where the GPU has less than the reference's (``reference_gpu_memory_gib``; activations
    grow with the micro batch), at least 1. An assumption, said where it applies: a measured run decides."""
    reference = sizing_def.reference_gpu_memory_gib
    if gpu_memory_gib is None or reference is None or gpu_memory_gib >= reference * SAME_MEMORY_CLASS:
        return sizing_def.max_micro_batch
    return max(1, math.floor(sizing_def.max_micro_batch * gpu_memory_gib / reference))


def reference_replicas(bench) -> int:
    """Data-parallel replicas of the reference's own geometry (``full.geometry``)."""
    geometry, sizing_def = bench.full.geometry, bench.full.sizing
    return max(1, geometry.nodes * geometry.gpus_per_node // sizing_def.model_parallel)


def launcher_nodes_problem(bench, nodes: int) -> str | None:
    """Why the reference's launcher cannot start a run on ``nodes`` nodes (one line), or None."""
    if nodes > 1 and not bench.full.multi_node_args and bench.full.process_model != "per_gpu":
        return f"{bench.name}'s reference command runs on one node (no full.multi_node_args)"
    return None


def choose_gbs(bench, table: RcpTable | None, replica_count: int, gpu_memory_gib: float | None = None) -> int | None:
    """The GBS a system of ``replica_count`` data-parallel replicas runs when the config names none: among the
    definition's and the kept (pruned) RCP batches that the system makes within the reference's micro batch, the one
    whose per-replica share is nearest the reference's own (the batch grows with the system, each GPU keeps the load
    and memory the reference's configuration was made for); ties go to the definition's, then the smaller batch. On
    the reference's own geometry that is the definition's. None: no such batch."""
    sizing_def = bench.full.sizing
    limit = micro_batch_limit(sizing_def, gpu_memory_gib)
    share = sizing_def.global_batch_size / reference_replicas(bench)
    sizes = {sizing_def.global_batch_size} | ({point.gbs for point in table.points if point.pruned} if table else set())
    candidates = []
    for size in sizes:
        made = split(size, replica_count, limit, sizing_def.accumulates)
        if made is not None and made.fits(limit):
            candidates.append((round(abs(math.log(size / replica_count / share)), 9), size != sizing_def.global_batch_size, size))
    return min(candidates)[2] if candidates else None


# ---- the closed rules on a plan's values ----


@dataclass(frozen=True)
class RuleCheck:
    """One closed-division rule of the round on a value the plan sets."""

    key: str
    value: object
    rule: str
    """The checker's CHECK expression."""
    held: bool | None
    """True/False: the expression on the plan's values; None: it needs what only the run logs."""


def rule_checks(benchmark: str, ruleset: str, values: Mapping[str, object]) -> list[RuleCheck]:
    """The round's closed ``CHECK`` of each key in ``values``, from mlperf-logging's compliance checker run on a log of
    the planned values (:func:`planned_log`): the checker picks the rule files as for a run's log (``common.yaml``, then
    the closed division's and the benchmark's, the benchmark's replacing a common rule of the same key), runs their
    ``BEGIN`` and ``POST`` code and evaluates each ``CHECK`` on the logged value. An expression the checker could not
    evaluate on these values alone (it needs what only the run logs) is ``held=None``."""
    failed, unevaluated = _checker_messages(benchmark, ruleset, values)
    checks = []
    for key in _effective_key_rules(benchmark, ruleset):
        name = key.get("NAME")
        if name not in values or "CHECK" not in key:
            continue
        for expression in key["CHECK"] if isinstance(key["CHECK"], list) else [key["CHECK"]]:
            rule = " ".join(str(expression).split())
            held = None if (name, rule) in unevaluated else (name, rule) not in failed
            checks.append(RuleCheck(name, values[name], rule, held))
    return checks


def _effective_key_rules(benchmark: str, ruleset: str) -> list[dict]:
    """The closed KEY rules the checker applies to ``benchmark``'s log: a later file's rule of a key replaces an
    earlier file's (the checker drops the earlier file's messages of that key)."""
    rules: dict[str, dict] = {}
    for key in mlperf_rules.key_rules(benchmark, ruleset, "closed"):
        if key.get("NAME"):
            rules.pop(key["NAME"], None)
            rules[key["NAME"]] = key
    return list(rules.values())


def planned_log(benchmark: str, values: Mapping[str, object]) -> list[str]:
    """The MLLOG lines a run of ``benchmark`` logs for ``values`` in the closed division: the submission keys the
    checker picks its rule files by, then ``global_batch_size`` (the rules derive others from it in its ``POST``), then
    the other values."""
    planned = {key: values[key] for key in sorted(values, key=lambda key: key != "global_batch_size")}
    ordered = {"submission_division": "closed", "submission_benchmark": benchmark, **planned}
    return [
        ":::MLLOG " + json.dumps({"namespace": "", "time_ms": index, "event_type": "POINT_IN_TIME", "key": key, "value": value, "metadata": {}})
        for index, (key, value) in enumerate(ordered.items())
    ]


def _checker_messages(benchmark: str, ruleset: str, values: Mapping[str, object]) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(key, expression) pairs the checker found false, and those it could not evaluate, on :func:`planned_log`."""
    parser = importlib.import_module(f"mlperf_logging.compliance_checker.mlp_parser.ruleset_{ruleset.replace('.', '')}")
    loglines, errors = parser.parse_generator(planned_log(benchmark, values))
    if errors:
        raise ValueError(f"the planned values of {benchmark} make log lines the checker cannot parse: {errors[0]}")
    checker = _EveryMessage(ruleset)
    mlp_compliance.enqueued_configs.clear()
    with quiet():
        checker.check_loglines(loglines, f"{USAGE}_{ruleset}/common.yaml")
    failed, unevaluated = set(), set()
    for key, message in checker.messages:
        if message.startswith("CHECK for ") and "\nfailed test: " in message:
            failed.add((key, " ".join(message.split("\nfailed test: ", 1)[1].split("\ncurrent context", 1)[0].split())))
        elif message.startswith("Failed executing CHECK code:"):
            unevaluated.add((key, " ".join(message.split("\n", 2)[1].split())))
    return failed, unevaluated


class _EveryMessage(mlp_compliance.ComplianceChecker):
    """mlperf-logging's compliance checker keeping every message it puts (its own keeps the last of each key, so a key
    with two false expressions would report one); it still drops a key's messages where a later rule file replaces
    that key's rule."""

    def __init__(self, ruleset: str) -> None:
        super().__init__(USAGE, ruleset, quiet=True, werror=False)
        self.messages: list[tuple[str | None, str]] = []

    def put_message(self, msg, key=None):
        self.messages.append((key, msg))

    def overwrite_messages(self, keys):
        self.messages = [(key, msg) for key, msg in self.messages if key not in keys]


# ---- the forecast of a campaign ----


@dataclass(frozen=True)
class Forecast:
    """How likely the required run set is to be valid and to pass the RCP test, from the runs finished so far."""

    required: int
    finished: int
    converged: tuple[float, ...]
    """Samples (or epochs) to converge of the finished converged runs."""
    failed: int
    """Finished runs that did not converge."""
    valid: float
    """Probability that the set is valid (at most the olympic rule's one non-converged run)."""
    rcp_pass: float | None
    """Probability that it is valid and passes the RCP test; None in the open division (no RCP test)."""
    draws: int
    basis: str
    """What the numbers rest on, one line."""

    def summary(self) -> dict:
        """The numbers and their basis, as status and report.json give them."""
        return {"valid": self.valid, "rcp_pass": self.rcp_pass, "finished": self.finished, "required": self.required, "basis": self.basis}

    def text(self) -> str:
        """One line: the probabilities and their basis."""
        rcp = "" if self.rcp_pass is None else f", valid and passing the RCP check {self.rcp_pass:.0%}"
        return f"valid {self.valid:.0%}{rcp} ({self.basis})"


def forecast(
    required: int,
    converged: list[float],
    failed: int,
    table: RcpTable | None,
    gbs: int | None,
    rcp_applies: bool = True,
    draws: int = 2000,
    seed: int = 0,
) -> Forecast:
    """Complete the run set by drawing the missing runs from the finished ones and apply the rules to each completed
    set: a run converges with a rate drawn from its posterior after the finished runs (Beta(1, 1) prior; mean
    (converged + 1) / (finished + 2)) and needs as many samples as a finished converged run drawn at random. The set is valid with at most one
    non-converged run (the olympic mean drops it), and passes when the checker's own test accepts the olympic mean
    of its converged runs. With every run finished the probabilities are 0 or 1: the official verdict."""
    import numpy as np

    finished = len(converged) + failed
    missing = max(required - finished, 0)
    # closed division: a set without an RCP to test against (none in the round, a GBS above them all, no GBS logged)
    # fails the check, as the summarizer's RCP step fails it
    case = coverage(table, gbs) if table is not None and gbs is not None else None
    testable = case is not None and case.record is not None
    if missing == 0:
        valid = 1.0 if failed <= 1 else 0.0
        passed = None
        if rcp_applies:
            passed = float(valid == 1.0 and testable and passes(table, gbs, _olympic_input(converged, failed), case))
        basis = f"all {required} runs finished: the official rule and RCP test"
        return Forecast(required, finished, tuple(converged), failed, valid, passed, 0, basis)
    rng = np.random.default_rng(seed)
    rate = (len(converged) + 1) / (finished + 2)
    valid_sets = passed_sets = 0
    with quiet():  # once for every draw's test of its completed set
        for _ in range(draws):
            drawn_rate = rng.beta(len(converged) + 1, failed + 1)  # the rate's posterior after the finished runs
            more_failed = int(rng.binomial(missing, 1 - drawn_rate)) if converged else missing
            total_failed = failed + more_failed
            if total_failed > 1:
                continue
            valid_sets += 1
            if rcp_applies and testable:
                drawn = list(rng.choice(converged, size=missing - more_failed)) if missing - more_failed else []
                passed_sets += passes(table, gbs, _olympic_input(list(converged) + drawn, total_failed), case)
    basis = (
        f"{finished} of {required} runs finished ({len(converged)} converged, {failed} not); {draws} completions drawn "
        f"with a convergence rate of mean {rate:.2f} and the finished runs' samples to converge"
    )
    return Forecast(required, finished, tuple(converged), failed, valid_sets / draws, passed_sets / draws if rcp_applies else None, draws, basis)


NOT_CONVERGED = 1e9
"""What the checker counts for a run that did not converge (``read_submission_file``)."""


def _olympic_input(converged: list[float], failed: int) -> list[float]:
    """The list the checker's olympic mean drops one from each end of: a non-converged run counts as the slowest."""
    return list(converged) + [NOT_CONVERGED] * failed


# ---- the full-scale plan's batch and hyperparameters ----


class BatchSize(int):
    """The run's GBS in a command word: ``{gbs}``; ``{gbs://N}`` is N samples as whole steps (N // GBS), e.g. an
    evaluation interval the rules give in samples and the reference takes in steps."""

    def __format__(self, spec: str) -> str:
        if spec.startswith("//") and spec[2:].isdigit():
            return str(int(spec[2:]) // int(self))
        return format(int(self), spec)


class HyperValue:
    """A hyperparameter's value in a command word: ``{hp[KEY]}`` as given; ``{hp[KEY]:steps}`` a sample count as
    optimizer steps at the run's GBS, rounded up (the reference takes warm-up in steps, the RCP records samples)."""

    def __init__(self, value: object, gbs: int) -> None:
        self.value, self.gbs = value, gbs

    def __format__(self, spec: str) -> str:
        if spec == "steps":
            return str(math.ceil(float(self.value) / self.gbs))
        return format(self.value, spec) if spec else str(self.value)


class RuleValue:
    """A value the round's closed rules derive from the plan's (``{rule[NAME]}``, :func:`rule_state`) in a command
    word. ``{rule[first_eval_samples]:grid_fraction/N}``: the shortest decimal fraction f of N samples from which a
    reference that skips evaluations below step ceil(f x N / GBS) and evaluates on the rules' grid
    (``eval_interval_samples``) first evaluates at this sample count (dlrmv4's ``SKIP_EVAL_EPOCH_PCT``)."""

    def __init__(self, value: object, gbs: int, state: Mapping[str, object]) -> None:
        self.value, self.gbs, self.state = value, gbs, state

    def __format__(self, spec: str) -> str:
        if spec.startswith("grid_fraction/") and spec.split("/", 1)[1].isdigit():
            return _grid_fraction(int(self.value), int(spec.split("/", 1)[1]), self.gbs, int(self.state["eval_interval_samples"]))
        return format(self.value, spec) if spec else str(self.value)


def _grid_fraction(first: int, total: int, gbs: int, grid: int) -> str:
    exact = (first - gbs / 2) / total  # the middle of the step before the first evaluation's
    for digits in range(1, 18):
        text = f"{exact:.{digits}g}"
        start_step = math.ceil(float(text) * total / gbs)
        if math.ceil(start_step * gbs / grid) * grid == first:
            return text
    return repr(exact)


def rule_state(benchmark: str, ruleset: str, values: Mapping[str, object]) -> dict[str, object]:
    """The state (``s``) the round's closed rules compute from ``values``, as the compliance checker does: the rules'
    ``BEGIN`` code, then each key's ``POST`` code for the keys given, in the rules' order (e.g. dlrmv4's
    ``first_eval_samples`` and ``eval_interval_samples`` from ``global_batch_size``)."""
    files = ("common.yaml", "closed_common.yaml", f"closed_{benchmark}.yaml")
    state: dict[str, object] = {}
    scope = {"math": math, "s": state}
    for name in files:
        for record in mlperf_rules._compliance_yaml(ruleset, name, missing_ok=name != "common.yaml"):
            begin = (record.get("BEGIN") or {}).get("CODE")
            if begin:
                exec(textwrap.dedent(str(begin)).strip(), scope)
            key = record.get("KEY") or {}
            if key.get("NAME") in values and key.get("POST"):
                scope["v"] = {"value": values[key["NAME"]], "metadata": {}}
                exec(textwrap.dedent(str(key["POST"])).strip(), scope)
    return {key: value for key, value in state.items() if value is not None}


@dataclass(frozen=True)
class Row:
    """One line of a plan's hyperparameter table."""

    key: str
    value: object
    rcp_value: object | None
    """The RCP's value at the run's GBS (None: no RCP at this GBS, or the RCP does not record it)."""
    source: str
    """Where the value comes from: ``RCP <record>``, ``override`` (a deviation: ``full_hyperparameters``) or
    ``geometry`` (the split of the GBS on the run's GPUs)."""

    @property
    def deviation(self) -> bool:
        """A value of the config's (``override``) or of the command's literal flags (``literal ...``) that is not the
        RCP's at the run's GBS."""
        return (self.source == "override" or self.source.startswith("literal ")) and self.value != self.rcp_value


@dataclass(frozen=True)
class PlannedBatch:
    """The batch and RCP hyperparameters of a benchmark's full-scale runs."""

    benchmark: str
    ruleset: str
    split: Split
    coverage: Coverage
    values: dict[str, object]
    """RCP key -> the value the command gets (``{hp[KEY]}``)."""
    rows: tuple[Row, ...]
    rules: tuple[RuleCheck, ...]
    """The round's closed rules on the planned values."""
    max_micro_batch: int
    """The largest micro batch the system's GPUs are taken to hold: the reference configuration's
    (``full.sizing.max_micro_batch``), less where they have less memory (:func:`micro_batch_limit`)."""
    rule_values: dict[str, object] = field(default_factory=dict)
    """The closed rules' state after the planned values (:func:`rule_state`): ``{rule[NAME]}`` of the command."""
    memory_note: str = ""
    """Why the micro batch is below the reference's (the GPUs' memory), in words; empty where it is not."""

    def format_values(self) -> dict[str, object]:
        """The command's sizing placeholders."""
        hp = {key: HyperValue(value, self.split.gbs) for key, value in self.values.items()}
        rule = {key: RuleValue(value, self.split.gbs, self.rule_values) for key, value in self.rule_values.items()}
        return {
            "gbs": BatchSize(self.split.gbs),
            "micro_batch": self.split.micro_batch,
            "accumulation": self.split.accumulation,
            "hp": hp,
            "rule": rule,
        }

    @property
    def deviations(self) -> list[Row]:
        return [row for row in self.rows if row.deviation]


def command_keys(bench) -> list[str]:
    """The RCP hyperparameters a benchmark's full-scale command and env read (``{hp[KEY]}``), in order."""
    from mlperf_wf.config.registry import hyperparameter_keys

    words = [*bench.full.command, *bench.full.multi_node_args, *bench.full.env.values()]
    return list(dict.fromkeys(key for word in words for key in hyperparameter_keys(word)))


def wired(bench) -> bool:
    """Whether the benchmark's command takes its batch from the plan (a sizing placeholder in its command or env);
    elsewhere ``full.sizing`` serves ``mlperf-wf size`` only and the command's batch flags are literal."""
    from mlperf_wf.config.registry import SIZING_PLACEHOLDERS, placeholders

    words = [*bench.full.command, *bench.full.multi_node_args, *bench.full.env.values()]
    return any(name in SIZING_PLACEHOLDERS for word in words for name in placeholders(word))


def plan_batch(
    bench, ruleset: str, nodes: int, gpus_per_node: int, overrides: Mapping[str, object] | None = None, gpu_memory_gib: float | None = None
) -> PlannedBatch | None:
    """The full-scale batch of ``bench`` on ``nodes`` x ``gpus_per_node`` GPUs (of ``gpu_memory_gib`` each, where
    known: :func:`micro_batch_limit`) and the hyperparameters its command gets: the RCP's at the GBS (``full_hyperparameters.<name>.global_batch_size``,
    else :func:`choose_gbs`'s), each replaceable by a named override (a deviation the dry run lists). None: the
    definition has no sizing."""
    sizing_def = bench.full.sizing
    if sizing_def is None or not wired(bench):
        if overrides:
            raise ConfigError(
                f"config: full_hyperparameters.{bench.name}: its command takes its batch and hyperparameters as literal flags "
                "(see its README); set them with full_arguments"
            )
        return literal_batch(bench, ruleset, nodes, gpus_per_node) if sizing_def is not None else None
    given = dict(overrides or {})
    overrides = dict(given)
    where = f"config: full_hyperparameters.{bench.name}"
    keys = command_keys(bench)
    unknown = sorted(set(overrides) - set(keys) - {"global_batch_size"})
    if unknown:
        raise ConfigError(f"{where}: {unknown[0]!r} is not a hyperparameter its command takes; allowed: global_batch_size, {', '.join(keys) or '(none)'}")
    table = rcp_table(bench.submission_benchmark, ruleset)
    gbs = overrides.pop("global_batch_size", sizing_def.global_batch_size)
    if not isinstance(gbs, int) or isinstance(gbs, bool) or gbs < 1:
        raise ConfigError(f"{where}.global_batch_size: {gbs!r} is not a positive whole number of samples")
    count = replicas(nodes * gpus_per_node, sizing_def.model_parallel)
    limit = micro_batch_limit(sizing_def, gpu_memory_gib)
    geometry_choice = None
    if "global_batch_size" not in given:
        chosen_gbs = choose_gbs(bench, table, count, gpu_memory_gib)
        if chosen_gbs is not None and chosen_gbs != gbs:
            why = _why_not(gbs, count, sizing_def, limit)
            geometry_choice = f"geometry: the definition's GBS {gbs} {why} on {nodes}x{gpus_per_node} GPUs ({count} data-parallel replicas)"
            gbs = chosen_gbs
    made = split(gbs, count, limit, sizing_def.accumulates)
    rcp_sizes = [point.gbs for point in table.points] if table else []
    if made is None:
        reachable = ", ".join(str(size) for size in rcp_sizes if split(size, count, limit, sizing_def.accumulates)) or "none"
        chosen = f"{where}.global_batch_size: {gbs}" if "global_batch_size" in given else f"{bench.name}: full.sizing.global_batch_size {gbs}"
        raise ConfigError(
            f"{chosen} cannot be made on {nodes}x{gpus_per_node} GPUs ({count} data-parallel replicas of {sizing_def.model_parallel} GPUs, "
            f"{_micro_limit(sizing_def)}); set {where}.global_batch_size to an RCP batch size this system can run: {reachable}"
        )
    point = table.point(gbs) if table else None
    for key, value in sizing_def.fixed.items():
        if point and key in point.hyperparameters and point.hyperparameters[key] != value:
            raise ConfigError(
                f"{where}: the RCP {point.name} used {key} {point.hyperparameters[key]!r} where the reference's code fixes {value!r}; "
                f"use another of its batch sizes: {', '.join(map(str, rcp_sizes))}"
            )
    missing = [key for key in keys if key not in overrides and (point is None or key not in point.hyperparameters)]
    if missing:
        nearest = sorted(rcp_sizes, key=lambda size: abs(size - gbs))[:2]
        if point is None:
            have = f"no RCP of {ruleset} has GBS {gbs} (nearest: {', '.join(map(str, nearest))})"
        else:
            have = f"the RCP at GBS {gbs} does not record {missing[0]}"
        sizes = ", ".join(map(str, rcp_sizes)) or "none"
        raise ConfigError(f"{where}: {have}; give {', '.join(missing)} as a named override, or use an RCP's batch size: {sizes}")
    values, rows = {}, []
    for key in keys:
        rcp_value = point.hyperparameters.get(key) if point else None
        value = overrides.get(key, rcp_value)
        values[key] = value
        rows.append(Row(key, value, rcp_value, "override" if key in overrides else f"RCP {point.name}"))
    rcp_gbs = f"RCP {point.name}" if point else "override"
    gbs_source = rcp_gbs if gbs == sizing_def.global_batch_size or point else "override"
    if geometry_choice:
        gbs_source = f"{geometry_choice}; {rcp_gbs}"
    rows.insert(0, Row("global_batch_size", gbs, point.gbs if point else None, gbs_source))
    for key, value in sizing_def.fixed.items():
        rows.append(Row(key, value, point.hyperparameters.get(key) if point else None, "fixed by the reference's code"))
    if point and "gradient_accumulation_steps" in point.hyperparameters:
        rows.append(Row("gradient_accumulation_steps", made.accumulation, point.hyperparameters["gradient_accumulation_steps"], "geometry"))
    checks = rule_checks(bench.submission_benchmark, ruleset, {"global_batch_size": gbs, **sizing_def.fixed, **values})
    state = rule_state(bench.submission_benchmark, ruleset, {"global_batch_size": gbs, **sizing_def.fixed, **values}) if _reads_rules(bench) else {}
    memory_note = ""
    if limit < sizing_def.max_micro_batch:
        memory_note = (
            f"micro batch at most {limit}: the GPUs' {gpu_memory_gib:.1f} GiB against the {sizing_def.reference_gpu_memory_gib:g} GiB the "
            f"reference ran micro batch {sizing_def.max_micro_batch} on (in proportion to memory, an assumption: a measured run decides)"
        )
    return PlannedBatch(bench.name, ruleset, made, coverage(table, gbs), values, tuple(rows), tuple(checks), limit, state, memory_note)


def literal_batch_problem(bench, nodes: int, gpus_per_node: int) -> str | None:
    """Why a command whose GBS is literal (``literal_batch: global``) cannot run on ``nodes`` x ``gpus_per_node`` GPUs:
    its replicas make no whole micro batch of it (one line); None where they do, or where the batch is not literal."""
    sizing_def = bench.full.sizing
    if sizing_def is None or wired(bench) or sizing_def.literal_batch != "global":
        return None
    literal = _literal_gbs(sizing_def, nodes * gpus_per_node)
    if literal is None:
        return None  # no whole replicas: the geometry's problem
    gbs, count = literal
    if split(gbs, count, sizing_def.max_micro_batch, sizing_def.accumulates) is not None:
        return None
    most = max((n for n in range(1, gbs + 1) if split(gbs, n, sizing_def.max_micro_batch, sizing_def.accumulates)), default=1)
    return (
        f"its command's literal GBS {gbs} cannot be split over {count} data-parallel replicas ({nodes * gpus_per_node} GPUs, "
        f"{sizing_def.model_parallel} per replica): run it on at most {most * sizing_def.model_parallel} GPUs (full_geometry.{bench.name}), "
        "or set a larger GBS through full_arguments (a deviation from the RCP)"
    )


def _literal_gbs(sizing_def, gpus: int) -> tuple[int, int] | None:
    """(the GBS a command with literal batch flags makes on ``gpus`` GPUs, its data-parallel replicas); None where the
    GPUs make no whole replicas."""
    if gpus % sizing_def.model_parallel:
        return None
    count = gpus // sizing_def.model_parallel
    return (sizing_def.max_micro_batch * count if sizing_def.literal_batch == "per_gpu" else sizing_def.global_batch_size), count


def literal_batch(bench, ruleset: str, nodes: int, gpus_per_node: int) -> PlannedBatch | None:
    """What a command whose batch flags are literal makes on ``nodes`` x ``gpus_per_node`` GPUs: its GBS
    (``full.sizing.literal_batch``) and each literal RCP value (``full.sizing.literal_values``) beside the RCP's at that
    GBS, a deviation where they differ. None: the GPUs do not make whole replicas of the GBS (the geometry's problem)."""
    sizing_def = bench.full.sizing
    gpus = nodes * gpus_per_node
    literal = _literal_gbs(sizing_def, gpus)
    if literal is None:
        return None
    gbs, count = literal
    made = split(gbs, count, sizing_def.max_micro_batch, sizing_def.accumulates)
    if made is None:
        return None
    table = rcp_table(bench.submission_benchmark, ruleset)
    point = table.point(gbs) if table else None
    gbs_source = f"RCP {point.name}" if point else "literal: no RCP at this GBS"
    if gbs != sizing_def.global_batch_size:
        gbs_source = f"geometry: the command's literal per-GPU batch {sizing_def.max_micro_batch} x {gpus} GPUs; " + gbs_source
    rows = [Row("global_batch_size", gbs, point.gbs if point else None, gbs_source)]
    values = {}
    for key, where in sizing_def.literal_values.items():
        value = _as_number(_literal_word(bench, where))
        values[key] = value
        rows.append(Row(key, value, point.hyperparameters.get(key) if point else None, f"literal {where}"))
    checks = rule_checks(bench.submission_benchmark, ruleset, {"global_batch_size": gbs, **sizing_def.fixed, **values})
    return PlannedBatch(bench.name, ruleset, made, coverage(table, gbs), {}, tuple(rows), tuple(checks), sizing_def.max_micro_batch)


def _literal_word(bench, where: str) -> str:
    """The value the command (``--flag VALUE`` or ``--flag=VALUE``) or ``full.env`` (``$NAME``) gives literally."""
    if where.startswith("$"):
        value = bench.full.env.get(where[1:])
        if value is None:
            raise ConfigError(f"{bench.name}: full.sizing.literal_values names {where}, which full.env does not set")
        return value
    words = [word for part in bench.full.command for word in part.split()]
    for i, word in enumerate(words):
        if word.startswith(f"{where}="):
            return word.split("=", 1)[1]
        if word == where and i + 1 < len(words):
            return words[i + 1]
    raise ConfigError(f"{bench.name}: full.sizing.literal_values names {where}, which is not a flag of its command")


def _as_number(text: str) -> object:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _reads_rules(bench) -> bool:
    """Whether the benchmark's command or env reads a value the rules derive (``{rule[NAME]}``)."""
    from mlperf_wf.config.registry import placeholders

    words = [*bench.full.command, *bench.full.multi_node_args, *bench.full.env.values()]
    return any(name == "rule" for word in words for name in placeholders(word))


def _why_not(gbs: int, count: int, sizing_def, limit: int) -> str:
    """Why a GBS does not run on ``count`` replicas within the micro batch ``limit`` (a phrase)."""
    made = split(gbs, count, limit, sizing_def.accumulates)
    if made is None:
        return "cannot be made"
    held = "the reference runs" if limit == sizing_def.max_micro_batch else "the GPUs' memory holds"
    return f"needs micro batch {made.micro_batch} where {held} {limit}"


def _micro_limit(sizing_def) -> str:
    return "any micro batch and accumulation" if sizing_def.accumulates else "no gradient accumulation"


def describe_batch(planned: PlannedBatch) -> list[str]:
    """The dry run's table of a benchmark's batch, hyperparameters and rules: one line each."""
    s = planned.split
    lines = [
        f"{planned.benchmark} ({planned.ruleset}): GBS {s.gbs} = {s.replicas} replicas x micro batch {s.micro_batch} x "
        f"{s.accumulation} accumulation; RCP: {planned.coverage.message} ({', '.join(planned.coverage.basis) or 'none'})"
    ]
    if planned.memory_note:
        lines.append(f"  {planned.memory_note}")
    if not s.fits(planned.max_micro_batch):
        lines.append(f"  micro batch {s.micro_batch} is above the {planned.max_micro_batch} the reference's configuration runs: check it fits in memory")
    width = max(len(row.key) for row in planned.rows)
    for row in planned.rows:
        note = "DEVIATION from the RCP" if row.deviation else ("the RCP's" if row.source.startswith("RCP") else row.source)
        if row.deviation and row.source != "override":
            note += f" ({row.source})"
        if row.source == "geometry" and row.rcp_value is not None and row.rcp_value != row.value:
            note = f"geometry (the RCP ran with {row.rcp_value})"
        rcp = "" if row.rcp_value is None or row.value == row.rcp_value else f" (RCP: {row.rcp_value})"
        lines.append(f"  {row.key:<{width}}  {row.value}{rcp}  {note}")
    for check in planned.rules:
        state = {True: "holds", False: "BROKEN", None: "checked on the run's log"}[check.held]
        lines.append(f"  rule {check.key}: {check.rule}  {state}")
    return lines


# ---- the size command ----

STARTUP_MINUTES = 20
"""Minutes a walltime allows before the timed region (container start, model and data loading up to run_start)."""
WALLTIME_MARGIN = 1.25
"""Factor on the slowest RCP run's training time: evaluations and run-to-run throughput variation."""


def samples(table: RcpTable, value: float, sizing_def) -> float | None:
    """An RCP value in samples (epochs x the benchmark's ``samples_per_epoch``, tokens / its ``tokens_per_sample``);
    None where an epoch's or a sample's size is unknown."""
    if table.unit == "samples":
        return value
    if table.unit == "tokens":
        return value / sizing_def.tokens_per_sample if sizing_def and sizing_def.tokens_per_sample else None
    return value * sizing_def.samples_per_epoch if sizing_def and sizing_def.samples_per_epoch else None


def walltime_minutes(slowest_samples: float, samples_per_second_per_gpu: float, gpus: int) -> int:
    """A walltime that leaves margin: the slowest RCP run's samples at the given throughput, times the margin, plus
    the start-up allowance."""
    training = slowest_samples / (samples_per_second_per_gpu * gpus) / 60
    return math.ceil(training * WALLTIME_MARGIN + STARTUP_MINUTES)


def walltime_for(minutes: float) -> int:
    """A walltime for a run expected to train in ``minutes``: times the margin, plus the start-up allowance."""
    return math.ceil(minutes * WALLTIME_MARGIN + STARTUP_MINUTES)


def size_report(
    bench,
    ruleset: str,
    nodes: int,
    gpus_per_node: int,
    gbs: int | None = None,
    throughput: float | None = None,
    accelerator: str | None = None,
    gpu_memory_gib: float | None = None,
) -> list[str]:
    """What ``mlperf-wf size`` prints: the GBS the rules and the RCPs allow on ``nodes`` x ``gpus_per_node`` GPUs, and
    for the chosen one (``gbs``, else :func:`choose_gbs`'s) the hyperparameters, the split, the expected samples to
    converge, the expected time to train on ``accelerator`` (published results scaled to the system, else model
    FLOPs: ``mlperf_wf.plan.published``) and a walltime."""
    sizing_def = bench.full.sizing
    name = bench.name
    gpus = nodes * gpus_per_node
    table = rcp_table(bench.submission_benchmark, ruleset)
    runs = mlperf_rules.required_runs(bench.submission_benchmark)
    lines = [f"{name} on {nodes}x{gpus_per_node} GPUs, ruleset {ruleset} ({runs} runs per set)"]
    if sizing_def is None:
        return [*lines, f"  {name}'s definition has no full.sizing: its plan's batch flags are literal (see its README)"]
    single = launcher_nodes_problem(bench, nodes)
    if single:
        return [*lines, f"  {single}: size it with --nodes 1"]
    if gpus % sizing_def.model_parallel:
        nodes_needed = math.ceil(sizing_def.model_parallel / gpus_per_node)
        return [
            *lines,
            f"  {gpus} GPUs do not hold whole model replicas of {sizing_def.model_parallel} GPUs (the reference's tensor x pipeline x "
            f"context parallelism): use a multiple of {sizing_def.model_parallel} GPUs, at least {nodes_needed} nodes of {gpus_per_node}",
        ]
    count = replicas(gpus, sizing_def.model_parallel)
    limit = micro_batch_limit(sizing_def, gpu_memory_gib)
    accumulation = "micro batches accumulated" if sizing_def.accumulates else "no gradient accumulation: the per-replica share is the micro batch"
    lines.append(
        f"  {count} data-parallel replicas of {sizing_def.model_parallel} GPU(s); the reference's micro batch {sizing_def.max_micro_batch}, {accumulation}"
    )
    if limit != sizing_def.max_micro_batch:
        lines.append(
            f"  micro batch at most {limit} on {gpu_memory_gib:g} GiB GPUs (the reference's {sizing_def.max_micro_batch} on "
            f"{sizing_def.reference_gpu_memory_gib:g} GiB, in proportion: an assumption a first run checks)"
        )
    gbs_rules = [check for check in rule_checks(bench.submission_benchmark, ruleset, {"global_batch_size": count}) if check.key == "global_batch_size"]
    rule_text = "; ".join(f"closed rule {check.rule}" for check in gbs_rules) or "no closed rule on it"
    lines.append(f"  global batch sizes this system can make: multiples of {count} ({rule_text})")
    if table is None:
        return [*lines, f"  no RCPs for {bench.submission_benchmark} in {ruleset}: a closed set cannot pass the RCP check in this round"]
    lines.append(f"  RCPs of {ruleset} ({table.unit} to converge; * kept by the checker's pruning, the points the summarizer tests against):")
    lines.append(f"    {'GBS':>7}  {'mean':>12}  {'min allowed':>12}  {'slowest':>12}  runs  on this system")
    number = (lambda value: f"{value:,.0f}") if table.unit in ("samples", "tokens") else (lambda value: f"{value:.4g}")
    for point in table.points:
        made = split(point.gbs, count, limit, sizing_def.accumulates)
        allowed = all(check.held is not False for check in rule_checks(bench.submission_benchmark, ruleset, {"global_batch_size": point.gbs}))
        here = _split_text(made, sizing_def, limit) if made and allowed else ("not a multiple of the replicas" if allowed else "a closed rule forbids it")
        star = "*" if point.pruned else " "
        lines.append(
            f"    {point.gbs:>6}{star}  {number(point.mean):>12}  {number(point.min_allowed_mean):>12}  "
            f"{number(max(point.converged)):>12}  {len(point.converged):>4}  {here}"
        )
    lines.append(
        "  between RCPs the checker interpolates the two pruned points around the GBS; below the smallest it tests against the "
        "smallest (passes only if converging no faster); above the largest it asks for a new RCP"
    )
    reachable = [point.gbs for point in table.points if split(point.gbs, count, limit, sizing_def.accumulates)]
    wider = [f"{point.gbs} with {gpus // point.gbs * sizing_def.model_parallel}" for point in table.points if point.gbs < count and gpus % point.gbs == 0]
    if wider:
        lines.append(f"  fewer replicas (more GPUs per model replica: tensor/pipeline parallel) reach smaller RCPs: GBS {', '.join(wider)} GPUs per replica")
    if gbs is None:
        gbs = choose_gbs(bench, table, count, gpu_memory_gib)
        if gbs is None:
            default = sizing_def.global_batch_size
            gbs = default if default % count == 0 else next(iter(reachable), None)
        if gbs is None:
            return [*lines, f"  no RCP batch size is a multiple of {count}: choose the GBS with --gbs (coverage as above)"]
    made = split(gbs, count, limit, sizing_def.accumulates)
    if made is None:
        raise ConfigError(f"size: --gbs {gbs} is not a multiple of the {count} data-parallel replicas; RCP batch sizes this system can make: {reachable}")
    case = coverage(table, gbs)
    lines.append(f"  GBS {gbs}: {case.message} ({', '.join(case.basis) or 'no RCP'}); {_split_text(made, sizing_def, limit)}")
    point = table.point(gbs)
    if point is not None:
        lines.append("    hyperparameters (the RCP's): " + ", ".join(f"{key} {value}" for key, value in point.hyperparameters.items()))
    else:
        neighbours = [table.point(size) for size in _neighbours([p.gbs for p in table.points], gbs)]
        for near in neighbours:
            lines.append(f"    no RCP at {gbs}; nearest {near.name}: " + ", ".join(f"{key} {value}" for key, value in near.hyperparameters.items()))
    if case.mean is None:
        return [*lines, *_time_lines(bench, gpus, accelerator, None)]
    slowest_points = [point] if point else [table.point(size) for size in _neighbours([p.gbs for p in table.points], gbs)]
    slowest = max(max(p.converged) for p in slowest_points)
    mean_samples, slowest_samples = samples(table, case.mean, sizing_def), samples(table, slowest, sizing_def)
    in_samples = f" ({mean_samples:,.0f} samples of {sizing_def.tokens_per_sample} tokens)" if table.unit == "tokens" and mean_samples else ""
    lines.append(
        f"    expected to converge: mean {number(case.mean)} {table.unit}{in_samples} (a set passes with an olympic mean of at "
        f"least {number(case.min_allowed_mean)}); slowest RCP run {number(slowest)}"
    )
    lines += _time_lines(bench, nodes * gpus_per_node, accelerator, mean_samples)
    throughput = throughput or sizing_def.samples_per_second_per_gpu
    if slowest_samples is None:
        lines.append(f"    walltime: the RCPs count epochs and {name}'s definition gives no samples_per_epoch")
    elif throughput is None:
        lines.append("    walltime: give --throughput SAMPLES_PER_SECOND_PER_GPU (a measured first run) for an estimate")
    else:
        minutes = walltime_minutes(slowest_samples, throughput, gpus)
        mean_minutes = mean_samples / (throughput * gpus) / 60
        lines.append(
            f"    at {throughput:g} samples/s per GPU: mean {mean_minutes:.1f} min to converge; walltime {minutes} min "
            f"(slowest RCP run x {WALLTIME_MARGIN} + {STARTUP_MINUTES} min start-up); set full_geometry walltime_minutes"
        )
    return lines


def _time_lines(bench, gpus: int, accelerator: str | None, mean_samples: float | None) -> list[str]:
    from mlperf_wf.plan import published

    if not accelerator:
        return [f"    expected time to train: give --accelerator (e.g. H100, B200, MI300X: {', '.join(published.flops_table().accelerators)})"]
    family = published.family_of(accelerator)
    if family is None:
        return [f"    expected time to train: {accelerator!r} is no accelerator the table knows: {', '.join(published.flops_table().accelerators)}"]
    estimate = published.estimate(bench.name, family, gpus, mean_samples)
    if estimate is None:
        return [f"    expected time to train on {gpus} {family}: no published result and no model FLOPs for {bench.name}; measure a run (--throughput-from)"]
    if estimate.lower_bound:
        return [
            f"    expected time to train on {gpus} {family}: at least {estimate.minutes:.1f} min "
            "(a lower bound: no walltime follows; measure a run, --throughput-from)",
            f"      from {estimate.basis}",
        ]
    return [
        f"    expected time to train on {gpus} {family}: {estimate.minutes:.1f} min; walltime per run {walltime_for(estimate.minutes)} min "
        f"(x {WALLTIME_MARGIN} + {STARTUP_MINUTES} min start-up)",
        f"      from {estimate.basis}",
    ]


def _split_text(made: Split, sizing_def, limit: int | None = None) -> str:
    limit = limit or sizing_def.max_micro_batch
    text = f"micro batch {made.micro_batch} x {made.accumulation} accumulation"
    if not made.fits(limit):
        whose = "the reference's" if limit == sizing_def.max_micro_batch else "what the GPUs' memory holds,"
        text += f" (above {whose} {limit}: check memory)"
    return text


def _neighbours(sizes: list[int], gbs: int) -> list[int]:
    """The RCP batch sizes around ``gbs``: the nearest below and above (one where ``gbs`` is outside them)."""
    below = [size for size in sizes if size < gbs]
    above = [size for size in sizes if size > gbs]
    return [size for size in (max(below, default=None), min(above, default=None)) if size is not None]
