"""Time-to-train scores that equal mlperf-logging's result summarizer, computed faster.

What is reused from mlperf-logging, unchanged: the log parser (``mlp_parser``),
the compliance checker (``ComplianceChecker.check_loglines`` with the ruleset's
YAML rules), the olympic average (``_compute_olympic_average``), the RCP checker
(``rcp_checker.check_directory`` and ``RCP_Checker``'s records) and the result
counts (``benchmark_meta``). What is ours is the glue, and four things the
official tools lack:

- speed: each file is parsed once for compliance and timing, files are checked
  in parallel processes, the rule YAMLs are loaded once per process instead of
  once per file, and the parsers' ``re.sub(".*:::MLLOG ", ...)`` (quadratic on
  long lines, most of the summarizer's 10 s on a vendor folder) is replaced by
  the equivalent ``line[line.rindex(":::MLLOG "):]`` while they run;
- explanation: which runs were dropped and why, per-run minutes, compliance
  messages, the RCP reference mean and the minimum allowed mean;
- no side effects: the summarizer's RCP step rewrites ``scaling.json`` in the
  results folder (mlcommons/logging#278); this module never writes there;
- a verdict for any log: a folder of console logs of any name (a reference
  implementation's ``seed_*.out``) is scored too, and a log mlperf-logging's
  parser or rules raise on (``KeyError: 'time_ms'``, a round without rules for
  the benchmark) is a failed run whose ``problems`` say what is wrong in it.

The scaling factor is the summarizer's: ``scaling.json`` when the folder has one
(the package checker writes it, the review committee may set it). When it has
none, the summarizer uses 1.0 on its first run and the RCP normalisation after
its own RCP step wrote the file; here the RCP normalisation is used directly, so
the answer does not depend on how often a tool ran before.

Energy to train (MLPerf Power) is the summarizer's too: a run whose result file
``<folder>/<name>.txt`` has ``<folder>/power/<name>/node_*.txt`` (and ``sw_*.txt``)
gets ``_compute_total_power``'s joules, and the benchmark the olympic energy score
of ``_index_olympic_average`` (the runs ordered by time to train) times the same
scaling factor. What is ours: a run whose power logs the summarizer would crash on
(no node file, no ``power_measurement_start``) or silently count as 0 J (no
``power_reading``) has no energy and a problem saying why, instead of a traceback or
a zero; the energy score is then not given.
"""

from __future__ import annotations

import contextlib
import copy
import glob
import io
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml
from mlperf_logging.compliance_checker import mlp_compliance, mlp_parser

from mlperf_wf.errors import UserError
from mlperf_wf.kinds import Verdict
from mlperf_wf.results import compliance
from mlperf_wf.run import identity

USAGE = "training"
TOKEN = compliance.TOKEN
_SLOW_STRIP = ".*" + TOKEN


class _FastStripRe:
    """Stands in for ``re`` inside mlperf-logging's parsers: same results, linear time.

    ``re.sub(".*:::MLLOG ", ":::MLLOG ", line)`` keeps the line from the last
    token on (``.`` does not cross the line's trailing newline). Every other
    call goes to the real ``re``.
    """

    def __getattr__(self, name: str) -> object:
        return getattr(re, name)

    @staticmethod
    def sub(pattern: str, repl: str, string: str, count: int = 0, flags: int = 0) -> str:
        if pattern == _SLOW_STRIP and repl == TOKEN and not count and not flags and "\n" not in string.rstrip("\n"):
            last = string.rfind(TOKEN)
            return string if last < 0 else string[last:]
        return re.sub(pattern, repl, string, count=count, flags=flags)


class _CachedYaml:
    """Stands in for ``yaml`` inside the compliance checker: each rule file is read once per process."""

    BaseLoader = yaml.BaseLoader
    _cache: dict[str, object] = {}  # noqa: RUF012 - a per-process cache by design

    def __getattr__(self, name: str) -> object:
        return getattr(yaml, name)

    def load(self, stream, Loader):
        name = getattr(stream, "name", None)
        if name is None:
            return yaml.load(stream, Loader=Loader)
        if name not in self._cache:
            self._cache[name] = yaml.load(stream, Loader=Loader)
        return copy.deepcopy(self._cache[name])


@contextlib.contextmanager
def fast_mlperf_logging() -> Iterator[None]:
    """Swap in the linear-time strip and the rule-file cache while mlperf-logging code runs."""
    import importlib

    from mlperf_logging.rcp_checker import rcp_checker

    parsers = [importlib.import_module(f"mlperf_logging.compliance_checker.mlp_parser.{name}") for name in _parser_modules()]
    patched = [(module, "re", _FastStripRe()) for module in [*parsers, rcp_checker]]
    patched.append((mlp_compliance, "yaml", _CachedYaml()))
    saved = [(module, attr, getattr(module, attr)) for module, attr, _ in patched]
    try:
        for module, attr, value in patched:
            setattr(module, attr, value)
        yield
    finally:
        for module, attr, value in saved:
            setattr(module, attr, value)


