"""Runs the official mlperf-logging compliance checker on one result file.

The checker is run as its own CLI (``python -m mlperf_logging.compliance_checker``)
so the verdict is exactly the one a submitter gets. A run that is compliant in
every respect except that it never reached the target (``run_stop`` with any
status other than ``success``: mlperf-logging's ``aborted``, the llama2_70b_lora
reference's ``fail``) is recorded as ``non_converged``: the MLPerf scoring rules
let one such run be dropped as the slowest, so it must reach the report rather
than stop the workflow. Any other failure is ``failed``; a log without a
``run_stop`` at all is ``failed`` too (the run ended without logging one).

A tiny tier that cannot meet some of its round's OPEN rules either (llama31_405b's open rules fix
``max_sequence_length`` and ``eval_samples``) declares them in its definition
(``tiny.open_rules_not_met``). The checker still runs unmodified and its messages and exit code are
kept as they are; when every complaint is a failed CHECK of a declared key, the run stopped with
``success`` and nothing else is wrong, the verdict is ``passed_except_declared`` (never ``passed``),
its ``problems`` naming each declared rule and why. Any other complaint keeps ``failed``.

Logs the workflow did not write (reference implementations' console logs) can
crash the checker itself, e.g. ``KeyError: 'time_ms'`` on lines without a
timestamp. A crash is never passed on: the log is read here as well, and the
verdict's ``problems`` (and, for a crash, its ``messages``) say in a few words
what in the log is missing or wrong.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import resources
from importlib.metadata import version
from pathlib import Path

from mlperf_logging.mllog import constants as mllog_constants

from mlperf_wf.errors import UserError
from mlperf_wf.kinds import Verdict

USAGE = "training"
TOKEN = ":::MLLOG "
TARGET_CHECK = "Failed checks for eval_accuracy"
"""How the checker says that no eval_accuracy met the target (the ATLEAST_ONE_CHECK of eval_accuracy)."""
_FIELDS = ("time_ms", "key", "value", "metadata")
"""What mlperf-logging's parsers read from every :::MLLOG line (a missing one raises KeyError there)."""
_SEPARATOR = "\n" + "-" * 30 + "\n"
_RECORD = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) - ")
_TRACEBACK = "Traceback (most recent call last)"


@dataclass
class ComplianceResult:
    """The checker's verdict on one result file."""

    result_file: str
    ruleset: str
    verdict: Verdict
    """passed, passed_except_declared (the checker failed only on the tiny tier's declared open rules, target
    met), non_converged (compliant, target not reached) or failed."""
    returncode: int
    messages: list[str]
    """The checker's own messages, one per complaint; for a checker crash, what in the log caused it and the crash."""
    checker: str
    problems: list[str] = field(default_factory=list)
    """What is missing or wrong, a few words each (empty when passed)."""
    sha256: str = ""
    """sha256 of the bytes checked: the report refuses a log that changed after its check."""


@dataclass(frozen=True)
class RunIdentity:
    """The run a log must belong to: what its train job was started as."""

    submission_benchmark: str | None
    """The benchmark name the log must log as ``submission_benchmark`` (None: not checked)."""
    division: str | None = None
    """``closed`` or ``open``: the log's ``submission_division`` (None: not checked)."""
    seed: int | None = None
    """The seed the run was started with: the log's ``seed`` (None: not checked)."""
    written_sha256: str | None = None
    """sha256 of the log as its train job left it (provenance.json); None: not checked."""

    def problems(self, facts: LogFacts, sha256: str) -> list[str]:
        """Why the log is not this run's (empty when it is)."""
        found = []
        if self.written_sha256 is not None and sha256 != self.written_sha256:
            found.append(f"the log is not the one its train job wrote (sha256 {sha256[:12]}, the job recorded {self.written_sha256[:12]})")
        expected = {"submission_benchmark": self.submission_benchmark, "submission_division": self.division, "seed": self.seed}
        for key, value in expected.items():
            if value is not None and key in facts.values and facts.values[key] != value:
                found.append(f"the log is another run's: {key} {_show(facts.values[key])}, this run's is {_show(value)}")
        return found


# ---- what the log itself holds, read without mlperf-logging ----


