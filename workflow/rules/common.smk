# Helpers shared by the rules: configuration, registries, paths and commands.
# Only cheap work here: this file is evaluated again inside every cluster job.

import json
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir).parent / "src"))

from mlperf_wf import launch, prepare, registry, rules as mlperf_rules  # noqa: E402
from mlperf_wf.errors import ConfigError  # noqa: E402

validate(config, schema="../schemas/config.schema.yaml")

SCALE = config["scale"]
if SCALE == "tiny" and config["launcher"] not in ("auto", "local", "docker"):
    raise WorkflowError(
        f"config: launcher is {config['launcher']!r} but tiny-scale runs use local, auto or docker"
    )


def _load_benchmarks():
    """Every registered benchmark (any can be a target); the configured ones must fit `ruleset`."""
    try:
        known = registry.benchmark_names()
        unknown = [name for name in config["benchmarks"] if name not in known]
        if unknown:
            raise ConfigError(
                f"benchmarks: {unknown} not defined in config/benchmarks/; known: {', '.join(known)}"
            )
        loaded = {name: registry.load_benchmark(name) for name in known}
        for name in config["benchmarks"]:
            bench = loaded[name]
            mlperf_rules.resolve_ruleset(
                bench.submission_benchmark, bench.rulesets, config["ruleset"]
            )
        return loaded
    except ConfigError as err:
        raise WorkflowError(f"config: {err}") from None


BENCHMARKS = _load_benchmarks()


def _guard_results_scale():
    """Refuse to mix scales in results/: with mtime rerun triggers, tiny results would pass for full ones."""
    for name in BENCHMARKS:
        report_file = Path(f"results/{name}/report.json")
        if report_file.is_file():
            made_at = json.loads(report_file.read_text()).get("scale")
            if made_at and made_at != SCALE:
                message = (
                    f"results/{name} holds {made_at}-scale results but scale is {SCALE!r}; "
                    f"move them away first (mv results results.{made_at}), nothing is deleted"
                )
                if workflow.dryrun:
                    logger.warning(f"warning: {message}")
                else:
                    raise WorkflowError(message)


_guard_results_scale()


wildcard_constraints:
    benchmark="|".join(BENCHMARKS),
    scale=SCALE,
    shard=r"[A-Za-z0-9_.-]+",
    run=r"\d+",


def benchmark_def(name):
    """The registry entry of a configured benchmark."""
    return BENCHMARKS[name]


def benchmark_ruleset(name):
    """Ruleset of a benchmark's runs: config `ruleset`, or its newest round when that is `latest`."""
    bench = benchmark_def(name)
    try:
        return mlperf_rules.resolve_ruleset(
            bench.submission_benchmark, bench.rulesets, config["ruleset"]
        )
    except ConfigError as err:
        raise WorkflowError(f"config: {err}") from None


def wildcard_ruleset(wildcards):
    """`benchmark_ruleset` of the job's benchmark."""
    return benchmark_ruleset(wildcards.benchmark)


def package_ruleset():
    """Round of the submission package: the newest ruleset among the configured benchmarks."""
    return mlperf_rules.newest_ruleset(
        [benchmark_ruleset(name) for name in config["benchmarks"]]
    )


def dataset_def(dataset_id):
    """The registry entry of a dataset."""
    return registry.load_dataset(dataset_id)


def run_count(name):
    """Runs to make: config `runs`, or the count the rules require."""
    return config["runs"] or mlperf_rules.required_runs(
        benchmark_def(name).submission_benchmark
    )


def run_seed(run):
    """Seed of run `run` (distinct per run)."""
    return config["seed_base"] + int(run)


def dataset_dir(dataset_id):
    """Local folder of a downloaded dataset."""
    return f"resources/{SCALE}/datasets/{dataset_id}"


def verified_record(dataset_id):
    """Verification record of a dataset."""
    return f"resources/{SCALE}/verified/{dataset_id}.json"


def prepared_dir(name):
    """Prepared data of a benchmark: `shards/` (one cached job each) and `dataset/` (the tree its trainer reads)."""
    return f"resources/{SCALE}/prepared/{name}"


def prepared_dataset(name):
    """The tree a benchmark's trainer reads (links into its shards)."""
    return f"{prepared_dir(name)}/dataset"


# ---- download ----


def download_inputs(wildcards):
    """At tiny scale the download reads the generated mirror."""
    if wildcards.scale == "tiny":
        return {"mirror": f"resources/tiny/mirror/{wildcards.dataset}"}
    return {}


