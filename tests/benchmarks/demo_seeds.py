"""The demo's seeds of every benchmark's tiny tier, and what each needs to reach the real target (a tiny
recipe whose slowest demo seed converges only under one CPU's rounding fails ``make demo`` on the next machine).

``tests/benchmarks/<name>/demo_seeds.json`` records, beside each benchmark's tests, the evaluations each demo seed needed under
:data:`OTHER_ROUNDING` (``python -m tests.benchmarks.demo_seeds <benchmark>`` measures and records them);
``test_demo_seeds.py`` runs the slowest recorded seed of each again through the package's tiny trainer (``mlperf-wf
train``, the command the workflow's train job runs) in a folder where Snakemake made its inputs."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from mlperf_wf.config import mlperf_rules, registry
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.plan.plan import Plan
from tests.conftest import ROOT
from tests.workflow.test_workflow import new_workdir, snakemake_argv, snakemake_env

OTHER_ROUNDING = {"ATEN_CPU_CAPABILITY": "default"}
"""torch's unvectorised CPU kernels: the same arithmetic rounded otherwise, as another CPU's kernels round it. A tiny
recipe that converges only under this machine's rounding fails on the next machine (seed 1237 of retinanet
once reached mAP 0.34 on one machine and stayed below 0.20 on another), so its slowest demo seeds are also run so."""

RECORD_FILE = "demo_seeds.json"
"""A benchmark's record, in its tests' folder (:func:`record_file`): ``evaluations`` (seed -> the evaluations it needed
to reach the target under :data:`OTHER_ROUNDING`), ``seconds`` (seed -> wall seconds of its run, where measured with
this module) and ``measured_on`` (the machine)."""


def record_file(name: str) -> Path:
    """``tests/benchmarks/<name>/demo_seeds.json``."""
    return Path(__file__).parent / name / RECORD_FILE


SPARE_FRACTION = 0.5
"""How many more evaluations than recorded a seed may need (a fraction of the recorded count, at least one more):
another CPU's BLAS still rounds its own way under :data:`OTHER_ROUNDING`, moving the evaluation that crosses the target
by one or two; a recipe that lost its margin needs many more, or never gets there within its budget."""


@dataclass(frozen=True)
class SeedConvergence:
    """One tiny run of a benchmark's train command at another seed."""

    seed: int
    accuracies: list[float]
    """Every ``eval_accuracy``, in order (stable_diffusion logs two an evaluation: FID and CLIP)."""
    evaluations: int
    """Evaluations run: the distinct points (samples or epoch) its ``eval_accuracy`` events name."""
    status: str
    """``run_stop``'s status (``success``: it reached the target within its budget)."""
    seconds: float
    """Wall seconds of the whole train command."""


def demo_seeds(name: str) -> list[int]:
    """The seeds ``make demo BENCH=<name>`` runs: the rules' run count from the config's ``seed_base``."""
    settings = WorkflowConfig()
    return [settings.seed_base + i for i in range(mlperf_rules.required_runs(registry.load_benchmark(name).submission_benchmark))]


def allowed_evaluations(recorded: int) -> int:
    """The most evaluations a seed recorded at ``recorded`` may need before its margin counts as lost."""
    return recorded + max(1, math.ceil(recorded * SPARE_FRACTION))


def slowest_seed(record: dict[str, int]) -> int:
    """The recorded seed that needed the most evaluations (the first of them on a tie)."""
    return int(max(sorted(record, key=int), key=lambda seed: record[seed]))


def train_inputs(workdir: Path, name: str, cache: Path | None) -> Path:
    """``workdir``: a new checkout where Snakemake made everything ``name``'s tiny train job reads (nothing after it)."""
    if not (workdir / "config").is_dir():
        new_workdir(workdir)
    if cache:
        cache.mkdir(parents=True, exist_ok=True)
    argv = snakemake_argv(workdir, "--cores", "2", "--cache", "--omit-from", "train", "--config", f"benchmarks=[{name}]", "runs=1")
    proc = subprocess.run(argv, capture_output=True, text=True, env=snakemake_env(cache), check=False)
    assert proc.returncode == 0, f"{name}'s tiny inputs: {proc.stderr[-3000:]}"
    return workdir


