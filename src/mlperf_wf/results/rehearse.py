"""``mlperf-wf rehearse <benchmark>``: a benchmark's full-scale train job on the user's own cluster, for a few steps.

The command runs Snakemake with the campaign's profile (so the same executor submits it) for the target
``rehearsal/<benchmark>/<N>-steps.done`` (rule ``rehearse``, :meth:`mlperf_wf.plan.plan.BenchmarkPlan.rehearsal_job`): the
benchmark's full-scale train job with its real image, mounts, launcher and node check, on two nodes (one for a
one-node benchmark) of the runs' GPUs per node, which the rehearsal hook (``containers/hooks/mlperf_wf_rehearsal_steps.py``)
stops after ``N`` training steps (where the definition says the framework ends the run itself, ``full.rehearsal_stop``,
the job appends the framework's step limit and the hook only records each rank). It then reads what the job left in
``rehearsal/<benchmark>/`` (each rank's record, the job's log, the run's merged MLLOG file) and prints one verdict per
check (:func:`verdicts`). Nothing goes under ``results/``: no campaign's status, score or report reads a rehearsal.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mlperf_wf.errors import ConfigError

PASSED, FAILED, NOT_REACHED = "passed", "FAILED", "not reached"
DEFAULT_STEPS = 3

JIT_WARNINGS = (
    re.compile(r"jit[- ]compil", re.IGNORECASE),  # TF: "CUDA kernels will be jit-compiled from PTX"; CUDA's "JIT compilation"
    re.compile(r"\bPTX\b.*\b(JIT|compil)", re.IGNORECASE),
    re.compile(r"ptxas (warning|error|fatal)", re.IGNORECASE),
    re.compile(r"no kernel image is available for execution"),
    re.compile(r"is not compatible with the current PyTorch installation"),  # torch built without the GPU's sm_XX
    re.compile(r"not built with CUDA kernel binaries compatible with compute capability"),
    re.compile(r"triton.*(falling back|fallback|could not compile|compilation error)", re.IGNORECASE),
)
"""Lines of a job's log that say GPU kernels were compiled just in time (no binary for this GPU in the image)."""
START_OF_RUN_KEYS = ("cache_clear", "init_start")
"""MLLOG keys every run logs before training, once, by its one writer."""


@dataclass(frozen=True)
class Expected:
    """What the rehearsal job was planned to be."""

    benchmark: str
    """The benchmark rehearsed."""
    nodes: int
    """Nodes of the rehearsal."""
    gpus_per_node: int
    """GPUs per node."""
    steps: int
    """Training steps each rank takes before the hook stops it."""
    inputs: tuple[str, ...]
    """Input roles the job mounts (``prepared`` and each role its runs read)."""
    campaign_nodes: int = 0
    """Nodes of the campaign's runs (for the geometry line)."""
    ranks_per_node: int = 0
    """Training processes (ranks) each node runs: 0 for one per GPU; fewer where one process drives several GPUs (bert's
    TensorFlow process drives all its node's GPUs: one)."""
    rank_nodes: int = 0
    """Nodes whose GPUs are the ranks that take training steps (the training role's where the nodes split into roles,
    ``full.geometry.node_split``); 0: every node."""
    stopped_by: str = ""
    """The word by which the framework's own step limit ends the run (``full.rehearsal_stop``, rendered); empty: the
    hook ends every rank after its steps."""
    step: str = ""
    """What one training step is, where the definition says (``full.rehearsal_stop.step``)."""

    @property
    def per_node(self) -> int:
        """Ranks on each node that takes training steps."""
        return self.ranks_per_node or self.gpus_per_node

    @property
    def ranked_nodes(self) -> int:
        """Nodes whose processes are the world's ranks."""
        return self.rank_nodes or self.nodes

    @property
    def ranks(self) -> int:
        """Ranks of the world."""
        return self.ranked_nodes * self.per_node


@dataclass(frozen=True)
class Verdict:
    """One check of a rehearsal."""

    check: str
    """What was checked."""
    outcome: str
    """passed, FAILED or not reached."""
    detail: str
    """The figures or the problem, in one line."""

    def line(self) -> str:
        return f"{self.outcome:>11}  {self.check}: {self.detail}"


@dataclass
class Found:
    """What a rehearsal job left in its folder."""

    ranks: list[dict] = field(default_factory=list)
    """Each rank's record (the hook's)."""
    entries: list[dict] = field(default_factory=list)
    """The records of processes that read inputs but are no rank (an entry process that spawns its ranks, a
    framework-stopped run's driver)."""
    log: str = ""
    """The job's log."""
    result_file: Path | None = None
    """The run's merged MLLOG file, where it exists."""