@dataclass
class LogFacts:
    """What a log holds, read line by line as the checker would but without ever raising."""

    path: str
    mllog_lines: int = 0
    not_json: list[int] = field(default_factory=list)
    """File line numbers (1-based) of :::MLLOG lines that are not a JSON object."""
    missing: dict[str, list[int]] = field(default_factory=dict)
    """For each field the parsers need (time_ms, key, value, metadata): the lines without it."""
    values: dict[str, object] = field(default_factory=dict)
    """The first value logged for each key."""
    times: dict[str, float] = field(default_factory=dict)
    """The time_ms of the first line of each key (where it is a number)."""
    run_stops: list[str | None] = field(default_factory=list)
    """The status of each run_stop (None when it has none); empty when the log has no run_stop."""
    unreadable: str | None = None


def mllog_record(line: str) -> dict | None:
    """The JSON object after the last ``:::MLLOG`` of ``line``; None when there is none or it is not an object."""
    if TOKEN not in line:
        return None
    try:
        record = json.loads(line[line.rindex(TOKEN) + len(TOKEN) :])
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def read_facts(result_file: Path | str) -> LogFacts:
    """Read what ``result_file`` holds; never raises (an unreadable file is recorded as such)."""
    facts = LogFacts(path=str(result_file))
    try:
        with open(result_file, encoding="latin-1") as handle:
            for lineno, line in enumerate(handle, start=1):
                if TOKEN not in line:
                    continue
                facts.mllog_lines += 1
                record = mllog_record(line)
                if record is None:
                    facts.not_json.append(lineno)
                    continue
                for name in _FIELDS:
                    if name not in record:
                        facts.missing.setdefault(name, []).append(lineno)
                key = record.get("key")
                if not isinstance(key, str):
                    continue
                facts.values.setdefault(key, record.get("value"))
                stamp = record.get("time_ms")
                if isinstance(stamp, int | float) and not isinstance(stamp, bool):
                    facts.times.setdefault(key, float(stamp))
                if key == "run_stop":
                    metadata = record.get("metadata")
                    facts.run_stops.append(metadata.get("status") if isinstance(metadata, dict) else None)
    except OSError as err:
        facts.unreadable = f"{type(err).__name__}: {err.strerror or err}"
    return facts


def duration_problems(run_start_ms: float | None, run_stop_ms: float | None) -> list[str]:
    """Why a run's times make no sense: a ``run_stop`` before its ``run_start`` (never a negative time to train)."""
    if run_start_ms is None or run_stop_ms is None or run_stop_ms >= run_start_ms:
        return []
    early = (run_start_ms - run_stop_ms) / 1000
    return [f"run_stop (time_ms {run_stop_ms:.0f}) is {early:.3f} s before run_start (time_ms {run_start_ms:.0f}): the log's times make no sense"]


# ---- verdicts ----


def _is_checker_warning(message: str) -> bool:
    """A checker warning (printed with the complaints, but it does not fail the log): a required key logged more than once, always with the same value."""
    match = re.fullmatch(r"Required EXACTLY_ONE occurrence of '[^']+' but found (\d+)", message.strip())
    return bool(match) and int(match.group(1)) > 1


def _only_target_missed(messages: list[str]) -> bool:
    """Whether the checker's only complaint is that no eval_accuracy met the target."""
    complaints = [m for m in messages if m.strip() != "FAILED" and not _is_checker_warning(m)]
    return bool(complaints) and all(m.strip().startswith(TARGET_CHECK) for m in complaints)


def declared_check(message: str, declared: dict[str, str] | None) -> str | None:
    """The key of a complaint that is a failed CHECK of a declared key (``CHECK for 'KEY' failed ...``), else None."""
    match = re.match(r"CHECK for '([^']+)'", message.strip())
    return match.group(1) if match and declared and match.group(1) in declared else None


def classify(passed: bool, messages: list[str], run_stops: list[str | None], declared: dict[str, str] | None = None) -> Verdict:
    """passed; passed_except_declared when every complaint is a failed CHECK of a ``declared`` key and the run
    stopped with success; non_converged when the run stopped with a status other than success and the target
    checks (and declared CHECKs) are all that failed; else failed."""
    if passed:
        return Verdict.PASSED
    complaints = [m for m in messages if m.strip() != "FAILED" and not _is_checker_warning(m)]
    undeclared = [m for m in complaints if declared_check(m, declared) is None]
    stopped = len(run_stops) == 1 and run_stops[0] is not None
    if declared and complaints and not undeclared and stopped and run_stops[0] == mllog_constants.SUCCESS:
        return Verdict.PASSED_EXCEPT_DECLARED
    if stopped and run_stops[0] != mllog_constants.SUCCESS and _only_target_missed(undeclared):
        return Verdict.NON_CONVERGED
    return Verdict.FAILED