def download_source_args(wildcards):
    """`--uri/--md5` of a dataset at this scale: the tiny mirror, or the registry's R2 URLs.

    An external (non-R2) dataset gets none, so `mlperf-wf download` stops with its instructions.
    """
    if wildcards.scale == "tiny":
        metadata = f"file:resources/tiny/mirror/{wildcards.dataset}/metadata/{wildcards.dataset}"
        return f"--uri {metadata}.uri --md5 {metadata}.md5"
    source = dataset_def(wildcards.dataset).source
    if source.protocol != "r2":
        return ""
    return f"--uri {source.uri} --md5 {source.md5}"


# ---- preprocess ----


def preprocess_inputs(wildcards):
    """Every dataset of the benchmark, and its verification record."""
    bench = benchmark_def(wildcards.benchmark)
    inputs = {}
    for role, dataset_id in bench.datasets.items():
        inputs[role] = dataset_dir(dataset_id)
        inputs[f"{role}_verified"] = verified_record(dataset_id)
    return inputs


def shard_names(name):
    """Shards of a benchmark's preparation at this scale (its preprocessing module declares them)."""
    return prepare.shard_names(benchmark_def(name).preprocess, SCALE)


def preprocess_shards(wildcards):
    """Every shard folder of the benchmark, the inputs of its dataset tree."""
    return [
        f"{prepared_dir(wildcards.benchmark)}/shards/{shard}"
        for shard in shard_names(wildcards.benchmark)
    ]


def _shard_resources(wildcards):
    return prepare.shard_resources(
        benchmark_def(wildcards.benchmark).preprocess, wildcards.shard, SCALE
    )


def shard_mem_mb(wildcards):
    return _shard_resources(wildcards)["mem_mb"]


def shard_runtime(wildcards):
    return _shard_resources(wildcards)["runtime"]


def preprocess_role_args(wildcards):
    """`--input role=folder` arguments of the preprocess command."""
    bench = benchmark_def(wildcards.benchmark)
    return " ".join(
        f"--input {role}={dataset_dir(dataset_id)}"
        for role, dataset_id in bench.datasets.items()
    )


# ---- train ----


def train_inputs(wildcards):
    """Prepared data, and the verified checkpoint of a benchmark that fine-tunes one."""
    bench = benchmark_def(wildcards.benchmark)
    inputs = {"prepared": prepared_dataset(wildcards.benchmark)}
    if "checkpoint" in bench.datasets:
        checkpoint_id = bench.datasets["checkpoint"]
        inputs["model"] = dataset_dir(checkpoint_id)
        inputs["model_verified"] = verified_record(checkpoint_id)
    return inputs


def launch_settings(name):
    """Launcher, geometry (registry, or the `full_geometry` override) and pass-through environment of a benchmark."""
    geometry = benchmark_def(name).full.geometry
    override = config["full_geometry"].get(name, {})
    launcher = config["launcher"]
    if launcher == "auto":
        launcher = "local" if SCALE == "tiny" else "docker"
    return launch.Launch(
        launcher=launcher,
        nodes=int(override.get("nodes", geometry.nodes)),
        gpus_per_node=int(override.get("gpus_per_node", geometry.gpus_per_node)),
        env_passthrough=tuple(config["env_passthrough"]),
        tiny_processes=config["tiny_processes"],
    )


def train_command(wildcards, input, output):
    """The command of one run: the tiny CPU trainer, or the reference in its container."""
    run = int(wildcards.run)
    seed = run_seed(run)
    settings = launch_settings(wildcards.benchmark)
    if SCALE == "tiny":
        sub = config["submission"]
        args = [
            "--benchmark", wildcards.benchmark, "--run-index", str(run), "--seed", str(seed),
            "--data", input.prepared, "--result", output.result,
            "--ruleset", benchmark_ruleset(wildcards.benchmark), "--division", config["division"],
            "--org", sub["org"], "--platform", sub["platform"], "--status", sub["status"],
            "--threads", str(config["tiny_threads"]),
        ]  # fmt: skip
        if "model" in input.keys():
            args += ["--checkpoint", input.model]
        if settings.launcher == "docker":
            # The image gives a userland; this host's venv, Python and project come in read-only.
            host = [
                Path(sys.prefix),
                Path(sys.base_prefix),
                Path(workflow.basedir).parent,
            ]
            cache = launch.output_cache_dir()
            if cache:  # cached shards are links into it
                host.append(cache)
            argv = launch.tiny_container(
                args, settings, config["tiny_image"], Path.cwd(), host
            )
            return launch.shell_join(argv)
        return launch.shell_join(launch.tiny_command(args, settings))
    paths = launch.RunPaths(
        data=Path(input.prepared),
        checkpoint_dir=Path(input.model) if "model" in input.keys() else None,
        result_file=Path(output.result),
        output_cache=launch.output_cache_dir(),
    )
    command = launch.full_scale(
        benchmark_def(wildcards.benchmark), run, seed, paths, settings
    )
    # `|| exit 2` and not `&&`: a failed check must stop the whole line, which may hold several commands
    return f"mlperf-wf require-pinned --benchmark {wildcards.benchmark} || exit 2; {command}"