def _parser_modules() -> list[str]:
    folder = Path(mlp_parser.__file__).parent
    return sorted(p.stem for p in folder.glob("ruleset_*.py"))


@dataclass
class RunScore:
    """One result file."""

    file: str
    minutes: float | None
    """run_stop - run_start in minutes, None when the file does not count."""
    seed: int | None
    status: str | None
    compliant: bool
    messages: list[str]
    launch_ms: float | None = None
    """Time of the log's first event: the objective order of runs for M > N window selection."""
    samples_to_converge: float | None = None
    """samples_count (or epoch_num) of the last eval before a successful run_stop."""
    progress_key: str | None = None
    """Which of the two the run's evaluations carry: samples_count (LLMs) or epoch_num (rgat)."""
    final_eval_accuracy: float | None = None
    dropped: str | None = None
    """Why the run is not in the olympic mean: fastest, slowest, did not converge, failed compliance, outside the selected window."""
    verdict: Verdict | None = None
    """The compliance verdict of the run's log."""
    problems: list[str] = field(default_factory=list)
    """What is missing or wrong in the log, a few words each (empty when it passed)."""
    energy_joules: float | None = None
    """Energy to train (the summarizer's ``_compute_total_power``), when the run has power logs and counts."""
    power_folder: str | None = None
    """``power/<result name>/`` beside the result file, when it exists."""
    power_problems: list[str] = field(default_factory=list)
    """Why the run has no energy although it has power logs, or what the summarizer would only warn about."""
    sense_problems: list[str] = field(default_factory=list)
    """Why the log's times make no sense (a run_stop before its run_start): the run is not timed."""
    outcome: str | None = None
    """What every reader says of the run (:class:`mlperf_wf.kinds.Outcome`), once :mod:`mlperf_wf.results.verdict` judged it."""
    reason: str = ""
    """Why it does not count, in one line naming the file (empty when it counts)."""


@dataclass
class RcpResult:
    """The RCP check of one benchmark folder (closed division)."""

    verdict: str
    """Pass, Fail, Interp. Fail, Missing, No RCP or Unknown state, as the result summarizer names them."""
    message: str
    global_batch_size: float | None
    samples_to_converge: float | None
    """Olympic mean of the runs' samples (or epochs) to converge."""
    reference_mean: float | None = None
    min_allowed_mean: float | None = None
    norm_factor: float = 1.0


@dataclass
class BenchmarkScore:
    """One (system, benchmark)."""

    system: str
    system_name: str
    benchmark: str
    division: str
    ruleset: str
    folder: str
    runs: list[RunScore]
    required_runs: int | None
    olympic_minutes: float | None
    scaling_factor: float
    scaling_source: str
    time_to_train: float | None
    rcp: RcpResult | None
    valid: bool
    reasons: list[str] = field(default_factory=list)
    energy_joules: float | None = None
    """Olympic energy to train x scaling factor (the summarizer's ``<benchmark>:Energy``), when the runs have power logs."""
    energy_reasons: list[str] = field(default_factory=list)
    """Why there is no energy score although power logs exist."""


def eval_progress(metadata: dict) -> tuple[str | None, float | None]:
    """Where an evaluation happened: (samples_count, value) for the LLMs, (epoch_num, value) for rgat, else (None, None)."""
    for key in ("samples_count", "epoch_num"):
        if key in metadata:
            return key, metadata[key]
    return None, None


def score_file(path: str, ruleset: str, declared: dict[str, str] | None = None, host: str | None = None) -> RunScore:
    """Parse once; run the official compliance rules on the parsed lines; read start/stop and seed.

    A log mlperf-logging cannot parse or check (its parser and rules raise on some
    logs the workflow did not write) is a failed run whose ``problems`` say why;
    this never raises. ``host``: where the run ran (its provenance), which its node 0 power log must name.
    """
    try:
        return _score_file(path, ruleset, declared, host)
    except Exception as err:  # a log of any shape gets a verdict, never a traceback
        return _unparsable(path, ruleset, err)