def declared_problems(messages: list[str], declared: dict[str, str], ruleset: str) -> list[str]:
    """For each declared rule the checker failed: what it says and why the tiny tier declares it."""
    out = []
    for message in messages:
        key = declared_check(message, declared)
        if key is not None:
            out.append(f"official checker failed on declared open rule {_check_problem(message, ruleset)}: {declared[key]}")
    return list(dict.fromkeys(out))


def describe_exception(err: BaseException) -> str:
    """``KeyError: 'time_ms' (ruleset_610.py:44, string_to_logline)``: the exception and where it was raised."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno}, {frames[-1].name})" if frames else ""
    return f"{type(err).__name__}: {err}{where}"


def _crash(output: str) -> str | None:
    """The exception of the last traceback in the checker's output, with where it was raised; None when it did not crash."""
    if _TRACEBACK not in output:
        return None
    lines = [line for line in output[output.rindex(_TRACEBACK) :].splitlines()[1:] if line.strip()]
    exception = next((line for line in reversed(lines) if not line.startswith(" ")), "unknown exception")
    frames = [re.match(r'\s*File "([^"]+)", line (\d+), in (\S+)', line) for line in lines]
    frames = [m for m in frames if m]
    where = f" ({Path(frames[-1].group(1)).name}:{frames[-1].group(2)}, {frames[-1].group(3)})" if frames else ""
    return f"{exception.strip()}{where}"


def _checker_messages(output: str) -> list[str]:
    """The checker's WARNING/ERROR records, each complaint on its own (the checker joins them with a dashed line)."""
    records: list[list[str]] = []
    for line in output.splitlines():
        if line.startswith(_TRACEBACK):
            break
        match = _RECORD.match(line)
        if match:
            records.append([match.group(1), line[match.end() :]])
        elif records and not line.startswith("** Logging output"):
            records[-1][1] += "\n" + line
    messages = []
    for level, text in records:
        if level in ("WARNING", "ERROR", "CRITICAL"):
            messages += [part.strip() for part in text.split(_SEPARATOR) if part.strip() and part.strip() != "FAILED"]
    return messages


def _show(value: object) -> str:
    return repr(value) if isinstance(value, str) else json.dumps(value)


def _rules_problem(facts: LogFacts, ruleset: str) -> str | None:
    """Why the ruleset cannot check this benchmark at all (mlperf-logging has no rules for it), or None."""
    benchmark = facts.values.get("submission_benchmark")
    if not isinstance(benchmark, str) or not benchmark:
        return None
    rules = resources.files("mlperf_logging.compliance_checker") / f"{USAGE}_{ruleset}"
    if not rules.is_dir():
        return f"mlperf-logging {version('mlperf-logging')} has no {USAGE} ruleset {ruleset}"
    division = facts.values.get("submission_division")
    division = division if division in ("closed", "open") else "closed"
    if (rules / f"{division}_{benchmark}.yaml").is_file():
        return None
    from mlperf_logging import benchmark_meta

    rounds = [
        f"{short}.0"
        for short, benchmarks in benchmark_meta._ALL_ALLOWED_BENCHMARKS.get(USAGE, {}).items()
        if benchmark in benchmarks and (resources.files("mlperf_logging.compliance_checker") / f"{USAGE}_{short}.0").is_dir()
    ]
    part_of = f"its rounds: {', '.join(rounds)}" if rounds else "it is in no round mlperf-logging knows"
    rules_file = f"{USAGE}_{ruleset}/{division}_{benchmark}.yaml"
    return f"{ruleset} has no rules for {benchmark} (mlperf-logging {version('mlperf-logging')} has no {rules_file}; {part_of})"


