"""Where a whole ``make test`` spends its CPU, by kind of process: every process on the machine, not only a test's
children (``bench/test_costs.py`` misses the cluster in a box's jobs and the Docker engine's containers).

    python bench/process_costs.py sample /tmp/processes.json &   # beside `make test`; stop it when the run ends
    python bench/process_costs.py report /tmp/processes.json [--top 40]

The sampler reads each process's CPU time and command line from ``/proc`` every half second, so a process's last half
second and processes shorter than that are missed: the per-kind totals are lower bounds (measure one start of a kind
with ``/usr/bin/time`` for its real cost). Kernel threads are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path

KINDS = (
    ("--target-jobs", "snakemake job step (--target-jobs)"),
    ("-m snakemake", "snakemake"),
    ("node-check probe", "mlperf-wf node-check probe"),
    ("torch.distributed.run", "torchrun"),
    ("torchrun", "torchrun"),
    ("exec(eval(sys.stdin.readline()))", "pytest-xdist worker (in-process tests)"),
)
"""(words in the command line, kind), first match wins; other ``mlperf-wf`` commands are kinds by their subcommand."""


def kind(command: str) -> str:
    for words, name in KINDS:
        if words in command:
            return name
    parts = command.split()
    for index, part in enumerate(parts):
        if part.endswith("mlperf-wf") and index + 1 < len(parts):
            return f"mlperf-wf {parts[index + 1]}"
    return Path(parts[0]).name if parts else "?"


def sample(out: Path, interval: float = 0.5) -> None:
    """Until killed: every process's latest CPU seconds and command line, written to ``out`` every 30 s."""
    tick = os.sysconf("SC_CLK_TCK")
    seen: dict[str, dict] = {}
    flushed = time.monotonic()
    while True:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except (OSError, ValueError):
                continue
            if int(fields[1]) == 2 or not command:  # kernel threads (children of kthreadd)
                continue
            entry = seen.setdefault(f"{pid}:{fields[19]}", {"command": command})
            entry["cpu"] = (int(fields[11]) + int(fields[12])) / tick
            entry["command"] = command[:600]  # the latest: after an exec, what the process became
        if time.monotonic() - flushed > 30:
            partial = out.with_suffix(".partial")
            partial.write_text(json.dumps(list(seen.values())))
            partial.replace(out)
            flushed = time.monotonic()
        time.sleep(interval)


def report(path: Path, top: int) -> None:
    processes = json.loads(path.read_text())
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for process in processes:
        entry = totals[kind(process["command"])]
        entry[0] += process["cpu"]
        entry[1] += 1
    print(f"{len(processes)} processes: {sum(p['cpu'] for p in processes):.0f} CPU s (lower bound)")
    print(f"{'CPU s':>8} {'count':>6} {'each':>6}  kind")
    for name, (cpu, count) in sorted(totals.items(), key=lambda item: -item[1][0])[:top]:
        print(f"{cpu:8.0f} {count:6.0f} {cpu / count:6.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("sample").add_argument("out", type=Path)
    reading = sub.add_parser("report")
    reading.add_argument("path", type=Path)
    reading.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    if args.command == "sample":
        sample(args.out)
    else:
        report(args.path, args.top)


if __name__ == "__main__":
    main()