def _score_file(path: str, ruleset: str, declared: dict[str, str] | None = None, host: str | None = None) -> RunScore:
    crash = None
    with fast_mlperf_logging():
        try:
            loglines, errors = mlp_parser.parse_file(path, ruleset=ruleset)
        except Exception as err:  # e.g. KeyError: 'time_ms' on lines without a timestamp
            return _unparsable(path, ruleset, err)
        checker = mlp_compliance.make_checker(USAGE, ruleset, True, False)
        if errors:
            checker.put_message("Log lines had parsing errors.")
        try:
            checker.check_loglines(loglines, f"{USAGE}_{ruleset}/common.yaml")
        except Exception as err:  # e.g. FileNotFoundError: the ruleset has no rules for the benchmark
            crash = compliance.describe_exception(err)
    compliant = not checker.has_messages() and crash is None
    messages = [str(m) for m in [*checker.not_overwritable, *checker.overwritable.values()]]
    start = stop = seed = status = None
    last_eval: tuple[float, float | None] | None = None
    progress_key = None
    run_stops = []
    for line in loglines:
        metadata = line.value.get("metadata") or {}
        if line.key == "run_start" and start is None:
            start = line.timestamp
        elif line.key == "run_stop":
            run_stops.append(metadata.get("status"))
            if stop is None:
                stop = line.timestamp
                status = metadata.get("status")
        elif line.key == "seed" and seed is None:
            seed = line.value.get("value")
        elif line.key == "eval_accuracy" and stop is None:
            progress_key, progress = eval_progress(metadata)
            last_eval = (line.value.get("value"), progress)
    sense = compliance.duration_problems(start, stop)
    counts = compliant and not errors and start is not None and stop is not None and not sense
    verdict = compliance.classify(bool(counts), messages, run_stops, declared) if crash is None else Verdict.FAILED
    if verdict == Verdict.PASSED_EXCEPT_DECLARED and not errors and start is not None and stop is not None and not sense:
        # The checker failed only on the tiny tier's declared open rules: timed as a run that reached the target.
        counts, problems = True, compliance.declared_problems(messages, declared or {}, ruleset)
    else:
        problems = [] if counts else compliance.explain(messages, compliance.read_facts(path), ruleset, crash)
    if crash:
        messages.append(f"mlperf-logging crashed: {crash}")
    folder = power_folder_of(path)
    energy, power_problems = run_energy(path, float(stop) - float(start), ruleset, (float(start), float(stop)), host) if counts and folder else (None, [])
    return RunScore(
        file=path,
        minutes=(float(stop) - float(start)) / 60 / 1000 if counts else None,
        seed=seed,
        status=status,
        compliant=bool(counts),
        messages=messages,
        launch_ms=loglines[0].timestamp if loglines else None,
        samples_to_converge=last_eval[1] if last_eval and status == "success" else None,
        progress_key=progress_key,
        final_eval_accuracy=last_eval[0] if last_eval else None,
        verdict=verdict,
        problems=problems,
        energy_joules=energy,
        power_folder=folder,
        power_problems=power_problems,
        sense_problems=sense,
    )


def power_folder_of(result_file: str) -> str | None:
    """``<folder>/power/<name>/`` of ``<folder>/<name>.txt`` when it exists: the summarizer's rule (the name up to its first dot)."""
    path = Path(result_file)
    folder = path.parent / "power" / path.name.split(".")[0]
    return str(folder) if folder.is_dir() else None


POWER_CLOCK_SLACK_MS = 2000
"""How far a power log's window may fall short of the run's (clocks of the nodes and of the run's log differ a
little); further, the log is not this run's measurement."""


def run_energy(
    result_file: str, time_to_train_ms: float, ruleset: str, run_window: tuple[float, float] | None = None, host: str | None = None
) -> tuple[float | None, list[str]]:
    """Joules of one run by mlperf-logging's ``_compute_total_power``, and what is wrong in its power logs.

    Checked first, since the summarizer crashes on them (or counts 0 J): no ``node_*.txt``, a node file without
    ``power_measurement_start`` or without any ``power_reading``. Checked for sense, since the summarizer would
    compute an energy from them: a window (``power_measurement_start`` to its stop, else the last reading) that does
    not cover ``run_window`` (run_start, run_stop in ms), a file logged as another node than its name says, a node 0
    log sampled on another host than ``host`` (the run's provenance). Any of these: no energy. A missing
    ``power_measurement_stop`` is only noted: the summarizer then ends the window at the last reading."""
    folder = Path(power_folder_of(result_file) or "")
    nodes = sorted(folder.glob("node_*.txt"))
    if not nodes:
        return None, [f"{folder}: no node_*.txt power log"]
    problems, notes = [], []
    for node in nodes:
        records = [record for record in map(compliance.mllog_record, node.read_text(encoding="latin-1").splitlines()) if record]
        keys = [record.get("key") for record in records]
        if "power_measurement_start" not in keys:
            problems.append(f"{node.name}: no power_measurement_start")
        if "power_reading" not in keys:
            problems.append(f"{node.name}: no power_reading")
        if "power_measurement_stop" not in keys:
            notes.append(f"{node.name}: no power_measurement_stop (the window ends at its last reading)")
        problems += _power_sense(node, records, run_window, host)
    if problems:
        return None, problems + notes
    try:
        with fast_mlperf_logging(), contextlib.redirect_stdout(io.StringIO()):  # the summarizer prints its warnings
            from mlperf_logging.result_summarizer.result_summarizer import _compute_total_power  # scipy, pandas: only to score

            joules = _compute_total_power(str(Path(result_file).parent), result_file, time_to_train_ms, ruleset)
    except Exception as err:  # a value that is not a number, a line without time_ms: mlperf-logging raises
        return None, [f"{folder}: mlperf-logging's _compute_total_power raised {compliance.describe_exception(err)}", *notes]
    return float(joules), notes