def _field_problems(facts: LogFacts) -> list[str]:
    problems = []
    for name in _FIELDS:
        lines = facts.missing.get(name, [])
        if not lines:
            continue
        why = " (the checker needs it to order events)" if name == "time_ms" else " (the checker reads it from every line)"
        if len(lines) == facts.mllog_lines:
            problems.append(f"no {name} on any :::MLLOG line{why}")
        else:
            problems.append(f"{len(lines)} of {facts.mllog_lines} :::MLLOG lines have no {name} (first: line {lines[0]}){why}")
    if facts.not_json:
        problems.append(f"{len(facts.not_json)} :::MLLOG lines are not a JSON object (first: line {facts.not_json[0]})")
    return problems


def _check_problem(message: str, ruleset: str) -> str:
    """A failed CHECK of one key as ``eval_samples is 256, 6.1.0 requires 251``."""
    lines = message.splitlines()
    key = re.match(r"CHECK for '([^']+)'", lines[0]).group(1)
    test = next((line[len("failed test:") :].strip() for line in lines if line.startswith("failed test:")), "")
    record = mllog_record(lines[1]) if len(lines) > 1 else None
    shown = _show(record["value"]) if record is not None and "value" in record else "?"
    match = re.fullmatch(r"v\['value'\]\s*(==|<=|>=|<|>|!=)\s*(.+)", test)
    if match:
        op, wanted = match.groups()
        return f"{key} is {shown}, {ruleset} requires {wanted}" if op == "==" else f"{key} is {shown}, {ruleset} requires {op} {wanted}"
    match = re.fullmatch(r"v\['value'\]\s+in\s+(.+)", test)
    if match:
        return f"{key} is {shown}, {ruleset} requires one of {match.group(1)}"
    for pattern, words in RULE_WORDING:
        match = pattern.fullmatch(test)
        if match:
            return f"{key} is {shown}, {ruleset} requires {words.format(*match.groups())}"
    return f"{key} ({shown}) fails the {ruleset} rule: {test}"


RULE_WORDING: tuple[tuple[re.Pattern, str], ...] = (
    (
        re.compile(r"s\.get\('lr_min'\) is not None and s\['lr_min'\].*<= v\['value'\] <= s\['lr_max'\].*"),
        "a value within the learning-rate band its rules give for the logged global_batch_size",
    ),
    (re.compile(r"is_integer\(v\['value'\]\) and v\['value'\] > 0"), "a positive integer"),
    (re.compile(r"is_integer\(v\['value'\]\) and v\['value'\] >= (\S+)"), "an integer >= {}"),
    (re.compile(r"\(?v\['value'\] <= ([^)\s]+)\)? and v\['value'\] > 0(?:\.0)?"), "a value in (0, {}]"),
    (re.compile(r"v\['value'\] == (.+?) - s\['(\w+)'\]"), "{} less the logged {}"),
)
"""Rule tests of mlperf-logging's YAML that are not a plain comparison, and what they require in words (``{}``: the
test's groups); a test no pattern knows is shown as written."""


@dataclass(frozen=True)
class _Said:
    """One message of the checker with what its meaning may depend on."""

    message: str
    facts: LogFacts
    ruleset: str
    rules: str | None
    """The problem with the log's rules (benchmark, round), already said; the messages it explains are not repeated."""


MISSING, PROBLEM = "missing", "problem"
Meaning = Callable[[re.Match, _Said], "tuple[str, str] | None"]
"""What a message means: (MISSING, key), (PROBLEM, words), or None when it is said otherwise."""


def _failed_rule(found: re.Match, said: _Said) -> tuple[str, str]:
    detail = " ".join(line.strip() for line in said.message.splitlines()[1:3])
    return PROBLEM, f"a {said.ruleset} rule could not be evaluated: {detail}"