def _records(folder: Path) -> list[dict]:
    from mlperf_wf.plan.plan import REHEARSAL_RANKS

    records = []
    for path in sorted((folder / REHEARSAL_RANKS).glob("rank-*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # a rank ended mid-write: it counts as missing
    return records


def _ranks_of(records: list[dict]) -> list[dict]:
    ranks = [record for record in records if record.get("rank") is not None]
    return sorted(ranks, key=lambda record: (record["rank"], record.get("node", "")))


def rank_records(folder: Path) -> list[dict]:
    """The hook's records of ranks in a rehearsal's run folder, ordered by rank."""
    return _ranks_of(_records(folder))


def job_log(folder: Path, steps: int) -> Path:
    """The log of a rehearsal's job of ``steps`` steps in ``rehearsal/<benchmark>`` (rule ``rehearse``)."""
    return folder / f"{steps}-steps.log"


def read(folder: Path, steps: int) -> Found:
    """``rehearsal/<benchmark>``'s records, job log and MLLOG file."""
    log = job_log(folder, steps)
    result = folder / "run" / "result.txt"
    text = log.read_text(errors="replace") if log.exists() else ""
    records = _records(folder / "run")
    # a record of no rank (``rank`` None): a process that read inputs but took no step (an entry process, a driver)
    entries = [record for record in records if "rank" in record and record["rank"] is None]
    return Found(_ranks_of(records), entries, text, result if result.is_file() else None)


def verdicts(found: Found, expected: Expected) -> list[Verdict]:
    """One verdict per check of the rehearsal (see the module docstring)."""
    return [
        _world(found.ranks, expected),
        _inputs(found.ranks + found.entries, expected),
        _jit(found, expected),
        _steps(found.ranks, expected),
        _mllog(found.result_file),
        _framework_exits(found.ranks, expected) if expected.stopped_by else _exits(found.ranks, expected),
    ]


def _world(ranks: list[dict], expected: Expected) -> Verdict:
    check = "world formed (ranks, nodes, local ranks, one rendezvous)"
    if not ranks:
        return Verdict(
            check, FAILED, "no rank recorded itself: no process took a training step, joined a torch.distributed world or entered an Estimator's train"
        )
    problems = []
    numbers = sorted(record["rank"] for record in ranks)
    if numbers != list(range(expected.ranks)):
        problems.append(f"ranks {_ranges(numbers)} recorded, {expected.ranks} expected (0-{expected.ranks - 1})")
    sizes = sorted({record["world_size"] for record in ranks})
    if sizes != [expected.ranks]:
        problems.append(f"world size {', '.join(map(str, sizes))}, expected {expected.ranks}")
    per_node = Counter(record["node"] for record in ranks)
    if len(per_node) != expected.ranked_nodes:
        problems.append(f"{len(per_node)} nodes ({', '.join(sorted(per_node))}), expected {expected.ranked_nodes}")
    for node in sorted(per_node):
        local = sorted(record["local_rank"] for record in ranks if record["node"] == node)
        if local != list(range(expected.per_node)):
            problems.append(f"{node} has local ranks {_ranges(local)}, expected 0-{expected.per_node - 1}")
    addresses = sorted({record["rendezvous"] for record in ranks})
    if len(addresses) != 1:
        problems.append(f"{len(addresses)} rendezvous addresses: {', '.join(address or 'none' for address in addresses)}")
    if problems:
        return Verdict(check, FAILED, "; ".join(problems))
    nodes = ", ".join(sorted(per_node))
    rendezvous = f"rendezvous {addresses[0]}"
    if not addresses[0].strip(":"):
        rendezvous = "no rendezvous (a world of one process)" if expected.ranks == 1 else "no rendezvous address recorded"
    local = f"local ranks 0-{expected.per_node - 1}" if expected.per_node > 1 else "local rank 0"
    detail = f"{expected.ranks} ranks on {expected.ranked_nodes} node(s) ({nodes}), {local} on each, {rendezvous}"
    return Verdict(check, PASSED, detail)


def _ranges(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers)) if numbers else "none"


def _inputs(processes: list[dict], expected: Expected) -> Verdict:
    """Over the ranks' records and those of entry processes that read the inputs before spawning their ranks."""
    check = "every input opened"
    if not processes:
        return Verdict(check, NOT_REACHED, "no rank recorded itself")
    counts = {role: sum(record.get("opened", {}).get(role, {}).get("count", 0) for record in processes) for role in expected.inputs}
    never = [role for role, count in counts.items() if count == 0]
    said = ", ".join(f"{role} {count} file(s)" for role, count in counts.items())
    who = "the ranks" + (" and their entry process" if any(record.get("rank") is None for record in processes) else "")
    if len(never) == len(counts) and all(record.get("framework") == "tensorflow" for record in processes):
        # TensorFlow reads through its own C++ file system (tf.io.gfile, TFRecordDataset, the checkpoint reader)
        return Verdict(check, NOT_REACHED, "TensorFlow reads its inputs through its own file system, which Python's open audit does not see")
    if never:
        return Verdict(check, FAILED, f"no process of the job opened a file of {', '.join(never)} (opened: {said}; files Python's open reads)")
    return Verdict(check, PASSED, f"opened by {who}: {said}")


def _jit(found: Found, expected: Expected) -> Verdict:
    check = "GPU kernels ran without a just-in-time compile warning"
    warned = [line.strip() for line in found.log.splitlines() if any(pattern.search(line) for pattern in JIT_WARNINGS)]
    if warned:
        return Verdict(check, FAILED, f"{len(warned)} line(s) of the job's log, first: {warned[0][:200]}")
    if not any(record.get("cuda") for record in found.ranks):
        return Verdict(check, NOT_REACHED, "no rank ran on a CUDA GPU")
    return Verdict(check, PASSED, "no JIT/PTX compile warning in the job's log")


def _steps(ranks: list[dict], expected: Expected) -> Verdict:
    check = f"time of the first {expected.steps} steps and peak GPU memory"
    stepped = [record for record in ranks if record.get("steps")]
    if not stepped:
        return Verdict(check, NOT_REACHED, "no rank took a training step")
    slowest = [max(times) for times in zip(*(record["step_seconds"] for record in stepped), strict=False)]
    times = ", ".join(f"{seconds:.2f} s" for seconds in slowest)
    peaks = [record["peak_gpu_memory_bytes"] for record in stepped if record.get("peak_gpu_memory_bytes") is not None]
    if peaks:
        memory = f"peak GPU memory {max(peaks) / 2**30:.2f} GiB (largest rank)"
    elif any(record.get("cuda") for record in stepped):
        memory = "peak GPU memory: not recorded (the framework reports none: TensorFlow before 2.5 has no get_memory_info)"
    else:
        memory = "peak GPU memory: not reached (no CUDA)"
    short = [record["rank"] for record in ranks if record.get("steps", 0) < expected.steps]
    detail = f"steps (slowest rank; the first from the process's start): {times}; {memory}"
    if short:
        return Verdict(check, FAILED, f"ranks {_ranges(short)} took fewer than {expected.steps} steps; {detail}")
    return Verdict(check, PASSED, detail)


def _mllog(result_file: Path | None) -> Verdict:
    from mlperf_wf.results.compliance import mllog_record

    check = "MLLOG start-of-run lines reached the run's log through its one writer"
    if result_file is None:
        return Verdict(check, FAILED, "the run wrote no MLLOG file (run/result.txt)")
    keys = Counter(record["key"] for record in map(mllog_record, result_file.read_text(errors="replace").splitlines()) if record and "key" in record)
    missing = [key for key in START_OF_RUN_KEYS if not keys[key]]
    twice = [f"{key} x{keys[key]}" for key in START_OF_RUN_KEYS if keys[key] > 1]
    if missing or twice:
        return Verdict(
            check,
            FAILED,
            "; ".join(filter(None, [f"missing {', '.join(missing)}" if missing else "", f"written more than once: {', '.join(twice)}" if twice else ""])),
        )
    submission = sorted(key for key in keys if key.startswith("submission_"))
    return Verdict(
        check, PASSED, f"{', '.join(START_OF_RUN_KEYS)} once each in {result_file}" + (f", with {len(submission)} submission_* keys" if submission else "")
    )


def _exits(ranks: list[dict], expected: Expected) -> Verdict:
    check = "every rank's exit status"
    failed = [f"rank {record['rank']} on {record['node']}: {record['status']} ({record['how']})" for record in ranks if record.get("status") != 0]
    missing = expected.ranks - len(ranks)
    if failed or missing > 0:
        lost = [f"{missing} rank(s) left no record (killed, or never started)"] if missing > 0 else []
        return Verdict(check, FAILED, "; ".join(failed + lost))
    return Verdict(check, PASSED, f"all {len(ranks)} ranks exited 0 after {expected.steps} steps")


def _framework_exits(ranks: list[dict], expected: Expected) -> Verdict:
    """Where the framework's own step limit ends the run, its driver ends the ranks (no rank's exit status is its
    own): every expected rank recorded its steps, and the driver's status is the job's, which Snakemake reports."""
    check = "every rank's exit status"
    short = [
        f"rank {record['rank']} on {record['node']} recorded {record.get('steps', 0)} of {expected.steps} steps ({record['how']})"
        for record in ranks
        if record.get("status") != 0 or record.get("steps", 0) < expected.steps
    ]
    missing = expected.ranks - len(ranks)
    if short or missing > 0:
        lost = [f"{missing} rank(s) left no record (killed before a step, or never started)"] if missing > 0 else []
        return Verdict(check, FAILED, "; ".join(short + lost))
    return Verdict(
        check,
        PASSED,
        f"all {len(ranks)} training ranks recorded {expected.steps} steps, then the framework's own step limit ({expected.stopped_by}) ended the run:"
        " its ranks are ended by its driver, whose exit status is the job's (Snakemake's, above)",
    )


def geometry_line(expected: Expected) -> str:
    """How the rehearsal's geometry differs from the campaign's (a smaller data-parallel world)."""
    if expected.rank_nodes:
        return _split_geometry_line(expected)
    processes = ""
    if expected.per_node != expected.gpus_per_node:
        processes = ", one process per node driving all its GPUs" if expected.per_node == 1 else f", {expected.per_node} processes per node"
    line = (
        f"rehearsal of {expected.benchmark}: {expected.nodes} node(s) x {expected.gpus_per_node} GPUs{processes} = {expected.ranks} ranks,"
        f" {expected.steps} training steps"
    )
    if expected.campaign_nodes and expected.campaign_nodes != expected.nodes:
        campaign = expected.campaign_nodes * expected.per_node
        line += (
            f" (the campaign's runs: {expected.campaign_nodes} nodes = {campaign} ranks; the rehearsal's data-parallel size is smaller,"
            f" its batch planned for {expected.ranks} ranks)"
        )
    return line


def _split_geometry_line(expected: Expected) -> str:
    """:func:`geometry_line` where only the training role's nodes take training steps, and what a step is where the
    framework's own step limit ends the run."""
    line = (
        f"rehearsal of {expected.benchmark}: {expected.nodes} node(s) x {expected.gpus_per_node} GPUs, of which the {expected.rank_nodes} training node(s)'"
        f" {expected.ranks} ranks take training steps, {expected.steps} training steps"
    )
    if expected.campaign_nodes and expected.campaign_nodes != expected.nodes:
        line += (
            f" (the campaign's runs: {expected.campaign_nodes} nodes = {expected.campaign_nodes * expected.gpus_per_node} GPUs; the rehearsal's"
            f" data-parallel size is smaller, its batch planned for {expected.nodes * expected.gpus_per_node} GPUs)"
        )
    if expected.stopped_by:
        line += f"; a training step is {expected.step or 'one step of the framework'}, ended by the framework's own step limit ({expected.stopped_by})"
    return line


# ---- the command ----


def load_settings(root: Path, configfiles: list[Path], overrides: list[str]) -> dict:
    """The campaign's config as Snakemake reads it (config.yaml, site.yaml, each ``--configfile``, each ``--config``),
    at full scale."""
    from mlperf_wf.config import yaml_files
    from mlperf_wf.config.config_check import parsed_config
    from mlperf_wf.config.workflow_config import command_line_value, merge_config
    from mlperf_wf.results.status import load_config

    config = load_config(root, [])
    for path in configfiles:
        try:
            merge_config(config, yaml_files.load(path.read_text()) or {})
        except OSError as err:
            raise ConfigError(f"--configfile {path}: cannot read it ({err.strerror})") from None
    for item in [*overrides, "scale=full"]:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--config {item!r}: expected KEY=VALUE, as given to snakemake --config")
        merge_config(config, {key: command_line_value(value)})
    return parsed_config(config).filled()


def expected_of(root: Path, settings: dict, benchmark: str, steps: int) -> Expected:
    """The rehearsal job as the plan makes it."""
    from mlperf_wf.config.checkout import project_root
    from mlperf_wf.plan import launch, plan

    planned = plan.load(settings, project_root(root), workdir=root)
    if benchmark not in planned.benchmarks:
        raise ConfigError(f"rehearse: benchmark {benchmark!r} does not exist; known: {', '.join(sorted(planned.benchmarks))}")
    own = planned.of(benchmark)
    nodes, gpus_per_node = own.rehearsal_geometry()
    settings_of = own.launch_settings()
    paths = launch.RunPaths(prepared=Path(own.prepared_dataset()), result_file=Path("result.txt"), inputs=own.run_paths(0).inputs)
    inputs = tuple(sorted(own.rehearsal_inputs(settings_of, paths)))
    stop = own.bench.full.rehearsal_stop
    return Expected(
        benchmark,
        nodes,
        gpus_per_node,
        steps,
        inputs,
        campaign_nodes=own.run_geometry()[0],
        ranks_per_node=own.rehearsal_ranks_per_node(steps),
        rank_nodes=own.rehearsal_rank_nodes() if own.bench.full.geometry.node_split else 0,
        stopped_by=own.rehearsal_stop(steps),
        step=stop.step if stop is not None else "",
    )


def snakemake_argv(
    root: Path, benchmarks: list[str], steps: int, profile: str | None, configfiles: list[Path], overrides: list[str], extra: list[str]
) -> list[str]:
    """The Snakemake invocation of a rehearsal: the campaign's profile and config, the rehearsals' targets, rerun each time."""
    from mlperf_wf.config.checkout import MARKER, project_root
    from mlperf_wf.plan.plan import REHEARSAL_ROOT

    argv = [sys.executable, "-m", "snakemake", "-s", str(project_root(root) / MARKER), "-d", str(root)]
    argv += [f"{REHEARSAL_ROOT}/{name}/{steps}-steps.done" for name in benchmarks]
    argv += ["--forcerun", "rehearse"]  # after the targets: it takes every later word up to the next option
    if profile:
        argv += ["--profile", profile]
    for path in configfiles:
        argv += ["--configfile", str(path)]
    argv += [*extra, "--config", "scale=full", *overrides]  # --config last: it takes every later word
    return argv


def rehearse(benchmarks: list[str], steps: int, profile: str | None, configfiles: list[Path], overrides: list[str], extra: list[str]) -> int:
    """Run the rehearsals through Snakemake (one job each, at once), then print each one's verdicts; 0 when none failed."""
    if steps < 1:
        raise ConfigError(f"rehearse --steps: {steps} is not allowed; give a whole number of training steps >= 1")
    from mlperf_wf.plan.plan import REHEARSAL_ROOT

    root = Path.cwd()
    settings = load_settings(root, configfiles, overrides)
    expected = {name: expected_of(root, settings, name, steps) for name in dict.fromkeys(benchmarks)}
    for name, planned in expected.items():
        print(geometry_line(planned), flush=True)
        # an earlier rehearsal's records must not pass for this one's, where its job does not start
        shutil.rmtree(root / REHEARSAL_ROOT / name / "run", ignore_errors=True)
        job_log(root / REHEARSAL_ROOT / name, steps).unlink(missing_ok=True)
    argv = snakemake_argv(root, list(expected), steps, profile, configfiles, overrides, extra)
    print(f"mlperf-wf rehearse: {shlex.join(argv[1:])}", flush=True)
    ran = subprocess.run(argv, check=False)
    failed = ran.returncode != 0
    for name, planned in expected.items():
        judged = verdicts(read(root / REHEARSAL_ROOT / name, steps), planned)
        print(f"\nrehearsal of {name} (job log: {job_log(Path(REHEARSAL_ROOT) / name, steps)}; Snakemake exited {ran.returncode}):")
        for verdict in judged:
            print(verdict.line())
        failed = failed or any(verdict.outcome == FAILED for verdict in judged)
    return 1 if failed else 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``mlperf-wf rehearse``'s arguments."""
    p.add_argument("benchmark", nargs="+", help="the benchmark(s) to rehearse (several: one job each, at once)")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS, help=f"training steps before the run is stopped (default {DEFAULT_STEPS})")
    p.add_argument("--profile", help="the campaign's Snakemake profile (e.g. slurm)")
    p.add_argument("--configfile", type=Path, action="append", default=[], help="the campaign's --configfile (repeatable)")
    p.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="the campaign's --config values (e.g. launcher=pyxis)")
    p.add_argument(
        "--snakemake", default="", metavar="ARGUMENTS", help="more snakemake arguments, in one quoted string after = (e.g. --snakemake='--latency-wait 60')"
    )


def run(args: argparse.Namespace) -> int:
    """``mlperf-wf rehearse``."""
    return rehearse(args.benchmark, args.steps, args.profile, args.configfile, args.config, shlex.split(args.snakemake))
