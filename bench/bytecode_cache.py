"""What compiling the project's own modules at every process start costs where the environment sets
``PYTHONDONTWRITEBYTECODE`` (this machine's does), the reason ``tests/conftest.py`` compiles ``src/`` and ``tests/``
once before ``make test`` starts its processes.

    python bench/bytecode_cache.py [--starts 5]

Each way, ``--starts`` times, interleaved, with ``PYTHONDONTWRITEBYTECODE=1`` as in make test's processes:
- a Snakemake dry run of the default tiny workflow (the Snakefile's helpers load as in every Snakemake start);
- a process that imports what the download, report, plot and train commands import from the project;
once with no bytecode beside the project's sources (the baseline: every start compiles them) and once after
``compileall`` wrote it (site-packages keep the bytecode pip wrote either way). Prints the CPU seconds of one start
each way and the baseline's over the compiled one's. The project's ``__pycache__`` folders are removed at the start
and left compiled at the end.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import sys
import tempfile
from pathlib import Path

from child_cpu import child_cpu_seconds  # bench/ is the script's folder, first on sys.path

ROOT = Path(__file__).resolve().parents[1]
IMPORTS = """
import mlperf_wf.cli, mlperf_wf.acquire.download, mlperf_wf.results.report, mlperf_wf.results.plots
import mlperf_wf.run.harness, mlperf_wf.benchmarks.llama2_70b_lora.trainer
"""


def cpu_of(argv: list[str], cwd: Path) -> float:
    """CPU seconds of one process (and its children), writing no bytecode."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    return child_cpu_seconds(argv, cwd, env)


def remove_bytecode() -> None:
    for folder in ("src", "tests"):
        for cache in (ROOT / folder).rglob("__pycache__"):
            shutil.rmtree(cache)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    starts = {
        "snakemake -n (tiny)": [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"), "-n", "-q"],
        "commands' imports": [sys.executable, "-c", IMPORTS],
    }
    with tempfile.TemporaryDirectory() as workdir:
        (Path(workdir) / "config").symlink_to(ROOT / "config")
        for name, argv in starts.items():
            baseline, compiled = [], []
            for _ in range(args.starts):
                remove_bytecode()
                baseline.append(cpu_of(argv, Path(workdir)))
                for folder in ("src", "tests"):
                    compileall.compile_dir(ROOT / folder, quiet=1)
                compiled.append(cpu_of(argv, Path(workdir)))
            each_baseline, each_compiled = sum(baseline) / len(baseline), sum(compiled) / len(compiled)
            print(f"{name}: CPU s of one start, mean of {args.starts}")
            print(f"  compiled at every start (baseline): {each_baseline:.3f}")
            print(f"  compiled once (compileall):         {each_compiled:.3f}")
            print(f"  baseline / compiled once: {each_baseline / each_compiled:.2f}x ({each_baseline - each_compiled:.3f} s a start)")


if __name__ == "__main__":
    main()