def _power_sense(node: Path, records: list[dict], run_window: tuple[float, float] | None, host: str | None) -> list[str]:
    """Why a node's power log is not this run's measurement: its window, node index or host (see :func:`run_energy`)."""
    problems = []
    start = next((r for r in records if r.get("key") == "power_measurement_start"), None)
    meta = start.get("metadata") if start is not None and isinstance(start.get("metadata"), dict) else {}
    index = node.stem.split("_", 1)[1]
    logged = meta.get("node")
    if logged is not None and str(logged) != index:
        problems.append(f"{node.name}: logged as node {logged}, not node {index}: another node's power log")
    sampled_on = meta.get("host")
    if host and index == "0" and sampled_on and sampled_on != host:
        problems.append(f"{node.name}: sampled on host {sampled_on!r}, the run ran on {host!r} (its provenance.json): another run's power log")
    if run_window is None or start is None or not isinstance(start.get("time_ms"), int | float):
        return problems
    window = []
    timed = [(r.get("key"), float(r["time_ms"])) for r in records if isinstance(r.get("time_ms"), int | float)]
    stop = next((t for key, t in timed if key == "power_measurement_stop"), None)
    began = float(start["time_ms"])
    ended = stop if stop is not None else max((t for key, t in timed if key == "power_reading"), default=began)
    run_start, run_stop = run_window
    if began > run_start + POWER_CLOCK_SLACK_MS or ended < run_stop - POWER_CLOCK_SLACK_MS:
        window.append(
            f"{node.name}: its window (time_ms {began:.0f} to {ended:.0f}) does not cover the run (run_start {run_start:.0f} to run_stop {run_stop:.0f}; "
            f"it starts {(began - run_start) / 1000:+.1f} s from run_start, ends {(ended - run_stop) / 1000:+.1f} s from run_stop): another run's power log"
        )
    return window + problems


def energy_score(benchmark: str, runs: list[RunScore], scaling_factor: float) -> tuple[float | None, list[str]]:
    """The summarizer's olympic energy (``_index_olympic_average`` over the counted runs ordered by time), x scaling factor."""
    counted = [run for run in runs if run.minutes is not None]
    dropped, max_dropped = len(runs) - len(counted), max_dropped_runs(benchmark)
    missing = [f"{Path(run.file).name}: {'; '.join(run.power_problems) or 'no power logs'}" for run in counted if run.energy_joules is None]
    if missing:
        return None, [f"no energy for {len(missing)} counted runs: {' | '.join(missing)}"]
    if dropped > max_dropped:
        return None, [f"{dropped} runs do not count; at most {max_dropped} may"]
    index = [i for i, _ in sorted(enumerate(run.minutes for run in counted), key=lambda pair: pair[1])]
    from mlperf_logging.result_summarizer.result_summarizer import _index_olympic_average  # scipy, pandas: only to score

    olympic = _index_olympic_average([run.energy_joules for run in counted], index, dropped, max_dropped)
    if olympic is None:
        return None, [f"{len(counted)} counted runs leave none after dropping {max_dropped} at each end"]
    return olympic * scaling_factor, []


def _unparsable(path: str, ruleset: str, err: Exception) -> RunScore:
    """A log mlperf-logging's parser (or reading it) raised on: failed, with what in the log caused it."""
    facts = compliance.read_facts(path)
    crash = compliance.describe_exception(err)
    problems = compliance.explain([], facts, ruleset, crash)
    seed = facts.values.get("seed")
    return RunScore(
        file=path,
        minutes=None,
        seed=seed if isinstance(seed, int) else None,
        status=facts.run_stops[0] if facts.run_stops else None,
        compliant=False,
        messages=[f"mlperf-logging crashed: {crash}"],
        verdict=Verdict.FAILED,
        problems=problems,
    )


