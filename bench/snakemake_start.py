"""What the pandas stand-in of the suite's start-up hook saves each Snakemake process the suite starts.

    python bench/snakemake_start.py [--repeat 5]

Snakemake loads every executor plugin at start-up, and the SLURM plugin imports pandas at its module's top for an
efficiency report no test turns on. ``tests/process_start/sitecustomize.py`` puts a stand-in for pandas in a Snakemake
process (``python -m snakemake`` or the ``snakemake`` script), which imports pandas when first used. Both sides here run
the hook; the baseline starts Snakemake from ``python -c`` (the hook sees no Snakemake command line, so pandas is
imported as Python does), ours as ``python -m snakemake``. Each case is run in fresh processes, interleaved; it prints
each side's CPU seconds (the median of ``--repeat``) and the baseline's over ours:

- ``snakemake --version``: the start-up alone;
- ``snakemake -n`` of the tiny campaign of llama2_70b_lora in a scratch folder: a start-up and a plan, as most of the
  suite's Snakemake processes are.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from child_cpu import child_cpu_seconds  # bench/ is the script's folder, first on sys.path
from gc_threshold import SNAKEMAKE as SNAKEMAKE_FROM_C

ROOT = Path(__file__).resolve().parents[1]
PROCESS_START = ROOT / "tests" / "process_start"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    others = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry and Path(entry) != PROCESS_START]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROCESS_START), *others])}
    python = sys.executable
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        shutil.copytree(ROOT / "config", work / "config")
        dry_run = ["--cores", "1", "-n", "-s", str(ROOT / "workflow/Snakefile"), "--config", "benchmarks=[llama2_70b_lora]"]
        cases = {
            "snakemake --version": ["--version"],
            "snakemake -n, tiny llama2_70b_lora": dry_run,
        }
        print(f"pandas imported at start-up (baseline) vs when first used (ours); CPU s, median of {args.repeat}")
        for name, words in cases.items():
            timings: dict[str, list[float]] = {"baseline": [], "ours": []}
            for _ in range(args.repeat):
                timings["baseline"].append(child_cpu_seconds([python, "-c", SNAKEMAKE_FROM_C, *words], work, env))
                timings["ours"].append(child_cpu_seconds([python, "-m", "snakemake", *words], work, env))
            base, ours = statistics.median(timings["baseline"]), statistics.median(timings["ours"])
            print(f"  {name:40s} baseline {base:6.2f}  ours {ours:6.2f}  baseline/ours {base / ours:.2f}x")


if __name__ == "__main__":
    main()
