"""Runs the official mlperf-logging compliance checker on one result file.

The checker is run as its own CLI (``python -m mlperf_logging.compliance_checker``)
so the verdict is exactly the one a submitter gets. A run that is compliant in
every respect except that it never reached the target (``run_stop`` status
``aborted``) is recorded as ``non_converged``: the MLPerf scoring rules let one
such run be dropped as the slowest, so it must reach the report rather than
stop the workflow. Any other failure is ``failed``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path

from mlperf_logging.compliance_checker import mlp_parser


@dataclass
class ComplianceResult:
    """The checker's verdict on one result file."""

    result_file: str
    ruleset: str
    verdict: str
    """passed, non_converged (compliant, target not reached) or failed."""
    returncode: int
    messages: list[str]
    checker: str


def run_stop_status(result_file: Path, ruleset: str) -> str | None:
    """``status`` of the run_stop event, or None when there is none."""
    loglines, _ = mlp_parser.parse_file(str(result_file), ruleset=ruleset)
    for line in loglines:
        if line.key == "run_stop":
            return (line.value.get("metadata") or {}).get("status")
    return None


def _only_target_missed(messages: list[str]) -> bool:
    """Whether the checker's only complaint is that no eval_accuracy met the target."""
    complaints = [m for m in messages if m.strip() != "ERROR - FAILED"]
    return bool(complaints) and all("Failed checks for eval_accuracy" in m for m in complaints)


def check(result_file: Path, ruleset: str, log_output: Path | None = None) -> ComplianceResult:
    """Run the official checker (closed/open is read from the log itself)."""
    with tempfile.TemporaryDirectory() as scratch:
        checker_log = log_output or Path(scratch) / "compliance_checker.log"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "mlperf_logging.compliance_checker",
                "--usage",
                "training",
                "--ruleset",
                ruleset,
                "--log_output",
                str(checker_log),
                str(result_file),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    messages = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith(("ERROR", "WARNING"))]
    if proc.returncode == 0:
        verdict = "passed"
    elif run_stop_status(result_file, ruleset) == "aborted" and _only_target_missed(messages):
        verdict = "non_converged"
    else:
        verdict = "failed"
    return ComplianceResult(
        result_file=str(result_file),
        ruleset=ruleset,
        verdict=verdict,
        returncode=proc.returncode,
        messages=messages,
        checker=f"mlperf_logging.compliance_checker {version('mlperf-logging')}",
    )


def write(result: ComplianceResult, out: Path) -> None:
    """Write the verdict as JSON."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(asdict(result), indent=2))


def read(path: Path) -> ComplianceResult:
    """Read a verdict written by :func:`write`."""
    return ComplianceResult(**json.loads(path.read_text()))
