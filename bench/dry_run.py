"""Benchmark: the full-scale dry run of every benchmark's DAG against a bare Snakefile with as many jobs.

Each run is a fresh `snakemake -n` process in a scratch working directory with the repository's config (interpreter and
plugin start-up included). The baseline, timed in the same run, is Snakemake dry-running a bare Snakefile of one rule
whose wildcard makes as many jobs as the workflow's DAG holds (its `Job stats` total), so the ratio is what this
workflow's Snakefile, registry and plans add to every invocation (and to every cluster job, which parses the Snakefile
again).

    python bench/dry_run.py [BENCH ...] [--repeat 3]     (default: all benchmarks in one DAG)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from mlperf_wf.config import registry  # noqa: E402

BARE_SNAKEFILE = 'rule all:\n    input: expand("out/{{i}}.txt", i=range({jobs}))\n\nrule job:\n    output: "out/{{i}}.txt"\n    shell: "touch {{output}}"\n'
"""One rule, ``jobs`` jobs (plus ``all``)."""


def timed(argv: list[str], workdir: Path) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=workdir, check=True, capture_output=True, text=True)
    return time.perf_counter() - started, proc.stdout


def job_total(output: str) -> int:
    """The ``total`` row of a dry run's job stats."""
    return next(int(line.split()[1]) for line in output.splitlines() if line.startswith("total "))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="*", default=registry.benchmark_names())
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "1", "-n"]
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch) / "workflow"
        shutil.copytree(ROOT / "config", workdir / "config")
        targets = [f"results/{name}/report.json" for name in args.benchmarks]
        argv = [*snakemake, "-s", str(ROOT / "workflow/Snakefile"), *targets, "--config", "scale=full", f"benchmarks=[{','.join(args.benchmarks)}]"]
        first = timed(argv, workdir)
        jobs = job_total(first[1])
        bare = Path(scratch) / "bare"
        bare.mkdir()
        (bare / "Snakefile").write_text(BARE_SNAKEFILE.format(jobs=jobs - 1))
        # interleaved, one of each per round: this machine's speed drifts over a minute, and both sides share it
        ours_times, baseline_times = [], []
        for _ in range(args.repeat):
            ours_times.append(timed(argv, workdir)[0])
            baseline_times.append(timed(snakemake, bare)[0])
        ours, baseline = statistics.median(ours_times), statistics.median(baseline_times)
        ratio = statistics.median(o / b for o, b in zip(ours_times, baseline_times, strict=True))
        print(f"baseline  bare Snakefile, {jobs} jobs, snakemake -n:           {baseline:6.2f} s (median of {args.repeat})")
        print(f"ours      full-scale dry run of {len(args.benchmarks)} benchmarks, {jobs} jobs: {ours:6.2f} s  ({ours / baseline:.2f}x baseline)")
        print(f"ratio     median of the {args.repeat} rounds' own ratios (each round: ours, then the baseline): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
