"""Where a whole ``make test`` spends its CPU, by kind of process: every process on the machine, not only a test's
children (``bench/test_costs.py`` misses the cluster in a box's jobs and the Docker engine's containers).

    python bench/process_costs.py sample /tmp/processes.json &   # beside `make test`; stop it when the run ends
    python bench/process_costs.py report /tmp/processes.json [--top 40]

The sampler reads each process's CPU time and command line from ``/proc`` every half second, so a process's last half
second and processes shorter than that are missed: the per-kind totals are lower bounds (measure one start of a kind
with ``/usr/bin/time`` for its real cost). Kernel threads are left out, and a process already running when the
sampling starts (the machine's init, a daemon) counts only the CPU it uses after. The report's first line is the
machine's busy share over the same time (``/proc/stat``): near 100 % the run was bound by the CPU, and only less work,
not more workers or another order, makes it shorter.
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


def processes() -> dict[str, tuple[float, str]]:
    """Every user process now: ``pid:start time`` (unique over the run) -> (CPU seconds so far, command line)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError):
            continue
        if int(fields[1]) == 2 or not command:  # kernel threads (children of kthreadd)
            continue
        found[f"{pid}:{fields[19]}"] = ((int(fields[11]) + int(fields[12])) / tick, command[:600])
    return found


def machine_seconds() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine since boot, summed over its CPUs (``/proc/stat``; idle and iowait
    are not busy)."""
    values = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(values) - values[3] - values[4]) / tick, sum(values) / tick


def sample(out: Path, interval: float = 0.5, flush_every: float = 30.0) -> None:
    """Until killed: every process's CPU seconds since the sampling began (a process already running then, such as a
    daemon up for hours, counts only what it used after) and latest command line, and the machine's busy and total CPU
    seconds over the same time, written to ``out`` every ``flush_every`` seconds."""
    already = {key: cpu for key, (cpu, _) in processes().items()}
    busy_at_start, all_at_start = machine_seconds()
    started = flushed = time.monotonic()
    seen: dict[str, dict] = {}
    while True:
        for key, (cpu, command) in processes().items():
            entry = seen.setdefault(key, {"command": command})
            entry["cpu"] = round(cpu - already.get(key, 0.0), 2)
            entry["command"] = command  # the latest: after an exec, what the process became
        if time.monotonic() - flushed > flush_every:
            busy, total = machine_seconds()
            machine = {"busy": round(busy - busy_at_start, 1), "all": round(total - all_at_start, 1), "wall": round(time.monotonic() - started, 1)}
            partial = out.with_suffix(".partial")
            partial.write_text(json.dumps({"machine": machine, "processes": list(seen.values())}))
            partial.replace(out)
            flushed = time.monotonic()
        time.sleep(interval)


def report(path: Path, top: int) -> None:
    sampled = json.loads(path.read_text())
    found, machine = (sampled, None) if isinstance(sampled, list) else (sampled["processes"], sampled["machine"])  # a list: before the machine's share
    if machine:
        share = machine["busy"] / machine["all"] if machine["all"] else 0.0
        print(f"machine: {machine['busy']:.0f} of {machine['all']:.0f} CPU s busy ({share:.0%}) in {machine['wall']:.0f} s")
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for process in found:
        entry = totals[kind(process["command"])]
        entry[0] += process["cpu"]
        entry[1] += 1
    print(f"{len(found)} processes: {sum(p['cpu'] for p in found):.0f} CPU s (lower bound)")
    print(f"{'CPU s':>8} {'count':>6} {'each':>6}  kind")
    for name, (cpu, count) in sorted(totals.items(), key=lambda item: -item[1][0])[:top]:
        print(f"{cpu:8.0f} {count:6.0f} {cpu / count:6.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sampling = sub.add_parser("sample")
    sampling.add_argument("out", type=Path)
    sampling.add_argument("--flush-every", type=float, default=30.0, help="seconds between writes of OUT")
    reading = sub.add_parser("report")
    reading.add_argument("path", type=Path)
    reading.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    if args.command == "sample":
        sample(args.out, flush_every=args.flush_every)
    else:
        report(args.path, args.top)


if __name__ == "__main__":
    main()
