"""What Python's default garbage collection costs the test suite's processes, the reason every Python process the
suite starts runs ``tests/process_start/sitecustomize.py`` first.

    python bench/gc_threshold.py [--repeat 3]

Runs each command in fresh processes, interleaved, with Python's defaults (the baseline: a young collection every 700
allocations, and a walk over the whole heap at shutdown) and with the suite's (``YOUNG_COLLECTION_THRESHOLD``, the
heap frozen at exit), and prints each one's CPU seconds (the median of ``--repeat``) and the baseline's over ours:

- ``mlperf-wf mirror --dataset sd_clip_checkpoint``: imports torch and transformers, then trains stable_diffusion's tiny
  CLIP stand-in (its written files must be the same bytes both ways: the threshold changes when cycles are freed,
  never what is computed);
- ``snakemake -n`` of the full-scale plan of all 14 benchmarks (as ``bench/dry_run.py``'s, in a scratch folder);
- ``import torch, transformers``'s Llama, as every tiny trainer and rank starts (a plain interpreter).

The baseline runs the same entry points with ``PYTHONPATH`` cleared of ``tests/process_start``; ours with it first.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from child_cpu import child_cpu_seconds  # bench/ is the script's folder, first on sys.path

ROOT = Path(__file__).resolve().parents[1]
PROCESS_START = ROOT / "tests" / "process_start"
"""The folder whose ``sitecustomize.py`` each of the suite's processes runs at start."""
CLI = "import sys; from mlperf_wf.cli import main; sys.exit(main(sys.argv[1:]))"
SNAKEMAKE = "import sys; from snakemake.cli import main; sys.argv[0] = 'snakemake'; main()"
IMPORTS = "import torch, transformers.models.llama.modeling_llama"


def digest(folder: Path) -> str:
    sha = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        sha.update(path.relative_to(folder).as_posix().encode() + path.read_bytes())
    return sha.hexdigest()


def start_up_hook_environments() -> dict[str, dict[str, str]]:
    """This process's environment without the suite's start-up hook on ``PYTHONPATH`` (``baseline``) and with it first
    (``ours``)."""
    others = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry and Path(entry) != PROCESS_START]
    return {
        "baseline": {**os.environ, "PYTHONPATH": os.pathsep.join(others)},
        "ours": {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROCESS_START), *others])},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from mlperf_wf.config import registry

    sys.path.insert(0, str(PROCESS_START.parents[1]))
    from tests.process_start.sitecustomize import YOUNG_COLLECTION_THRESHOLD

    environments = start_up_hook_environments()

    python = sys.executable
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        shutil.copytree(ROOT / "config", work / "config")

        def mirror(label: str, run: int) -> list[str]:
            out = work / f"mirror-{label}-{run}"
            return [python, "-c", CLI, "--root", str(work), "mirror", "--dataset", "sd_clip_checkpoint", "--out", str(out)]

        names = registry.benchmark_names()
        targets = [f"results/{name}/report.json" for name in names]
        dry_run = ["--cores", "1", "-n", "-s", str(ROOT / "workflow/Snakefile"), *targets, "--config", "scale=full", f"benchmarks=[{','.join(names)}]"]
        cases = {
            "mlperf-wf mirror (sd_clip_checkpoint)": (lambda run: mirror("baseline", run), lambda run: mirror("ours", run)),
            "snakemake -n, full-scale plan": (lambda run: [python, "-c", SNAKEMAKE, *dry_run],) * 2,
            "import torch, transformers (Llama)": (lambda run: [python, "-c", IMPORTS],) * 2,
        }
        print(f"Python's defaults (baseline) vs a threshold of {YOUNG_COLLECTION_THRESHOLD} and the heap frozen at exit (ours); CPU s, median of {args.repeat}")
        for name, (baseline, ours) in cases.items():
            timings: dict[str, list[float]] = {"baseline": [], "ours": []}
            for run in range(args.repeat):
                timings["baseline"].append(child_cpu_seconds(baseline(run), work, environments["baseline"]))
                timings["ours"].append(child_cpu_seconds(ours(run), work, environments["ours"]))
            base, mine = statistics.median(timings["baseline"]), statistics.median(timings["ours"])
            print(f"  {name:40s} baseline {base:6.2f}  ours {mine:6.2f}  baseline/ours {base / mine:.2f}x")
        written = {digest(path / "data") for path in work.glob("mirror-*")}  # not metadata/, which names its own path
        same = len(written) == 1
        print(f"  the mirrors' files: {'the same bytes in every run' if same else 'DIFFER between runs'}")


if __name__ == "__main__":
    main()
