"""``mlperf-wf job run SPEC.json``: one job of the workflow, from its spec (``mlperf_wf.run.job_spec``).

The train rule writes its run's spec (``BenchmarkPlan.job_spec``) and runs it with this command. The job runs in bash with
errexit, nounset and pipefail (as Snakemake runs a rule's shell): the campaign gate, the prepared tree's check, then
the job's line (``mlperf_wf.run.launchers.job_line``: the preflight, the emptied run folder, the node check, the
page-cache drop, the launch, the scratch removal, the power sampler, the MLLOG merge) in one group, and, once that
succeeded, the provenance record. The command's exit status is the job's: a failed launch fails it with the launch's
status, a refusal stays status 2, a job ended by a signal is 128 + the signal's number, as bash reports it.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlperf_wf.run.job_spec import JobSpec

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""Signals passed on to the job's shell: a scheduler that ends this command ends the job it runs."""


def script(spec: JobSpec) -> str:
    """The bash script of ``spec``: :func:`mlperf_wf.run.launchers.rule_line`, then the provenance record."""
    from mlperf_wf.run import launchers  # the CLI registers this command: every other command starts without it

    lines = ["set -euo pipefail", launchers.rule_line(spec)]
    recorded = spec.steps.provenance
    if recorded is not None:
        image = spec.image.reference if spec.image is not None else ""
        argv = ["mlperf-wf", "provenance", "--out", recorded.out, "--result", recorded.result, "--consumed", *recorded.consumed]
        argv += ["--scale", recorded.scale, "--launcher", spec.launcher, f"--image={image}", f"--command={launchers.job_line(spec)}"]
        argv += [f"--node-checks={recorded.node_checks}", f"--config={recorded.config}"]
        lines.append(shlex.join(argv))
    return "; ".join(lines)


def run(path: Path) -> int:
    """Run the spec in ``path``; the job's exit status (a bad spec: one ``ConfigError`` line)."""
    from mlperf_wf.run.job_spec import JobSpec

    spec = JobSpec.read(path)
    job = subprocess.Popen(["bash", "-c", script(spec)])
    previous = {number: signal.signal(number, lambda received, _frame: job.send_signal(received)) for number in FORWARDED_SIGNALS}
    try:
        status = job.wait()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 128 - status if status < 0 else status  # bash itself ended by a signal: the shell's own convention


def add_arguments(job: argparse.ArgumentParser) -> None:
    """``job run SPEC``."""
    actions = job.add_subparsers(dest="job_action", required=True, metavar="ACTION")
    spec = actions.add_parser(
        "run",
        help="the campaign gate, the prepared tree's check, the preflight, an emptied run folder, the node check, the page-cache "
        "drop, the launch, the MLLOG merge and the provenance record; exits with the job's status",
    )
    spec.add_argument("spec", type=Path, help="the job's spec (JSON, BenchmarkPlan.job_spec)")
