"""What ``make test`` costs, by module and by test, in CPU seconds rather than in a loaded machine's wall seconds.

    MLPERF_WF_TEST_CPU=/tmp/costs.jsonl make test
    python bench/test_costs.py /tmp/costs.jsonl [--top 30]

Each line of the file is one test's CPU and wall seconds, written by ``tests/conftest.py`` (a session or module
fixture's set-up counts in the first test that uses it). As root, each pytest process counts through a cgroup of its
own: every process it started, the cluster in a box's jobs under slurmd included (the Docker engine's containers,
which runc puts in the engine's cgroups, are not); elsewhere, its process and the children it waited for.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("costs", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    tests = [json.loads(line) for line in args.costs.read_text().splitlines() if line.strip()]
    by_module: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for test in tests:
        entry = by_module[test["test"].split("::")[0]]
        entry[0] += test["cpu"]
        entry[1] += test["wall"]
        entry[2] += 1
    total_cpu, total_wall = sum(t["cpu"] for t in tests), sum(t["wall"] for t in tests)
    counted = sorted({test.get("counted", "children") for test in tests})
    print(f"{len(tests)} tests: {total_cpu:.0f} CPU s ({', '.join(counted)}), {total_wall:.0f} wall s summed over the workers")
    print(f"{'CPU s':>8} {'share':>6} {'wall s':>8} {'tests':>5}  module")
    for module, (cpu, wall, count) in sorted(by_module.items(), key=lambda item: -item[1][0])[: args.top]:
        print(f"{cpu:8.0f} {cpu / total_cpu:6.1%} {wall:8.0f} {count:5d}  {module}")
    print(f"\n{'CPU s':>8} {'wall s':>8}  test")
    for test in sorted(tests, key=lambda t: -t["cpu"])[: args.top]:
        print(f"{test['cpu']:8.0f} {test['wall']:8.0f}  {test['test']}")


if __name__ == "__main__":
    main()