def check_rcp(folder: str, ruleset: str, rcp_bypass: bool = False) -> RcpResult:
    """The summarizer's RCP step for a benchmark folder, without writing scaling.json."""
    import numpy as np
    from mlperf_logging.rcp_checker import rcp_checker

    files = glob.glob(f"{folder}/result_*.txt")
    with fast_mlperf_logging():
        passed, message, norm = rcp_checker.check_directory(
            folder, USAGE, ruleset, False, False, rcp_file=None, rcp_pass="pruned_rcps", rcp_bypass=rcp_bypass, set_scaling=False
        )
        gbs, epochs, benchmark = rcp_checker.get_submission_epochs(files, ruleset, bert_train_samples=False)
    if passed:
        verdict = "Pass"
    else:
        verdict = {"RCP found": "Fail", "RCP Interpolation": "Interp. Fail", "Cannot find any RCPs": "No RCP"}.get(
            message, "Missing" if "Missing" in message else "Unknown state"
        )
    samples = None
    if epochs:
        epochs = sorted(epochs)
        if len(epochs) >= 3:
            samples = float(np.mean(epochs[1 : len(epochs) - 1]))
    result = RcpResult(verdict=verdict, message=message, global_batch_size=float(gbs) if gbs not in (None, -1) else None, samples_to_converge=samples)
    if benchmark and gbs not in (None, -1):
        record = _rcp_record(benchmark, ruleset, gbs)
        if record:
            result.reference_mean = float(record["RCP Mean"])
            result.min_allowed_mean = float(record["RCP Mean"] / record["Max Speedup"])
    result.norm_factor = float(norm)
    return result


def check_rcp_of_files(files: list[str], ruleset: str, rcp_bypass: bool = False) -> RcpResult:
    """The RCP check of result files named otherwise (a workflow's runs/<i>/result.txt): the checker
    only reads ``result_*.txt`` in one folder, so they are linked into a scratch folder under those names."""
    with tempfile.TemporaryDirectory() as scratch:
        for i, path in enumerate(files):
            os.symlink(Path(path).resolve(), Path(scratch) / f"result_{i}.txt")
        try:
            return check_rcp(scratch, ruleset, rcp_bypass)
        except Exception as err:  # mlperf-logging raises bare Exceptions for rulesets or benchmarks without RCPs
            return RcpResult(verdict="Unknown state", message=f"{type(err).__name__}: {err}", global_batch_size=None, samples_to_converge=None)


def _rcp_record(benchmark: str, ruleset: str, gbs: float) -> dict | None:
    """The RCP record (found or interpolated) the checker compares against, for the report."""
    from mlperf_logging.rcp_checker import rcp_checker

    try:
        checker = rcp_checker.RCP_Checker(USAGE, ruleset, benchmark, False)
    except Exception:  # mlperf-logging raises bare Exception (or KeyError, OSError) when there are no RCPs here
        return None
    record = checker._find_rcp(gbs, "pruned_rcps")
    if record is None:
        low, high = checker._find_top_min_rcp(gbs, "pruned_rcps"), checker._find_bottom_max_rcp(gbs, "pruned_rcps")
        if low is not None and high is not None:
            _, record = checker._create_interp_rcp(gbs, low, high)
        elif low is None and high is not None:
            record = checker._find_min_rcp("pruned_rcps")
    return record


# ---- discovery ----


@dataclass
class BenchmarkFolder:
    """A folder of result files to score as one (system, benchmark)."""

    folder: str
    system: str
    benchmark: str
    result_files: tuple[str, ...]
    system_desc: dict
    declared: dict[str, str] | None = None
    """The open rules the benchmark's tiny tier declares it does not meet, for a workflow folder of tiny runs (its
    runs' provenance says ``scale: tiny``), as the workflow's report applies them; None otherwise."""


LOG_SUFFIXES = (".out", ".log", ".txt")
"""Names a folder of logs written otherwise (reference implementations' console logs) may have."""


def _result_files(folder: Path) -> list[str]:
    """result_*.txt (a submission), else runs/<i>/result.txt (the workflow), else any *.out, *.log or *.txt holding :::MLLOG lines."""
    files = sorted(glob.glob(f"{folder}/result_*.txt"))
    if files:
        return files
    # a workflow's run folder whose log is gone (its provenance or verdict is there) is listed too: judged missing
    made = {p.parent for name in ("result.txt", "provenance.json", "compliance.json") for p in folder.glob(f"runs/*/{name}")}
    runs = sorted((p / "result.txt" for p in made), key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if runs:
        return [str(p) for p in runs]
    return _mllog_files(folder)


def _mllog_files(folder: Path) -> list[str]:
    """The files of ``folder`` named *.out, *.log or *.txt that hold :::MLLOG lines, in natural order (seed_2 before seed_10)."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.suffix in LOG_SUFFIXES and p.name != "compliance_checker.log" and p.is_file() and _has_mllog(p)]
    return [str(p) for p in sorted(found, key=_natural)]


def _natural(path: Path) -> list:
    """Sort key: seed_2 before seed_10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]


