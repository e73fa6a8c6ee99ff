"""Benchmark: the rgat preparation's streaming COO -> CSC against an in-memory conversion of the same edges.

An IGBH-style ``edge_index.npy`` ((E, 2) int64) with EDGES random edges over NODES
destinations is written once; then, in fresh processes, alternately REPEAT times:

- baseline ("in memory"): ``np.load`` the whole array, a stable ``argsort`` of the
  destinations, ``indices = src[order]``, ``indptr`` from ``bincount`` (what a
  straightforward converter does, and what compress_graph.py's torch path amounts to);
- ours: ``mlperf_wf.benchmarks.rgat.prepare.coo_to_csc`` over memory-mapped chunks with checkpoints.

Each child reports its wall time and its peak anonymous memory (``VmHWM`` minus the
file-backed pages it maps is not tracked by Linux, so the child samples ``RssAnon``
every 10 ms). Medians and ratios are printed; both results are checked to be equal.

    python bench/csc.py [--edges 100_000_000] [--nodes 10_000_000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from peak_memory import SAMPLER, medians, print_ratio  # bench/ is the script's folder, first on sys.path

CHILD = (
    SAMPLER
    + r"""
from pathlib import Path
import numpy as np

mode, edges_file, nodes, out = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
started = time.perf_counter()
if mode == "baseline":
    edges = np.load(edges_file)
    src, dst = edges[:, 0], edges[:, 1]
    order = np.argsort(dst, kind="stable")
    indices = src[order]
    indptr = np.zeros(nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=nodes), out=indptr[1:])
else:
    from mlperf_wf.benchmarks.rgat import prepare as rgat
    edges = np.load(edges_file, mmap_mode="r")
    def chunks(skip):  # the chunks after the first `skip` (coo_to_csc asks again from there after a kill)
        for start in range(skip * rgat.CHUNK_ROWS, len(edges), rgat.CHUNK_ROWS):
            block = np.asarray(edges[start : start + rgat.CHUNK_ROWS])
            yield block[:, 0], block[:, 1]
    indptr, indices = rgat.coo_to_csc(chunks, nodes, rgat.Checkpoint(out / "scratch", {"bench": 1}))
seconds = time.perf_counter() - started
time.sleep(0.05)
np.save(out / f"{mode}_indptr.npy", indptr)
np.save(out / f"{mode}_indices.npy", np.asarray(indices))
print(json.dumps({"seconds": seconds, "peak_anon_bytes": peak}))
"""
)


def run(mode: str, edges_file: Path, nodes: int, out: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(edges_file), str(nodes), str(out)], check=True, capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=100_000_000)
    parser.add_argument("--nodes", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="bench_csc_") as tmp:
        folder = Path(tmp)
        edges_file = folder / "edge_index.npy"
        rng = np.random.default_rng(0)
        edges = np.lib.format.open_memmap(edges_file, mode="w+", dtype=np.int64, shape=(args.edges, 2))
        for start in range(0, args.edges, 10_000_000):
            stop = min(start + 10_000_000, args.edges)
            edges[start:stop] = rng.integers(0, args.nodes, (stop - start, 2))
        edges.flush()
        del edges
        results: dict[str, list[dict]] = {"baseline": [], "ours": []}
        for _ in range(args.repeat):
            for mode in results:
                out = folder / mode
                out.mkdir(exist_ok=True)
                results[mode].append(run(mode, edges_file, args.nodes, out))
        for name in ("indptr", "indices"):
            if not np.array_equal(np.load(folder / "baseline" / f"baseline_{name}.npy"), np.load(folder / "ours" / f"ours_{name}.npy")):
                print(f"bench/csc.py: {name} differs between the two conversions", file=sys.stderr)
                return 1
    median = medians(results)
    gib = 1024**3
    print(f"{args.edges:,} edges over {args.nodes:,} destinations ({args.edges * 16 / gib:.2f} GiB of COO), median of {args.repeat}")
    print(f"baseline (in memory): {median['baseline']['seconds']:.2f} s, peak anonymous memory {median['baseline']['peak_anon_bytes'] / gib:.2f} GiB")
    print(f"ours (streamed):      {median['ours']['seconds']:.2f} s, peak anonymous memory {median['ours']['peak_anon_bytes'] / gib:.2f} GiB")
    print_ratio(median)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
