"""Rehearse benchmarks on a fresh cluster in a box, by hand (tests only):

    python -m tests.rehearsal retinanet[,bert,...] [--runs N] [--work DIR] [--launcher pyxis|docker] [--fail BENCH=SEED:RANK]

prints each run's rank records and the end of its train log; the box is stopped at the end.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from tests.rehearsal import campaign, spec
from tests.rehearsal.cluster import start_box


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("benchmarks")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--launcher", default="pyxis")
    parser.add_argument("--fail", action="append", default=[], help="BENCH=SEED:RANK: that rank of that run fails on purpose")
    args = parser.parse_args()
    names = args.benchmarks.split(",")
    work = args.work or Path(f"/tmp/rehearsal-{'-'.join(names)}")
    shutil.rmtree(work, ignore_errors=True)
    rehearsals = [spec.module(name).REHEARSAL for name in names]
    fail = dict(item.split("=", 1) for item in args.fail)
    started = time.time()
    configfile = campaign.prepare(work / "project", rehearsals, args.launcher, args.runs, fail)
    print(f"prepared in {time.time() - started:.1f} s: {work / 'project'}", flush=True)
    box = start_box(work / "box", cpus_per_node=512, memory_mb=2_100_000)
    try:
        started = time.time()
        ran = campaign.run_on_box(box, work / "project", configfile, rehearsals, args.launcher, args.runs)
        print(f"snakemake exited {ran.returncode} after {time.time() - started:.1f} s")
        print(ran.output[-3000:])
        for name in names:
            for run in range(args.runs):
                print(f"== {name} run {run}")
                for record in ran.ranks(name, run):
                    print(f"  rank {record['rank']} on {record['host']}: status {record['status']} {record['problem'][-1500:]}")
                    for check in record["checked"]:
                        print(f"    {'ok ' if check['held'] else 'BAD'} {check['kind']} {check['what']} ({check['why']}) {check['detail']}")
                print(ran.train_log(name, run)[-3000:])
    finally:
        box.stop()


if __name__ == "__main__":
    main()