def _has_mllog(path: Path) -> bool:
    try:
        with open(path, encoding="latin-1") as handle:
            return any(TOKEN in line for line in handle)
    except OSError:
        return False


def _is_organisation(path: Path) -> bool:
    """A submission's organisation folder: ``results/`` and ``systems/``."""
    return (path / "results").is_dir() and (path / "systems").is_dir()


def discover(path: Path) -> list[BenchmarkFolder]:
    """A round's folder of organisations, an organisation folder, benchmark folder, workflow ``results/<benchmark>/``
    folder, or a folder of logs of any name.

    In a folder of logs named otherwise (``seed_1.out``, ...) the benchmark is the
    logs' ``submission_benchmark`` and the folder's own name stands for the system.
    """
    if not path.exists():
        raise UserError(f"{path}: no such folder")
    if _is_organisation(path):
        found = []
        for system_dir in sorted(p for p in (path / "results").iterdir() if p.is_dir()):
            desc_file = path / "systems" / f"{system_dir.name}.json"
            if not desc_file.is_file():
                raise UserError(f"{desc_file}: missing system description for results/{system_dir.name}")
            desc = json.loads(desc_file.read_text())
            for bench_dir in sorted(p for p in system_dir.iterdir() if p.is_dir()):
                files = _result_files(bench_dir)
                if files:
                    found.append(BenchmarkFolder(str(bench_dir), system_dir.name, bench_dir.name, tuple(files), desc))
        return found
    organisations = [sub for sub in sorted(path.iterdir()) if _is_organisation(sub)] if path.is_dir() else []
    if organisations:  # a round's folder of organisations, as the result summarizer takes root/{*}
        return [found for organisation in organisations for found in discover(organisation)]
    files = _result_files(path)
    if not files and path.is_dir():
        # a folder of such folders (a reference's rcp_logs/<GBS>/...): each one is scored on its own
        groups = [sub for sub in sorted(path.iterdir(), key=_natural) if sub.is_dir() and _result_files(sub)]
        if groups:
            return [found for sub in groups for found in discover(sub)]
    if not files:
        raise UserError(
            f"{path}: neither an organisation folder (results/, systems/) nor a folder of result_*.txt, runs/<i>/result.txt"
            " or logs (*.out, *.log, *.txt) with :::MLLOG lines, nor a folder of such folders"
        )
    system, benchmark = path.parent.name, path.name
    if not glob.glob(f"{path}/result_*.txt") and not (path / "runs").is_dir():
        logged = _logged_value(files, "submission_benchmark")
        system, benchmark = path.name, logged if isinstance(logged, str) and logged else path.name
    desc_file = path.parent.parent.parent / "systems" / f"{system}.json"
    desc = json.loads(desc_file.read_text()) if desc_file.is_file() else {}
    return [BenchmarkFolder(str(path), system, benchmark, tuple(files), desc, _declared_of_workflow_runs(path, benchmark))]


def _declared_of_workflow_runs(path: Path, benchmark: str) -> dict[str, str] | None:
    """The tiny tier's declared open rules where ``path`` is a workflow's ``results/tiny/<benchmark>/`` (its runs'
    provenance records the scale)."""
    from mlperf_wf.config import registry

    provenance = next(iter(sorted(path.glob("runs/*/provenance.json"))), None)
    if provenance is None or benchmark not in registry.benchmark_names():
        return None
    try:
        scale = json.loads(provenance.read_text()).get("scale")
    except (OSError, ValueError):
        return None
    return registry.declared_open_rules(benchmark, scale)


def _logged_value(files: tuple[str, ...] | list[str], key: str) -> object:
    """The first value logged for ``key`` in ``files`` (read by hand: lines that are not JSON are skipped), or None."""
    needle = f'"{key}"'
    for path in files:
        with contextlib.suppress(OSError), open(path, encoding="latin-1") as handle:
            for line in handle:
                record = compliance.mllog_record(line) if needle in line else None
                if record is not None and record.get("key") == key:
                    return record.get("value")
    return None


def _division(folder: BenchmarkFolder) -> str:
    if folder.system_desc.get("division"):
        return folder.system_desc["division"]
    division = _logged_value(folder.result_files, "submission_division")
    return division if isinstance(division, str) and division else "closed"


def _scaling_json(folder: str) -> float | None:
    path = os.path.join(folder, "scaling.json")
    if os.path.isfile(path):
        with open(path) as handle:
            return float(json.load(handle)["scaling_factor"])
    return None