def train_launcher(wildcards):
    """Backend that starts the run (recorded in its provenance)."""
    return launch_settings(wildcards.benchmark).launcher


def train_image(wildcards):
    """Container image of the run (empty for a run on the host)."""
    if SCALE == "tiny":
        return config["tiny_image"] if train_launcher(wildcards) == "docker" else ""
    return benchmark_def(wildcards.benchmark).full.container.reference


def train_threads(wildcards):
    """CPU threads a run occupies locally."""
    if SCALE == "tiny":
        return config["tiny_threads"] * config["tiny_processes"]
    return 1


def train_resources(name):
    """Scheduler resources of one run: the benchmark's GPUs, nodes and time at full scale.

    Launchers start once per node (``per_node``) or once per GPU (``per_gpu``); with
    several nodes or per-GPU tasks, ``mpi`` tells the SLURM jobstep not to wrap the
    job in ``srun -n1``, because the job's own srun places the tasks.
    """
    if SCALE == "tiny":
        return {"runtime": 30, "mem_mb": 4000, "cpus_per_task": train_threads(None)}
    bench = benchmark_def(name)
    settings = launch_settings(name)
    tasks_per_node = (
        settings.gpus_per_node if bench.full.process_model == "per_gpu" else 1
    )
    resources = {
        "runtime": bench.full.geometry.walltime_minutes,
        "nodes": settings.nodes,
        "gres": f"gpu:{settings.gpus_per_node}",
        "tasks_per_gpu": 0,
        "cpus_per_gpu": bench.full.geometry.cpus_per_gpu,
    }
    if settings.nodes * tasks_per_node > 1:
        resources.update(mpi="srun", tasks=settings.nodes * tasks_per_node)
    return resources


def train_runtime(wildcards):
    return train_resources(wildcards.benchmark)["runtime"]


def train_mem_mb(wildcards):
    return train_resources(wildcards.benchmark).get("mem_mb", 0)


def train_nodes(wildcards):
    return train_resources(wildcards.benchmark).get("nodes", 1)


def train_gres(wildcards):
    return train_resources(wildcards.benchmark).get("gres", "")


def train_tasks(wildcards):
    return train_resources(wildcards.benchmark).get("tasks", 1)


def train_tasks_per_gpu(wildcards):
    return train_resources(wildcards.benchmark).get("tasks_per_gpu", 0)


def train_cpus_per_gpu(wildcards):
    return train_resources(wildcards.benchmark).get("cpus_per_gpu", 0)


def train_mpi(wildcards):
    return train_resources(wildcards.benchmark).get("mpi")


# ---- report ----


def run_indices(name):
    """Indices of the runs of a benchmark."""
    return range(run_count(name))


def report_results(wildcards):
    """Result files of every run."""
    return [
        f"results/{wildcards.benchmark}/runs/{i}/result.txt"
        for i in run_indices(wildcards.benchmark)
    ]


def report_verdicts(wildcards):
    """Compliance verdicts of every run."""
    return [
        f"results/{wildcards.benchmark}/runs/{i}/compliance.json"
        for i in run_indices(wildcards.benchmark)
    ]


def report_provenance(wildcards):
    """Provenance records of every run."""
    return [
        f"results/{wildcards.benchmark}/runs/{i}/provenance.json"
        for i in run_indices(wildcards.benchmark)
    ]


def report_args(wildcards, input):
    """`--result` / `--compliance` / `--provenance` of each run, for the report command."""
    return " ".join(
        f"--result {result} --compliance {verdict} --provenance {made_with}"
        for result, verdict, made_with in zip(
            input.results, input.verdicts, input.provenance
        )
    )


def all_reports():
    """Report of every configured benchmark."""
    return [f"results/{name}/report.json" for name in config["benchmarks"]]


def all_targets():
    """Every configured benchmark's report, run logs and compliance verdicts.

    The run files are targets too, not only the report's inputs: Snakemake
    does not rebuild a deleted intermediate file while the files made from it
    are up to date, and a user who deletes a run's log wants that run redone.
    """
    targets = ["results/summary.csv"]
    for name in config["benchmarks"]:
        targets.append(f"results/{name}/report.json")
        targets.append(f"results/{name}/plots/time_to_train.png")
        targets.append(f"results/{name}/plots/convergence.png")
        for i in run_indices(name):
            targets.append(f"results/{name}/runs/{i}/result.txt")
            targets.append(f"results/{name}/runs/{i}/compliance.json")
    return targets
