"""Benchmark: dlrm_dcnv2's from-raw preparation (torchrec's three steps as shards) against the same steps in memory.

Raw click logs of DAYS_ROWS rows a day (24 days, the tiny generator's teacher and layout) are written once; then,
in fresh processes, REPEAT times each:

- baseline ("in memory", what ``process_Criteo_1TB_Click_Logs_dataset.sh`` does): every day's arrays held at
  once, per feature a first-appearance numbering over all days (``np.unique`` on the whole column), days 0-22
  stacked in one float32 (rows, 40) array, ``np.random.seed(0); np.random.shuffle``, cut back;
- ours: every shard of ``prepare_from_raw`` up to ``one_hot_day_*`` (steps 1-3), each in its own process, as the
  workflow runs them; its peak is the largest of any shard's.

Each child samples its ``RssAnon`` every 10 ms (file-backed pages it maps are not counted: the page cache can
drop them). Medians of wall time (ours: the sum over shards, i.e. one core) and peak anonymous memory, and their
ratios, are printed; the shuffled day files of both are checked to be equal.

    python bench/criteo_from_raw.py [--rows-per-day 200_000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from peak_memory import SAMPLER, medians, print_ratio  # bench/ is the script's folder, first on sys.path

STARTED = r"""
started = time.perf_counter()
"""

BASELINE = r"""
import zlib
from pathlib import Path
import numpy as np
from mlperf_wf.benchmarks.dlrm_dcnv2 import click_logs
raw, out = Path(sys.argv[1]), Path(sys.argv[2])
days = []
for d in range(24):
    text = zlib.decompressobj(zlib.MAX_WBITS | 32).decompress(click_logs.raw_day_file(raw, d).read_bytes())
    labels, dense, sparse = click_logs.parse_lines(text[: text.rfind(b"\n") + 1], f"day_{d}")
    days.append((labels.reshape(-1, 1), click_logs.dense_log(dense), sparse))
column_ids = []
for k in range(26):
    values = np.concatenate([sparse[:, k] for _, _, sparse in days])
    unique, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    rank = np.empty(len(unique), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(unique))
    column_ids.append((rank[inverse] + 2).astype(np.int32))
starts = np.concatenate([[0], np.cumsum([len(labels) for labels, _, _ in days])])
parts = []
for d in range(23):
    sparse = np.stack([ids[starts[d]:starts[d + 1]] for ids in column_ids], axis=1)
    parts.append(np.concatenate([days[d][1], sparse, days[d][0]], axis=1).astype(np.float32))
full = np.concatenate(parts)
del parts
np.random.seed(0)
np.random.shuffle(full)
start = 0
for d in range(23):
    stop = start + len(days[d][0])
    np.save(out / f"day_{d}_sparse.npy", full[start:stop, 13:39].astype(np.int32))
    start = stop
"""

SHARD = r"""
from pathlib import Path
from mlperf_wf.benchmarks.dlrm_dcnv2 import prepare_from_raw
raw, shards, shard, training_rows = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
prepare_from_raw.training_rows = lambda scale: training_rows  # the benchmark's own size, not the tiny tier's
prepare_from_raw.prepare_shard(shard, {"click_logs": raw, "shards": shards}, shards / shard, "tiny")
"""

REPORT = r"""
seconds = time.perf_counter() - started
time.sleep(0.05)
print(json.dumps({"seconds": seconds, "peak_anon_bytes": peak}))
"""


def child(code: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", SAMPLER + STARTED + code + REPORT, *args], check=True, capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ours(raw: Path, folder: Path, training_rows: int) -> dict:
    from mlperf_wf.benchmarks.dlrm_dcnv2 import prepare_from_raw

    shutil.rmtree(folder, ignore_errors=True)
    shards = folder / "shards"
    names = prepare_from_raw.shards("tiny")
    runs = [child(SHARD, str(raw), str(shards), name, str(training_rows)) for name in names[: names.index("multihot_tables")]]
    return {"seconds": sum(r["seconds"] for r in runs), "peak_anon_bytes": max(r["peak_anon_bytes"] for r in runs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows-per-day", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    import numpy as np

    from mlperf_wf.benchmarks.dlrm_dcnv2 import criteo, raw_click_logs

    shape = criteo.ClickLogShape(rows_per_train_day=args.rows_per_day, rows_last_day=args.rows_per_day)
    with tempfile.TemporaryDirectory(prefix="bench_criteo_") as tmp:
        folder = Path(tmp)
        raw_click_logs.generate(folder / "raw", 1515, shape)
        results: dict[str, list[dict]] = {"baseline": [], "ours": []}
        for _ in range(args.repeat):
            (folder / "baseline").mkdir(exist_ok=True)
            results["baseline"].append(child(BASELINE, str(folder / "raw"), str(folder / "baseline")))
            results["ours"].append(ours(folder / "raw", folder / "ours", 23 * args.rows_per_day))
        for d in range(23):
            theirs = np.load(folder / "baseline" / f"day_{d}_sparse.npy")
            mine = np.load(folder / "ours" / "shards" / f"one_hot_day_{d}" / f"day_{d}_sparse.npy")
            if not np.array_equal(theirs, mine):
                print(f"bench/criteo_from_raw.py: day {d}'s shuffled sparse ids differ between the two", file=sys.stderr)
                return 1
    median = medians(results)
    mib = 1024**2
    rows = 24 * args.rows_per_day
    print(f"{rows:,} raw click-log rows (24 days), median of {args.repeat}")
    base = median["baseline"]
    print(f"baseline (every step in memory): {base['seconds']:.1f} s, peak anonymous memory {base['peak_anon_bytes'] / mib:.0f} MiB")
    print(f"ours (shards, one process each): {median['ours']['seconds']:.1f} s summed, largest shard's peak {median['ours']['peak_anon_bytes'] / mib:.0f} MiB")
    print_ratio(median)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