def max_dropped_runs(benchmark: str) -> int:
    """Runs the olympic mean drops at each end (the summarizer's rule: 4 for unet3d, else 1)."""
    return 4 if benchmark == "unet3d" else 1


@dataclass
class WindowSelection:
    """The N consecutive runs scored out of M > N (training_rules.adoc, "Benchmark Results")."""

    ordered: list[RunScore]
    """All runs in launch order."""
    runs_made: int
    required: int
    start: int
    """Index, in launch order, of the window's first run."""
    window_minutes: list[float]
    """Olympic mean of every window (inf when the window would be invalid)."""
    median: float


def select_window(runs: list[RunScore], required: int, benchmark: str) -> WindowSelection:
    """Sort by launch time, score every window of ``required`` consecutive runs, take the one closest to the median.

    A window that would be invalid scores infinity; if the median is infinite the
    whole result is invalid, which the caller sees as an infinite chosen score.
    """
    import math
    import statistics

    ordered = sorted(runs, key=lambda r: (r.launch_ms is None, r.launch_ms))
    scores = []
    for start in range(len(ordered) - required + 1):
        window = [copy.copy(r) for r in ordered[start : start + required]]
        minutes, _ = _olympic(benchmark, window)
        scores.append(math.inf if minutes is None else minutes)
    median = statistics.median(scores)
    if math.isinf(median):
        best = scores.index(median)
    else:
        best = min(range(len(scores)), key=lambda i: (abs(scores[i] - median), i))
    return WindowSelection(ordered=ordered, runs_made=len(ordered), required=required, start=best, window_minutes=scores, median=median)


def _olympic(benchmark: str, runs: list[RunScore]) -> tuple[float | None, int]:
    """The summarizer's olympic mean, marking dropped runs; returns (mean, non-counted runs)."""
    max_dropped = max_dropped_runs(benchmark)
    counted = [r for r in runs if r.minutes is not None]
    dropped = len(runs) - len(counted)
    for run in runs:
        if run.minutes is None:
            converging = run.verdict == Verdict.NON_CONVERGED if run.verdict else run.status not in (None, "success")
            run.dropped = "did not converge" if converging else "failed compliance"
            if run.outcome in ("refused", "missing"):
                run.dropped = str(run.outcome)
    if dropped > max_dropped:
        return None, dropped
    ordered = sorted(counted, key=lambda r: r.minutes)
    for run in ordered[:max_dropped]:
        run.dropped = "fastest"
    for run in ordered[len(ordered) - (max_dropped - dropped) :] if max_dropped - dropped else []:
        run.dropped = "slowest"
    from mlperf_logging.result_summarizer.result_summarizer import _compute_olympic_average  # scipy, pandas: only to score

    return _compute_olympic_average([r.minutes for r in ordered], dropped, max_dropped), dropped


def score_paths(
    path: Path, ruleset: str, judge: Callable[[str, str, dict[str, str] | None, str], RunScore], jobs: int | None = None, rcp_bypass: bool = False
) -> list[BenchmarkScore]:
    """Score every (system, benchmark) under ``path``, each log judged by ``judge`` (path, ruleset, declared rules,
    benchmark): :func:`mlperf_wf.results.verdict.judged_score`, the checks every reader applies, which imports this
    module and so is passed in rather than imported."""
    folders = discover(path)
    jobs = jobs or os.cpu_count() or 1
    with ProcessPoolExecutor(max_workers=jobs, initializer=_quiet_worker) as pool:
        file_futures = [[pool.submit(judge, p, ruleset, f.declared, f.benchmark) for p in f.result_files] for f in folders]
        # RCP checks start as soon as a folder's division is known, while other files are still checked.
        closed = [_division(f) == "closed" for f in folders]
        rcp_futures = [_submit_rcp(pool, f, ruleset, rcp_bypass) if c else None for f, c in zip(folders, closed, strict=True)]
        scores = []
        for folder, futures, rcp_future, is_closed in zip(folders, file_futures, rcp_futures, closed, strict=True):
            runs = [future.result() for future in futures]
            refused = identity.of_folder(Path(folder.folder), folder.result_files)  # a workflow's runs: one campaign identity
            for run in runs:
                identity.refuse(run, refused[run.file])
            rcp = rcp_future.result() if rcp_future else None
            division = "closed" if is_closed else _division(folder)
            scored = benchmark_score(folder, division, runs, rcp, ruleset)
            reason = identity.set_reason([run.file for run in runs if refused[run.file]])
            if reason:
                scored.reasons.append(reason)
                scored.valid = False
            scores.append(scored)
    return scores


