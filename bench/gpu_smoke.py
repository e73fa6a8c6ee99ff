"""The smoke test for the day an NVIDIA GPU is at hand: one command, at most ``--budget-s`` seconds (600), one report.

    python bench/gpu_smoke.py --out gpu-smoke      # or: make gpu-smoke

On a machine with one NVIDIA GPU it runs, one after the other, while the power sampler (``mlperf_wf.run.power``, the
one beside every run) reads the real ``nvidia-smi`` and a second reader polls the GPU's memory and utilisation:

1. ``tiny``: the tiny tier of ``--benchmarks`` (one run each, the whole chain through Snakemake) with their trainers on
   CUDA (``MLPERF_WF_TINY_DEVICE``, ``mlperf_wf.run.harness``);
2. ``reference``: the llama2_70b_lora reference (mlcommons/training, ``.venv-reference``) at toy size through the
   full-scale plan, as ``tests/run/test_reference_in_the_loop.py`` runs it with the local launcher (its accelerate
   config uses the GPU where there is one);
3. ``power``: the sampler's readings over both, with each step's mean and peak watts.

It writes ``report.md`` and ``report.json`` in ``--out``: per step ok/failed/skipped, seconds, the GPU's peak memory and
utilisation, the verdicts and watts. Without an NVIDIA GPU (no ``nvidia-smi``, none listed, or a torch that sees no
CUDA device) it writes the reason as the report and exits 0; ``--device cpu`` runs the same pieces on the CPU
(with ``--smi`` and ``--gpu-command`` naming stand-ins where there is no driver).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BENCHMARKS = ("llama2_70b_lora", "llama31_8b", "gpt_oss_20b")
"""Tiny trainers that run on CUDA (their definitions' ``tiny.runs_on_cuda``, ``mlperf_wf.run.harness.device_trainers``):
the LoRA fine-tuning and two causal-LM pretrainings."""
BUDGET_S = 600
SHARE = {"tiny": 0.5, "reference": 1.0}
"""The most of the budget each step may take (the reference has what the tiny tier leaves)."""
FIRST_READING_S = 20
"""How long the steps wait for the power sampler's first reading."""
REFERENCE_TEST = "tests/run/test_reference_in_the_loop.py::test_the_reference_runs_through_the_local_launcher"


@dataclass
class Step:
    """One step of the smoke test."""

    name: str
    status: str = "skipped"
    """ok, failed or skipped."""
    seconds: float = 0.0
    detail: str = ""
    figures: dict = field(default_factory=dict)
    started: float = 0.0
    ended: float = 0.0


def gpu_missing(device: str, smi: str = "nvidia-smi") -> str | None:
    """Why this machine cannot run the smoke test on ``device`` (None when it can)."""
    binary = shutil.which(smi)
    if binary is None:
        return f"no {smi} on PATH: no NVIDIA driver on this machine"
    listed = subprocess.run([binary, "--query-gpu=name,memory.total", "--format=csv,noheader"], capture_output=True, text=True, timeout=30, check=False)
    if listed.returncode != 0:
        return f"{smi} failed: {(listed.stderr.strip().splitlines() or [f'exit status {listed.returncode}'])[-1]}"
    if not listed.stdout.strip():
        return f"{smi} lists no GPU"
    if device != "cpu":
        import torch

        if not torch.cuda.is_available():
            return f"torch {torch.__version__} (CUDA build {torch.version.cuda}) sees no CUDA device"
    return None


class GpuPoller:
    """``smi``'s memory used (MiB) and utilisation (%) of every GPU, once a second, in a thread."""

    def __init__(self, smi: str = "nvidia-smi", interval_s: float = 1.0) -> None:
        self.argv = [smi, "--query-gpu=memory.used,utilization.gpu", "--format=csv,noheader,nounits"]
        self.interval_s = interval_s
        self.samples: list[tuple[float, float, float]] = []
        """(time, MiB used, % busy), the largest over the GPUs."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            answer = subprocess.run(self.argv, capture_output=True, text=True, timeout=30, check=False)
            rows = [[float(v) for v in line.split(",")] for line in answer.stdout.splitlines() if line.count(",") == 1]
            if rows:
                self.samples.append((time.time(), max(r[0] for r in rows), max(r[1] for r in rows)))
            self._stop.wait(self.interval_s)

    def start(self) -> GpuPoller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def peaks(self, start: float, end: float) -> dict:
        inside = [s for s in self.samples if start <= s[0] <= end]
        if not inside:
            return {}
        return {"gpu_memory_peak_mib": max(s[1] for s in inside), "gpu_utilisation_peak_percent": max(s[2] for s in inside)}


def power_readings(folder: Path) -> list[tuple[float, float]]:
    """(seconds since the epoch, watts) of every ``power_reading`` the sampler wrote under ``folder``."""
    found = []
    for path in sorted(folder.glob("node_*.txt")):
        for line in path.read_text().splitlines():
            if ":::MLLOG " not in line:
                continue
            try:
                record = json.loads(line.split(":::MLLOG ", 1)[1])
            except ValueError:  # the line being written
                continue
            if record.get("key") == "power_reading":
                found.append((record["time_ms"] / 1000, float(record["value"])))
    return found


def watts_of(readings: list[tuple[float, float]], start: float, end: float) -> dict:
    inside = [w for t, w in readings if start <= t <= end]
    return {"power_readings": len(inside), "watts_mean": sum(inside) / len(inside), "watts_peak": max(inside)} if inside else {"power_readings": 0}


def snakemake_env(device: str) -> dict[str, str]:
    env = {**os.environ, "MLPERF_WF_TINY_DEVICE": device}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env


def tiny_argv(workdir: Path, benchmarks: list[str], cores: int) -> list[str]:
    """The tiny chain of ``benchmarks``, one run each, through the workflow (as ``make demo`` runs it)."""
    config = [f"benchmarks=[{','.join(benchmarks)}]", "runs=1"]
    return [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"), "-d", str(workdir), "--cores", str(cores), "--config", *config]


def run_tiny(out: Path, benchmarks: list[str], device: str, cores: int, timeout: float) -> Step:
    step = Step("tiny", started=time.time())
    workdir = out / "tiny"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    shutil.copytree(ROOT / "config", workdir / "config")
    try:
        proc = subprocess.run(tiny_argv(workdir, benchmarks, cores), capture_output=True, text=True, env=snakemake_env(device), timeout=timeout, check=False)
        (out / "tiny.log").write_text(proc.stdout + proc.stderr)
        step.status = "ok" if proc.returncode == 0 else "failed"
        step.detail = "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["no output"])[-1]
    except subprocess.TimeoutExpired:
        step.status, step.detail = "failed", f"not done in {timeout:.0f} s"
    for name in benchmarks:
        report = workdir / "results" / "tiny" / name / "report.json"
        if report.is_file():
            made = json.loads(report.read_text())
            step.figures[name] = {"compliance": [r["compliance"] for r in made["runs"]], "minutes": [r.get("minutes") for r in made["runs"]]}
        else:
            logs = sorted((workdir / "logs" / "tiny" / "train" / name).glob("*.log"))
            step.figures[name] = {"compliance": None, "last_line": (logs[-1].read_text().strip().splitlines() or [""])[-1][-300:] if logs else None}
    return step


def run_reference(out: Path, timeout: float) -> Step:
    step = Step("reference", started=time.time())
    env = {**os.environ, "MLPERF_WF_REQUIRE_REFERENCE": "1"}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--basetemp", str(out / "reference"), REFERENCE_TEST]
    try:
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, timeout=timeout, check=False)
        (out / "reference.log").write_text(proc.stdout + proc.stderr)
        step.status = "ok" if proc.returncode == 0 else "failed"
        step.detail = (proc.stdout.strip().splitlines() or ["no output"])[-1]
    except subprocess.TimeoutExpired:
        step.status, step.detail = "failed", f"not done in {timeout:.0f} s"
    return step


def render(steps: list[Step], header: dict) -> str:
    lines = ["# GPU smoke test", ""]
    lines += [f"- {key}: {value}" for key, value in header.items()]
    lines += ["", "| step | status | seconds | figures | detail |", "|---|---|---|---|---|"]
    for step in steps:
        figures = json.dumps(step.figures, sort_keys=True).replace("|", "\\|")
        lines.append(f"| {step.name} | {step.status} | {step.seconds:.1f} | {figures} | {step.detail.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def write_report(out: Path, steps: list[Step], header: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps({**header, "steps": [asdict(s) for s in steps]}, indent=2) + "\n")
    (out / "report.md").write_text(render(steps, header))


def smoke(
    out: Path,
    benchmarks: list[str],
    device: str = "cuda",
    budget_s: float = BUDGET_S,
    cores: int | None = None,
    smi: str = "nvidia-smi",
    gpu_command: str | None = None,
    steps_wanted: tuple[str, ...] = ("tiny", "reference"),
) -> tuple[int, list[Step], dict]:
    """Run the smoke test (see the module docstring); returns the exit status, the steps and the report's header."""
    from mlperf_wf.run import power

    begun = time.time()
    header: dict = {"device": device, "budget_s": budget_s, "benchmarks": ",".join(benchmarks)}
    missing = gpu_missing(device, smi)
    if missing:
        header["skipped"] = missing
        write_report(out, [], header)
        return 0, [], header
    listed = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"], capture_output=True, text=True, check=False)
    header["gpu"] = listed.stdout.strip().splitlines()[0] if listed.stdout.strip() else "?"
    raw = {"enabled": True, "interval_ms": 500, **({"gpu_command": gpu_command} if gpu_command else {})}
    config = power.PowerConfig.from_config(raw)
    header["power_command"] = config.gpu_command
    stop = threading.Event()
    summary: list[power.SampleSummary] = []
    sampler = threading.Thread(target=lambda: summary.append(power.sample(config, out / "power", 0, None, stop)), daemon=True)
    sampler.start()
    poller = GpuPoller(smi).start()
    first = time.time() + FIRST_READING_S  # each step sampled from its start
    while not power_readings(out / "power") and time.time() < first and sampler.is_alive():
        time.sleep(0.2)
    steps = []
    for name in ("tiny", "reference"):
        left = min(budget_s - (time.time() - begun) - 15, budget_s * SHARE[name])
        if name not in steps_wanted or left < 30:
            steps.append(Step(name, detail="not asked for" if name not in steps_wanted else "no time left in the budget"))
            continue
        step = run_tiny(out, benchmarks, device, cores or os.cpu_count() or 1, left) if name == "tiny" else run_reference(out, left)
        step.ended = time.time()
        step.seconds = step.ended - step.started
        step.figures.update(poller.peaks(step.started, step.ended))
        steps.append(step)
    stop.set()
    sampler.join(timeout=30)
    poller.stop()
    readings = power_readings(out / "power")
    measured = Step("power", status="ok" if readings else "failed", started=begun, ended=time.time())
    measured.seconds = measured.ended - begun
    measured.figures = {"all": watts_of(readings, begun, measured.ended)}
    measured.figures.update({s.name: watts_of(readings, s.started, s.ended) for s in steps if s.status != "skipped"})
    measured.detail = "; ".join(summary[0].problems) if summary and summary[0].problems else ""
    steps.append(measured)
    header["seconds"] = round(time.time() - begun, 1)
    write_report(out, steps, header)
    return (0 if all(s.status != "failed" for s in steps) else 1), steps, header


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu-smoke"), help="where report.md, report.json and the logs go")
    parser.add_argument("--benchmarks", default=",".join(DEFAULT_BENCHMARKS), help="tiny tiers to run, comma-separated")
    parser.add_argument("--device", default="cuda", help="where the tiny trainers compute (cuda, cuda:N; cpu runs the same pieces on the CPU)")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="seconds for the whole test (default 600)")
    parser.add_argument("--cores", type=int, help="Snakemake's --cores for the tiny tier (default: every core)")
    parser.add_argument("--smi", default="nvidia-smi", help="the nvidia-smi to list and poll the GPU with")
    parser.add_argument("--gpu-command", help="the power sampler's command (default: the sampler's own nvidia-smi query)")
    parser.add_argument("--steps", default="tiny,reference", help="which of tiny,reference to run (the power sampler always runs)")
    args = parser.parse_args(argv)
    benchmarks = [b for b in args.benchmarks.split(",") if b]
    code, steps, header = smoke(args.out, benchmarks, args.device, args.budget_s, args.cores, args.smi, args.gpu_command, tuple(args.steps.split(",")))
    if "skipped" in header:
        print(f"gpu-smoke: skipped: {header['skipped']} (report: {args.out / 'report.md'})")
        return code
    for step in steps:
        detail = f" {step.detail}" if step.detail else ""
        print(f"gpu-smoke: {step.name}: {step.status} in {step.seconds:.0f} s {json.dumps(step.figures, sort_keys=True)}{detail}")
    print(f"gpu-smoke: report {args.out / 'report.md'}, {args.out / 'report.json'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