CHECKER_WORDING: tuple[tuple[re.Pattern, Meaning], ...] = (
    # a required key never logged (run_stop is said on its own, from the log)
    (
        re.compile(r"Required (?:EXACTLY_ONE|AT_LEAST_ONE|AT_LEAST\(\d+\)) occurrence of '([^']+)' but found 0"),
        lambda found, said: None if found[1] == "run_stop" else (MISSING, found[1]),
    ),
    (re.compile(r"Required AT_LEAST_ONE occurrence of (.+)"), lambda found, said: (MISSING, found[1].replace("'", ""))),
    (
        re.compile(r"Required EXACTLY_ONE occurrence of '([^']+)' but found (\d+)(.*)"),
        lambda found, said: (PROBLEM, f"{found[1]} logged {found[2]} times, exactly once required{found[3]}"),
    ),
    # a rule's check failed: the rule in words (a wrong submission_benchmark is said by the rules problem)
    (
        re.compile(r"CHECK for '.*"),
        lambda found, said: (
            None if said.rules and found[0].startswith("CHECK for 'submission_benchmark'") else (PROBLEM, _check_problem(said.message, said.ruleset))
        ),
    ),
    (re.compile(re.escape(TARGET_CHECK) + r".*"), lambda found, said: (PROBLEM, f"no eval_accuracy met the target: {found[0].split(':', 1)[-1].strip()}")),
    (
        re.compile(r"Could not find config file:(.*)"),
        lambda found, said: None if said.rules else (PROBLEM, f"mlperf-logging has no rules file {Path(found[1].strip()).name} for {said.ruleset}"),
    ),
    (
        re.compile(r"Log lines had parsing errors\."),
        lambda found, said: None if said.facts.not_json or said.facts.missing else (PROBLEM, "some :::MLLOG lines could not be parsed"),
    ),
    (re.compile(r"No log lines detected"), lambda found, said: (PROBLEM, "the checker found no usable :::MLLOG lines") if said.facts.mllog_lines else None),
    (re.compile(r"failed test:(.*)"), lambda found, said: (PROBLEM, f"end-of-log check failed: {found[1].strip()}")),
    (re.compile(r"Failed executing.*"), _failed_rule),
    # the checker's echo of a line it could not parse: the parse problem is said from the log itself
    (re.compile(r"(?:Found parsing errors|\^\^).*"), lambda found, said: None),
)
"""The official checker's wording, one pattern per kind of message (matched on its first line, first match wins), and
what it means in a few words: a key for the ``missing:`` list, a problem line, or nothing (said otherwise). A message no
pattern knows is shown as the checker wrote it."""


def explain(messages: list[str], facts: LogFacts, ruleset: str, crash: str | None = None) -> list[str]:
    """What is missing or wrong in the log, a few words each, from the checker's messages and the log itself."""
    problems: list[str] = []
    if facts.unreadable:
        return [f"cannot read the log: {facts.unreadable}"]
    if facts.mllog_lines == 0:
        problems.append("no :::MLLOG lines (not an MLPerf log)")
    problems += _field_problems(facts)
    rules = _rules_problem(facts, ruleset)
    if rules:
        problems.append(rules)
    if facts.mllog_lines and not facts.run_stops:
        problems.append("run_stop is missing: the run ended without logging one")
    missing: list[str] = []
    for message in messages:
        first = message.strip().splitlines()[0] if message.strip() else ""
        if not first or _is_checker_warning(first):
            continue
        said = _Said(message, facts, ruleset, rules)
        for pattern, meaning in CHECKER_WORDING:
            found = pattern.fullmatch(first)
            if found:
                meant = meaning(found, said)
                if meant is not None:
                    kind, words = meant
                    (missing if kind == MISSING else problems).append(words)
                break
        else:
            problems.append(first)
    if missing:
        problems.append("missing: " + ", ".join(dict.fromkeys(missing)))
    if crash and not (rules and crash.startswith("FileNotFoundError")):  # a missing rules file is said above
        problems.append(f"the official checker crashed: {crash}")
    return list(dict.fromkeys(problems))


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes ("" when it cannot be read)."""
    from mlperf_wf.acquire.verify import hash_file

    try:
        return hash_file(Path(path), {"sha256": hashlib.sha256()})["sha256"].hexdigest()
    except OSError:
        return ""


def check(
    result_file: Path, ruleset: str, log_output: Path | None = None, declared: dict[str, str] | None = None, identity: RunIdentity | None = None
) -> ComplianceResult:
    """Run the official checker (closed/open is read from the log itself); its crashes become a failed verdict.

    ``declared``: the tiny tier's ``open_rules_not_met`` (key -> why), or None; see the module docstring.
    ``identity``: the run the log must be (benchmark, division, seed, the bytes its job wrote); a log that is
    another's fails whatever the checker says. The verdict records the sha256 of the bytes checked."""
    sha256 = file_sha256(result_file)
    verdict = _check(result_file, ruleset, log_output, declared)
    verdict.sha256 = sha256
    facts = read_facts(result_file)
    mismatch = identity.problems(facts, sha256) if identity is not None else []
    mismatch += duration_problems(facts.times.get("run_start"), facts.times.get("run_stop"))
    if file_sha256(result_file) != sha256:
        mismatch.append("the log changed while it was being checked")
    if mismatch:
        verdict.verdict = Verdict.FAILED
        verdict.problems = [*mismatch, *verdict.problems]
    return verdict


