"""What the stand-ins of the suite's start-up hook save the processes the suite starts.

    python bench/import_when_first_used.py [--repeat 5]

Two libraries import a heavy module at their module's top that most of the suite's processes never use:
- Snakemake loads every executor plugin at start-up, and the SLURM plugin imports pandas for an efficiency report no
  test turns on;
- mlperf-logging's RCP checker imports ``scipy.stats`` for a t-test, while most processes that import the checker
  only read result files with it.

``tests/process_start/sitecustomize.py`` puts a stand-in for each in the processes started that way (pandas in
``python -m snakemake`` or the ``snakemake`` script; ``scipy.stats`` there and in ``mlperf-wf``, ``python -m mlperf_wf``
and ``python -m mlperf_logging.<checker>``), which imports the module when first used. Both sides here run the hook;
the baseline starts the same program from ``python -c`` (the hook sees no such command line, so the modules are
imported as Python does), ours as the suite starts it. Each case is run in fresh processes, interleaved; it prints each
side's CPU seconds (the median of ``--repeat``) and the baseline's over ours:

- ``snakemake --version``: the start-up alone;
- ``snakemake -n`` of the tiny campaign of llama2_70b_lora in a scratch folder: a start-up and a plan, as most of the
  suite's Snakemake processes are;
- ``mlperf-wf score`` of a published result folder (``../shared/fixtures``, where present): the RCP checker reads
  ten result files, as the campaign gate, status, report and package do, and its test passes on the means alone.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from child_cpu import child_cpu_seconds  # bench/ is the script's folder, first on sys.path
from gc_threshold import SNAKEMAKE as SNAKEMAKE_FROM_C
from gc_threshold import start_up_hook_environments

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT.parent / "shared" / "fixtures" / "mlperf_training_v5.1" / "Lenovo" / "results" / "SR680aV4-8xB300_SXM" / "llama2_70b_lora"
"""Ten published runs of llama2_70b_lora (MLPerf Training 5.1), scored under the 5.1.0 rules."""
MLPERF_WF_FROM_C = "import sys; from mlperf_wf.cli import main; sys.argv[0] = 'mlperf-wf'; sys.exit(main())"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    env = start_up_hook_environments()["ours"]  # both sides run the hook: the command line decides what it does
    python = sys.executable
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        shutil.copytree(ROOT / "config", work / "config")
        dry_run = ["--cores", "1", "-n", "-s", str(ROOT / "workflow/Snakefile"), "--config", "benchmarks=[llama2_70b_lora]"]
        cases = {
            "snakemake --version": ([python, "-c", SNAKEMAKE_FROM_C, "--version"], [python, "-m", "snakemake", "--version"]),
            "snakemake -n, tiny llama2_70b_lora": ([python, "-c", SNAKEMAKE_FROM_C, *dry_run], [python, "-m", "snakemake", *dry_run]),
        }
        if PUBLISHED.is_dir():
            score = ["score", str(PUBLISHED), "--ruleset", "5.1.0"]
            cases["mlperf-wf score, 10 published runs"] = ([python, "-c", MLPERF_WF_FROM_C, *score], [python, "-m", "mlperf_wf", *score])
        else:
            print(f"{PUBLISHED} absent: the mlperf-wf case is left out")
        print(f"imported at start-up (baseline) vs when first used (ours); CPU s, median of {args.repeat}")
        for name, (baseline, ours) in cases.items():
            timings: dict[str, list[float]] = {"baseline": [], "ours": []}
            for _ in range(args.repeat):
                timings["baseline"].append(child_cpu_seconds(baseline, work, env))
                timings["ours"].append(child_cpu_seconds(ours, work, env))
            base, mine = statistics.median(timings["baseline"]), statistics.median(timings["ours"])
            print(f"  {name:40s} baseline {base:6.2f}  ours {mine:6.2f}  baseline/ours {base / mine:.2f}x")


if __name__ == "__main__":
    main()
