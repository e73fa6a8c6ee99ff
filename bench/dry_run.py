"""Benchmark: the full-scale dry run of every benchmark's DAG against bare Snakefiles with the same jobs.

Each run is a fresh `snakemake -n` process in a scratch working directory with the repository's config (interpreter and
plugin start-up included). Two baselines, timed in the same run, interleaved with ours:

- *as many jobs*: a bare Snakefile of one rule whose wildcard makes as many jobs as the workflow's DAG holds (its
  `Job stats` total), each job alone;
- *same job graph*: a bare Snakefile whose jobs are the workflow's DAG job for job, each depending on the same jobs
  (the edges of `snakemake --dag dot`), through one input function over a literal table: what Snakemake itself spends
  on a DAG of this shape, with nothing computed.

The first ratio is what this workflow adds to every invocation (and to every cluster job, which parses the Snakefile
again) including the shape of its DAG; the second what its Snakefile, registry, plans and per-job commands add beyond
the shape.

    python bench/dry_run.py [BENCH ...] [--repeat 3]     (default: all benchmarks in one DAG)
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from mlperf_wf.config import registry  # noqa: E402

BARE_SNAKEFILE = 'rule all:\n    input: expand("out/{{i}}.txt", i=range({jobs}))\n\nrule job:\n    output: "out/{{i}}.txt"\n    shell: "touch {{output}}"\n'
"""One rule, ``jobs`` jobs (plus ``all``)."""

GRAPH_SNAKEFILE = (
    "DEPENDS_ON = {depends_on!r}\n\n"
    'rule all:\n    input: expand("out/{{i}}.txt", i={sinks!r})\n\n'
    'rule job:\n    input: lambda wildcards: [f"out/{{j}}.txt" for j in DEPENDS_ON[int(wildcards.i)]]\n'
    '    output: "out/{{i}}.txt"\n    shell: "touch {{output}}"\n'
)
"""One rule, one job per node of the workflow's job graph (plus ``all`` over the jobs nothing depends on)."""


def job_graph(dot: str) -> tuple[list[list[int]], list[int]]:
    """The jobs each job depends on (by node number) and the jobs nothing depends on, from ``--dag dot``."""
    nodes = {int(m[1]) for m in re.finditer(r"^\s*(\d+)\[label", dot, re.MULTILINE)}
    depends_on: dict[int, list[int]] = {node: [] for node in nodes}
    for m in re.finditer(r"^\s*(\d+) -> (\d+)", dot, re.MULTILINE):
        depends_on[int(m[2])].append(int(m[1]))
    needed = {j for deps in depends_on.values() for j in deps}
    order = sorted(nodes)
    index = {node: i for i, node in enumerate(order)}
    return [sorted(index[j] for j in depends_on[node]) for node in order], [index[n] for n in order if n not in needed]


def timed(argv: list[str], workdir: Path) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=workdir, check=True, capture_output=True, text=True)
    return time.perf_counter() - started, proc.stdout


def job_total(output: str) -> int:
    """The ``total`` row of a dry run's job stats."""
    return next(int(line.split()[1]) for line in output.splitlines() if line.startswith("total "))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="*", default=registry.benchmark_names())
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "1", "-n"]
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch) / "workflow"
        shutil.copytree(ROOT / "config", workdir / "config")
        targets = [f"results/{name}/report.json" for name in args.benchmarks]
        argv = [*snakemake, "-s", str(ROOT / "workflow/Snakefile"), *targets, "--config", "scale=full", f"benchmarks=[{','.join(args.benchmarks)}]"]
        first = timed(argv, workdir)
        jobs = job_total(first[1])
        bare = Path(scratch) / "bare"
        bare.mkdir()
        (bare / "Snakefile").write_text(BARE_SNAKEFILE.format(jobs=jobs - 1))
        depends_on, sinks = job_graph(subprocess.run([*argv, "--dag", "dot"], cwd=workdir, check=True, capture_output=True, text=True).stdout)
        graph = Path(scratch) / "graph"
        graph.mkdir()
        (graph / "Snakefile").write_text(GRAPH_SNAKEFILE.format(depends_on=depends_on, sinks=sinks))
        edges = sum(len(deps) for deps in depends_on)
        # interleaved, one of each per round: this machine's speed drifts over a minute, and all sides share it
        times: dict[str, list[float]] = {"ours": [], "bare": [], "graph": []}
        for _ in range(args.repeat):
            times["ours"].append(timed(argv, workdir)[0])
            times["bare"].append(timed(snakemake, bare)[0])
            times["graph"].append(timed(snakemake, graph)[0])
        median = {side: statistics.median(values) for side, values in times.items()}

        def ratio(side: str) -> float:
            return statistics.median(o / b for o, b in zip(times["ours"], times[side], strict=True))

        print(f"baseline  bare Snakefile, as many jobs ({jobs}), snakemake -n:      {median['bare']:6.2f} s (median of {args.repeat})")
        print(f"baseline  bare Snakefile, same job graph ({len(depends_on)} jobs, {edges} edges): {median['graph']:6.2f} s")
        print(f"ours      full-scale dry run of {len(args.benchmarks)} benchmarks, {jobs} jobs:  {median['ours']:6.2f} s")
        print(f"ratio     median of the {args.repeat} rounds' own ratios: {ratio('bare'):.2f}x as many jobs, {ratio('graph'):.2f}x same job graph")
    return 0


if __name__ == "__main__":
    sys.exit(main())
