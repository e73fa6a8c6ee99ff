"""Benchmark: a full-scale dry run of every benchmark's DAG against Snakemake's own start-up.

Each run is a fresh `snakemake -n` process in a scratch working directory with the repository's config (interpreter and plugin
start-up included). The baseline is Snakemake dry-running a one-rule Snakefile in the same run, so
the ratio is what this workflow's Snakefile, registry and plans add to every invocation (and to
every cluster job, which parses the Snakefile again).

    python bench/dry_run.py [BENCH ...] [--repeat 3]
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
BASELINE_SNAKEFILE = 'rule all:\n    output: "done.txt"\n    shell: "touch {output}"\n'


def timed(argv: list[str], workdir: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=workdir, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="*", default=["llama2_70b_lora", "rgat"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "1", "-n"]
    with tempfile.TemporaryDirectory() as scratch:
        baseline_dir = Path(scratch) / "baseline"
        baseline_dir.mkdir()
        (baseline_dir / "Snakefile").write_text(BASELINE_SNAKEFILE)
        baseline = statistics.median(timed(snakemake, baseline_dir) for _ in range(args.repeat))
        print(f"baseline  {'snakemake -n, one-rule Snakefile:':<40} {baseline:6.2f} s (median of {args.repeat})")
        for name in args.benchmarks:
            workdir = Path(scratch) / name
            shutil.copytree(ROOT / "config", workdir / "config")
            argv = [*snakemake, "-s", str(ROOT / "workflow/Snakefile"), f"results/{name}/report.json", "--config", "scale=full"]
            ours = statistics.median(timed(argv, workdir) for _ in range(args.repeat))
            print(f"ours      {name + ' full-scale dry run:':<40} {ours:6.2f} s  ({ours / baseline:.1f}x baseline)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
