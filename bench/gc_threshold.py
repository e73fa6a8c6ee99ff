"""What Python's default garbage collection costs our processes, the reason the CLI, the Snakefile and the test
session call ``mlperf_wf.skip_needless_garbage_collection`` first.

    python bench/gc_threshold.py [--repeat 3]

Runs each command in fresh processes, interleaved, with Python's defaults (the baseline: a young collection every 700
allocations, and a walk over the whole heap at shutdown) and with ours (``mlperf_wf.YOUNG_COLLECTION_THRESHOLD``, the
heap frozen at exit), and prints each one's CPU seconds (the median of ``--repeat``) and the baseline's over ours:

- ``mlperf-wf mirror --dataset sd_clip_checkpoint``: imports torch and transformers, then trains stable_diffusion's tiny
  CLIP stand-in (its written files must be the same bytes both ways: the threshold changes when cycles are freed,
  never what is computed);
- ``snakemake -n`` of the full-scale plan of all 14 benchmarks (as ``bench/dry_run.py``'s, in a scratch folder);
- ``import torch, transformers``'s Llama, as every tiny trainer and rank starts (a plain interpreter).

The baseline runs the same entry points with ``skip_needless_garbage_collection`` replaced by a no-op before they import it.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from child_cpu import child_cpu_seconds  # bench/ is the script's folder, first on sys.path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "import mlperf_wf; mlperf_wf.skip_needless_garbage_collection = lambda: None; "
"""Prepended to an entry point's code for the baseline: the entry point then keeps Python's default threshold."""
CLI = "import sys; from mlperf_wf.cli import main; sys.exit(main(sys.argv[1:]))"
SNAKEMAKE = "import sys; from snakemake.cli import main; sys.argv[0] = 'snakemake'; main()"
IMPORTS = "import torch, transformers.models.llama.modeling_llama"
OURS = "from mlperf_wf import skip_needless_garbage_collection; skip_needless_garbage_collection(); "


def digest(folder: Path) -> str:
    sha = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        sha.update(path.relative_to(folder).as_posix().encode() + path.read_bytes())
    return sha.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from mlperf_wf import YOUNG_COLLECTION_THRESHOLD
    from mlperf_wf.config import registry

    python = sys.executable
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        shutil.copytree(ROOT / "config", work / "config")

        def mirror(prefix: str, label: str, run: int) -> list[str]:
            out = work / f"mirror-{label}-{run}"
            return [python, "-c", prefix + CLI, "--root", str(work), "mirror", "--dataset", "sd_clip_checkpoint", "--out", str(out)]

        names = registry.benchmark_names()
        targets = [f"results/{name}/report.json" for name in names]
        dry_run = ["--cores", "1", "-n", "-s", str(ROOT / "workflow/Snakefile"), *targets, "--config", "scale=full", f"benchmarks=[{','.join(names)}]"]
        cases = {
            "mlperf-wf mirror (sd_clip_checkpoint)": (lambda run: mirror(BASELINE, "baseline", run), lambda run: mirror("", "ours", run)),
            "snakemake -n, full-scale plan": (
                lambda run: [python, "-c", BASELINE + SNAKEMAKE, *dry_run],
                lambda run: [python, "-c", SNAKEMAKE, *dry_run],
            ),
            "import torch, transformers (Llama)": (
                lambda run: [python, "-c", IMPORTS],
                lambda run: [python, "-c", OURS + IMPORTS],
            ),
        }
        print(f"Python's defaults (baseline) vs a threshold of {YOUNG_COLLECTION_THRESHOLD} and the heap frozen at exit (ours); CPU s, median of {args.repeat}")
        for name, (baseline, ours) in cases.items():
            timings: dict[str, list[float]] = {"baseline": [], "ours": []}
            for run in range(args.repeat):
                timings["baseline"].append(child_cpu_seconds(baseline(run), work))
                timings["ours"].append(child_cpu_seconds(ours(run), work))
            base, mine = statistics.median(timings["baseline"]), statistics.median(timings["ours"])
            print(f"  {name:40s} baseline {base:6.2f}  ours {mine:6.2f}  baseline/ours {base / mine:.2f}x")
        written = {digest(path / "data") for path in work.glob("mirror-*")}  # not metadata/, which names its own path
        same = len(written) == 1
        print(f"  the mirrors' files: {'the same bytes in every run' if same else 'DIFFER between runs'}")


if __name__ == "__main__":
    main()
