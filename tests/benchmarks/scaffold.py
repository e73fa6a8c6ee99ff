"""What every benchmark's tests share: the full-scale dry run of its campaign (made once per session) and its plan
at the reference's own geometry, both checked the same way for all of them by ``test_every_benchmark.py``; its tiny
campaign through Snakemake, the MLLOG events of a run, and a preparation killed halfway and resumed. A benchmark's own
test files add only what is particular to it (its command's words, its targets, its shards)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from mlperf_wf.config import registry
from tests.conftest import made_once
from tests.plan.test_plan import reference_geometry_plan
from tests.workflow.test_workflow import job_counts, new_workdir, planned_train_lines, snakemake, snakemake_argv, snakemake_env

ONE_NODE_LAUNCHERS = ("local", "docker", "apptainer")
"""Launchers that run on one node: a multi-node plan refuses them."""


@dataclass(frozen=True)
class FullDryRun:
    """``snakemake -n -p results/<name>/report.json --config scale=full`` on a fresh checkout."""

    name: str
    folder: Path
    """The checkout it ran in (nothing is written there but Snakemake's own records)."""
    output: str
    counts: dict[str, int]
    """The dry run's job stats: rule -> jobs."""
    train_lines: list[str]
    """The train jobs' shell lines."""


DRY_RUN_OUTPUT = "dry-run.txt"


def full_dry_run(name: str, base: Path) -> FullDryRun:
    """The full-scale dry run of ``name`` in ``base``/full-<name>: made once per session (``base`` is shared by the
    xdist workers: the first to ask makes it, the others wait and read its output)."""

    def make(folder: Path) -> None:
        new_workdir(folder)
        proc = snakemake(folder, "-n", f"results/{name}/report.json", "--config", "scale=full")
        # the jobs (stdout), then the workflow's review of the plan and its preflight (stderr)
        (folder / DRY_RUN_OUTPUT).write_text(f"{proc.stdout}\n{proc.stderr}")

    folder = made_once(base, f"full-{name}", make)
    output = (folder / DRY_RUN_OUTPUT).read_text()
    return FullDryRun(name, folder, output, job_counts(output), planned_train_lines(output, name))


def reference_pyxis_job(name: str, workdir: Path) -> dict:
    """Run 3 of ``name`` at the reference's geometry through pyxis (golden ``<name>_<nodes>_nodes.json``), after
    checking it asks for every node and GPU and that the one-node launchers refuse the geometry."""
    geometry = registry.load_benchmark(name).full.geometry
    got = reference_geometry_plan(name, workdir)
    pyxis = got[f"run_3/pyxis/{geometry.nodes}_node"]
    assert pyxis["resources"]["nodes"] == geometry.nodes and pyxis["resources"]["gres"] == f"gpu:{geometry.gpus_per_node}"
    refused = [launcher for launcher in ONE_NODE_LAUNCHERS if "refused" in got[f"run_3/{launcher}/{geometry.nodes}_node"]]
    assert refused == list(ONE_NODE_LAUNCHERS), f"{name}: only pyxis runs {geometry.nodes} nodes; accepted: {set(ONE_NODE_LAUNCHERS) - set(refused)}"
    return pyxis


def tiny_campaign(folder: Path, name: str, runs: int, cache: Path, *config: str) -> Path:
    """``folder``, a new checkout where ``runs`` tiny runs of ``name`` went through the whole workflow, with Snakemake's
    output cache ``cache`` (``--config`` items ``config`` added)."""
    workdir = folder if (folder / "config").is_dir() else new_workdir(folder)
    snakemake(workdir, "--cores", "2", "--cache", "--config", f"benchmarks=[{name}]", f"runs={runs}", *config, cache=cache)
    return workdir


def tiny_report(workdir: Path, name: str) -> dict:
    return json.loads((workdir / "results" / "tiny" / name / "report.json").read_text())


def run_events(workdir: Path, name: str, run: int) -> list[dict]:
    """The MLLOG events of tiny run ``run`` of ``name``, in order."""
    text = (workdir / "results" / "tiny" / name / "runs" / str(run) / "result.txt").read_text()
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in text.splitlines() if ":::MLLOG " in line]


def finished_shards(workdir: Path, benchmark: str) -> set[str]:
    return {p.parent.name for p in (workdir / f"resources/tiny/prepared/{benchmark}/shards").glob("*/shard.json")}


def shards_run(output: str) -> list[str]:
    """Shards of the preprocess_shard jobs a Snakemake run started, from its job listing: a tiny run's job lines
    (``Job 12: prepare rgat shard feat__paper``, the rule's message), a full-scale run's job blocks."""
    names = re.findall(r"^Job \d+: prepare \S+ shard ([A-Za-z0-9_.-]+)$", output, flags=re.MULTILINE)
    for block in output.split("rule preprocess_shard:")[1:]:
        match = re.search(r"wildcards: .*shard=([A-Za-z0-9_.-]+)", block)
        names.append(match.group(1))
    return names


def kill_preparation_halfway_and_rerun(workdir: Path, benchmark: str, config: tuple[str, ...], total: int, output_cache: Path, timeout: float) -> dict:
    """Prepare ``benchmark``'s tiny dataset one job at a time, SIGKILL the whole Snakemake process group once half
    its ``total`` shards are done, then rerun: which shards were done at the kill and which the rerun made."""
    dataset = f"resources/tiny/prepared/{benchmark}/dataset"
    argv = snakemake_argv(workdir, "--cores", "1", dataset, "--cache", *config)
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=snakemake_env(output_cache), start_new_session=True)
    deadline = time.monotonic() + timeout
    while len(finished_shards(workdir, benchmark)) < total // 2 and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    done_at_kill = finished_shards(workdir, benchmark)
    assert 0 < len(done_at_kill) < total, f"the kill came too late or too early: {len(done_at_kill)} of {total} shards"
    snakemake(workdir, "--unlock", *config)  # a hard kill leaves Snakemake's lock behind
    rerun = snakemake(workdir, "--cores", "2", dataset, "--cache", "--rerun-incomplete", *config, cache=output_cache)
    return {"workdir": workdir, "done_at_kill": done_at_kill, "rerun": shards_run(rerun.stdout + rerun.stderr), "total": total}