def _submit_rcp(pool: ProcessPoolExecutor, folder: BenchmarkFolder, ruleset: str, rcp_bypass: bool):
    """The RCP check of a folder: on the folder itself when it holds result_*.txt, else on its runs' files."""
    if glob.glob(f"{folder.folder}/result_*.txt"):
        return pool.submit(_check_rcp_or_unknown, folder.folder, ruleset, rcp_bypass)
    return pool.submit(check_rcp_of_files, [p for p in folder.result_files if Path(p).is_file()], ruleset, rcp_bypass)


def _check_rcp_or_unknown(folder: str, ruleset: str, rcp_bypass: bool) -> RcpResult:
    """:func:`check_rcp`, with the RCP checker's exceptions (logs it cannot read, rounds without RCPs) as an "Unknown state" verdict."""
    try:
        return check_rcp(folder, ruleset, rcp_bypass)
    except Exception as err:
        return RcpResult(verdict="Unknown state", message=f"{type(err).__name__}: {err}", global_batch_size=None, samples_to_converge=None)


def _quiet_worker() -> None:
    """mlperf-logging reports progress through the root logger at INFO; workers keep only errors."""
    import logging

    logging.getLogger().setLevel(logging.ERROR)


def benchmark_score(folder: BenchmarkFolder, division: str, runs: list[RunScore], rcp: RcpResult | None, ruleset: str) -> BenchmarkScore:
    """Olympic score, scaling factor and validity of one (system, benchmark)'s runs."""
    from mlperf_logging import benchmark_meta

    counts = benchmark_meta.get_result_file_counts(USAGE)
    benchmark = "maskrcnn" if folder.benchmark == "mask" else folder.benchmark
    olympic, dropped = _olympic(benchmark, runs)
    from_file = _scaling_json(folder.folder)
    if from_file is not None:
        factor, source = from_file, "scaling.json"
    elif rcp is not None and rcp.verdict == "Pass":
        factor, source = rcp.norm_factor, "rcp normalisation"
    else:
        factor, source = 1.0, "none"
    reasons = []
    required = counts.get(benchmark)
    if required is not None and len(runs) != required:
        reasons.append(f"{len(runs)} runs, {benchmark} requires {required}")
    if olympic is None:
        reasons.append(f"{dropped} runs failed compliance or did not converge; at most {max_dropped_runs(benchmark)} may")
    if rcp is not None and rcp.verdict != "Pass":
        reasons.append(f"RCP check: {rcp.verdict} ({rcp.message})")
    seeds = [r.seed for r in runs if r.seed is not None]
    duplicates = sorted({s for s in seeds if seeds.count(s) > 1})
    if duplicates:
        reasons.append(f"seeds used by more than one run: {duplicates}")
    has_power = (Path(folder.folder) / "power").is_dir() or any(run.power_folder for run in runs)
    energy, energy_reasons = energy_score(benchmark, runs, factor) if has_power else (None, [])
    return BenchmarkScore(
        system=folder.system,
        system_name=folder.system_desc.get("system_name", folder.system),
        benchmark=benchmark,
        division=division,
        ruleset=ruleset,
        folder=folder.folder,
        runs=runs,
        required_runs=required,
        olympic_minutes=olympic,
        scaling_factor=factor,
        scaling_source=source,
        time_to_train=olympic * factor if olympic is not None else None,
        rcp=rcp,
        valid=not reasons,
        reasons=reasons,
        energy_joules=energy,
        energy_reasons=energy_reasons,
    )


def to_rows(scores: list[BenchmarkScore]) -> list[dict]:
    """One flat row per (system, benchmark), for CSV."""
    rows = []
    for s in scores:
        rows.append(
            {
                "system": s.system,
                "system_name": s.system_name,
                "benchmark": s.benchmark,
                "division": s.division,
                "time_to_train": s.time_to_train,
                "olympic_minutes": s.olympic_minutes,
                "scaling_factor": s.scaling_factor,
                "scaling_source": s.scaling_source,
                "rcp": s.rcp.verdict if s.rcp else None,
                "rcp_reference_mean": s.rcp.reference_mean if s.rcp else None,
                "rcp_min_allowed_mean": s.rcp.min_allowed_mean if s.rcp else None,
                "global_batch_size": s.rcp.global_batch_size if s.rcp else None,
                "samples_to_converge": s.rcp.samples_to_converge if s.rcp else None,
                "runs": len(s.runs),
                "dropped": ";".join(f"{Path(r.file).name}:{r.dropped}" for r in s.runs if r.dropped),
                "valid": s.valid,
                "reasons": "; ".join(s.reasons),
                "energy_joules": s.energy_joules,
            }
        )
    return rows


def to_json(scores: list[BenchmarkScore]) -> list[dict]:
    return [asdict(s) for s in scores]
