"""Benchmark: `mlperf-wf score` against mlperf-logging's result summarizer on the same folder.

Both run as fresh processes (interpreter start-up included) on a private copy of the
folder (the summarizer writes scaling.json files into it), alternately, REPEAT times;
the medians and their ratio are printed.

    python bench/score.py [FOLDER] [--ruleset 5.1.0] [--repeat 3]

FOLDER defaults to the shared Lenovo v5.1 submission (../shared/fixtures/...).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT = Path(os.environ.get("MLPERF_WF_FIXTURES", Path(__file__).resolve().parents[2] / "shared" / "fixtures")) / "mlperf_training_v5.1" / "Lenovo"


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, nargs="?", default=DEFAULT)
    parser.add_argument("--ruleset", default="5.1.0")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not args.folder.is_dir():
        print(f"bench/score.py: {args.folder}: no such folder", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / args.folder.name
        shutil.copytree(args.folder, copy)
        official_cmd = [sys.executable, "-m", "mlperf_logging.result_summarizer", str(copy), "training", args.ruleset]
        ours_cmd = [sys.executable, "-m", "mlperf_wf", "score", str(copy), "--ruleset", args.ruleset]
        official, ours = [], []
        for _ in range(args.repeat):
            official.append(timed(official_cmd))
            ours.append(timed(ours_cmd))
    base, new = statistics.median(official), statistics.median(ours)
    print(f"folder: {args.folder} (ruleset {args.ruleset}, {os.cpu_count()} cores, median of {args.repeat})")
    print(f"baseline  mlperf_logging.result_summarizer: {base:7.2f} s")
    print(f"ours      mlperf-wf score:                  {new:7.2f} s")
    print(f"speed-up: {base / new:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
