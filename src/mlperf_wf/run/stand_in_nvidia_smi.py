"""A STAND-IN for ``nvidia-smi --query-gpu=timestamp,index,power.draw --format=csv,noheader,nounits -lms N``
on a machine without GPUs (this project's CPU tier and its tests). It is not a measurement.

It prints the same lines nvidia-smi prints (``2026/11/30 09:21:40.123, 0, 301.25``, one per GPU every
``-lms`` milliseconds), and its watts follow this host's CPU load, so that a busy run reads higher than an
idle one: ``idle_watts + (max_watts - idle_watts) * busy share of the CPUs since the last round`` (from
``/proc/stat``), the same for every stand-in GPU. Use it as ``power.gpu_command``::

    python -m mlperf_wf.run.stand_in_nvidia_smi --gpus 2 -lms {interval_ms}
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot; (0, 0) where /proc/stat is missing."""
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def stand_in_watts(before: tuple[int, int], after: tuple[int, int], idle_watts: float, max_watts: float) -> float:
    """The stand-in's watts for the CPU load between two ``cpu_times``."""
    total = after[1] - before[1]
    busy = (after[0] - before[0]) / total if total > 0 else 0.0
    return round(idle_watts + (max_watts - idle_watts) * min(max(busy, 0.0), 1.0), 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlperf_wf.run.stand_in_nvidia_smi", description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1, help="stand-in GPUs per round")
    parser.add_argument("-lms", "--loop-ms", type=int, default=1000, dest="loop_ms", help="milliseconds between rounds, as nvidia-smi -lms")
    parser.add_argument("--idle-watts", type=float, default=60.0)
    parser.add_argument("--max-watts", type=float, default=300.0)
    parser.add_argument("--rounds", type=int, default=0, help="stop after this many rounds (0: until killed, as nvidia-smi)")
    args = parser.parse_args(argv)
    before = cpu_times()
    rounds = 0
    while args.rounds == 0 or rounds < args.rounds:
        time.sleep(args.loop_ms / 1000)
        after = cpu_times()
        watts = stand_in_watts(before, after, args.idle_watts, args.max_watts)
        before = after
        stamp = datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        for index in range(args.gpus):
            sys.stdout.write(f"{stamp}, {index}, {watts:.2f}\n")
        sys.stdout.flush()
        rounds += 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
