"""Benchmark: how long `mlperf-wf status` and `mlperf-wf check` take on an empty checkout (the config only), against
`snakemake --version` (the named baseline, timed in the same run: the least a Snakemake invocation costs).

Both read every benchmark and dataset definition; neither may import torch, transformers, scipy or pandas
(tests/workflow/test_startup.py asserts that). The goal: under 1 s each on this project's 2-core machine.

Also the commands hundreds of a campaign's jobs run (`check-prepared`, `fresh-run-folder`), against `python -c pass`
(the least any Python process costs): they read files only, and load no catalog or config library.

    python bench/startup.py [--repeat 5]
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


def seconds(argv: list[str], cwd: Path, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        checkout = Path(scratch)
        shutil.copytree(ROOT / "config", checkout / "config")
        subprocess.run([sys.executable, "-m", "mlperf_wf", "check"], cwd=checkout, capture_output=True, check=False)  # warm the file cache
        baseline = seconds([sys.executable, "-m", "snakemake", "--version"], checkout, args.repeat)
        print(f"baseline  snakemake --version:              {baseline:5.2f} s (median of {args.repeat})")
        for command in ("status", "check"):
            took = seconds([sys.executable, "-m", "mlperf_wf", command], checkout, args.repeat)
            print(f"ours      mlperf-wf {command:6s} (empty checkout): {took:5.2f} s  ({took / baseline:.2f}x baseline; goal < 1 s)")
        (checkout / "prepared").mkdir()
        (checkout / "prepared" / "part-0").write_bytes(b"tiny")
        (checkout / "runs" / "0").mkdir(parents=True)
        python = seconds([sys.executable, "-c", "pass"], checkout, args.repeat)
        print(f"baseline  python -c pass:                   {python:5.2f} s (median of {args.repeat})")
        for command, operand in (("check-prepared", "prepared"), ("fresh-run-folder", "runs/0")):
            took = seconds([sys.executable, "-m", "mlperf_wf", command, operand], checkout, args.repeat)
            print(f"ours      mlperf-wf {command:16s}:      {took:5.2f} s  ({took / python:.2f}x baseline)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