def _check(result_file: Path, ruleset: str, log_output: Path | None, declared: dict[str, str] | None) -> ComplianceResult:
    checker = f"mlperf_logging.compliance_checker {version('mlperf-logging')}"
    command = [sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", USAGE, "--ruleset", ruleset]
    try:
        with tempfile.TemporaryDirectory() as scratch:
            checker_log = log_output or Path(scratch) / "compliance_checker.log"
            proc = subprocess.run([*command, "--log_output", str(checker_log), str(result_file)], capture_output=True, text=True, check=False)
        returncode, output, crash = proc.returncode, proc.stderr + "\n" + proc.stdout, None
    except OSError as err:  # the checker could not be started at all
        returncode, output, crash = -1, "", f"{type(err).__name__}: {err}"
    crash = crash or _crash(output)
    messages = _checker_messages(output)
    if returncode == 0 and crash is None:
        return ComplianceResult(str(result_file), ruleset, Verdict.PASSED, returncode, messages, checker)
    facts = read_facts(result_file)
    problems = explain(messages, facts, ruleset, crash)
    if crash:
        messages = [*messages, *problems]
    elif not messages:
        said = [line for line in output.splitlines() if line.strip() and not line.startswith(("INFO", "** Logging output"))]
        problems.append(f"the checker failed (exit code {returncode})" + (f": {said[-1].strip()}" if said else ""))
        messages = said[-5:]
    verdict = classify(False, messages, facts.run_stops, declared) if crash is None else Verdict.FAILED
    if verdict == Verdict.PASSED_EXCEPT_DECLARED:
        problems = declared_problems(messages, declared or {}, ruleset)
    return ComplianceResult(str(result_file), ruleset, verdict, returncode, messages, checker, problems)


def write(result: ComplianceResult, out: Path) -> None:
    """Write the verdict as JSON."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(asdict(result), indent=2))


def read(path: Path) -> ComplianceResult:
    """Read a verdict written by :func:`write` (ValueError for a verdict that is none of :class:`Verdict`)."""
    recorded = ComplianceResult(**json.loads(path.read_text()))
    recorded.verdict = Verdict(recorded.verdict)
    return recorded


def check_run(
    result: Path | str | None,
    ruleset: str,
    out: Path,
    benchmark: str | None = None,
    scale: str | None = None,
    seed: int | None = None,
    division: str | None = None,
    provenance: Path | None = None,
) -> ComplianceResult:
    """Run the official compliance checker on ``result``; fail unless it passed (or only missed the target, or
    failed only on the open rules the benchmark's tiny tier declares it does not meet: ``passed_except_declared``).
    With ``seed``, ``division`` or ``provenance`` (which need ``benchmark``), the log must be that run's.

    The verdict is written to ``out`` whatever happens, also when the checker itself crashed on the log.
    """
    from mlperf_wf.config import registry

    if result is None:
        raise UserError("compliance: give the result file (RESULT or --result RESULT)")
    result = Path(result)
    identity = None
    if seed is not None or division is not None or provenance is not None:
        if benchmark is None:
            raise UserError("compliance: --seed, --division and --provenance need --benchmark")
        written = json.loads(provenance.read_text()).get("result_sha256") if provenance is not None else None
        identity = RunIdentity(registry.load_benchmark(benchmark).submission_benchmark, division, seed, written)
    verdict = check(result, ruleset, declared=registry.declared_open_rules(benchmark, scale), identity=identity)
    write(verdict, out)
    if verdict.verdict == Verdict.FAILED:
        detail = "; ".join(verdict.problems or verdict.messages[:3]) or f"checker exit code {verdict.returncode}"
        raise UserError(f"{result}: compliance check ({ruleset}) FAILED: {detail}")
    return verdict