def run_seed(workdir: Path, name: str, seed: int, env: dict[str, str] | None = None) -> SeedConvergence:
    """Run 0's train command of ``name`` in ``workdir`` (its inputs made: :func:`train_inputs`, or a finished
    campaign) at ``seed``, with ``env`` added, into ``demo-seeds/<name>/<seed>.txt``."""
    plan = Plan(WorkflowConfig(benchmarks=[name], runs=1), ROOT, workdir)
    command = shlex.split(plan.of(name).train_job(0).command)
    result = workdir / "demo-seeds" / name / f"{seed}.txt"  # beside the campaign's results, which other tests read
    result.parent.mkdir(parents=True, exist_ok=True)
    result.unlink(missing_ok=True)
    for flag, value in (("--seed", str(seed)), ("--result", str(result))):
        command[command.index(flag) + 1] = value
    started = time.monotonic()
    proc = subprocess.run(command, cwd=workdir, env={**snakemake_env(None), **(env or {})}, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, f"{name} seed {seed}: {proc.stderr[-2000:]}"
    events = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in result.read_text().splitlines() if ":::MLLOG " in line]
    results = [e for e in events if e["key"] == "eval_accuracy"]
    points = {json.dumps({k: v for k, v in e["metadata"].items() if k not in ("file", "lineno", "metric")}, sort_keys=True) for e in results}
    status = next(e for e in events if e["key"] == "run_stop")["metadata"]["status"]
    return SeedConvergence(seed, [e["value"] for e in results], len(points), status, seconds)


def recorded() -> dict[str, dict]:
    """Benchmark -> its record, for every benchmark whose tests' folder has one."""
    return {path.parent.name: json.loads(path.read_text()) for path in sorted(Path(__file__).parent.glob(f"*/{RECORD_FILE}"))}


def check_the_slowest_demo_seed(workdir: Path, name: str) -> SeedConvergence:
    """Run ``name``'s slowest recorded demo seed in ``workdir`` under :data:`OTHER_ROUNDING`; fail unless it reaches
    the target within its budget and within :func:`allowed_evaluations` of what it needed when recorded."""
    record = recorded()[name]["evaluations"]
    seed = slowest_seed(record)
    run = run_seed(workdir, name, seed, OTHER_ROUNDING)
    said = f"{name} seed {seed} under {OTHER_ROUNDING}"
    assert run.status == "success", f"{said}: {run.status} after {run.evaluations} evaluations {run.accuracies}"
    allowed = allowed_evaluations(record[str(seed)])
    assert run.evaluations <= allowed, (
        f"{said} needed {run.evaluations} evaluations {run.accuracies}; {record[str(seed)]} when recorded "
        f"({record_file(name)}), at most {allowed} allowed: its margin to the target shrank"
    )
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description="Measure and record the evaluations each demo seed of a benchmark needs under OTHER_ROUNDING.")
    parser.add_argument("benchmark")
    parser.add_argument("--workdir", type=Path, required=True, help="a folder for the benchmark's tiny inputs (kept, reused)")
    parser.add_argument("--where", required=True, help="the machine measured on, e.g. '2-vCPU Intel Xeon (AVX-512) VM'")
    args = parser.parse_args()
    train_inputs(args.workdir, args.benchmark, args.workdir / "output-cache")
    evaluations, seconds = {}, {}
    for seed in demo_seeds(args.benchmark):
        run = run_seed(args.workdir, args.benchmark, seed, OTHER_ROUNDING)
        print(json.dumps({"benchmark": args.benchmark, **run.__dict__}), flush=True)
        if run.status != "success":
            raise SystemExit(f"{args.benchmark} seed {seed} under {OTHER_ROUNDING}: {run.status} after {run.evaluations} evaluations {run.accuracies}")
        evaluations[str(seed)], seconds[str(seed)] = run.evaluations, round(run.seconds)
    entry = {"evaluations": evaluations, "seconds": seconds, "measured_on": args.where}
    record_file(args.benchmark).write_text(json.dumps(entry, indent=2) + "\n")


if __name__ == "__main__":
    main()
