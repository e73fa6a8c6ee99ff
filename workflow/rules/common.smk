# Helpers shared by the rules: configuration, registries, paths and commands.
# Only cheap work here: this file is evaluated again inside every cluster job.

import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir).parent / "src"))

from mlperf_wf import launch, registry, rules as mlperf_rules  # noqa: E402
from mlperf_wf.errors import ConfigError  # noqa: E402

validate(config, schema="../schemas/config.schema.yaml")

SCALE = config["scale"]


def _load_benchmarks():
    try:
        loaded = {name: registry.load_benchmark(name) for name in config["benchmarks"]}
        for bench in loaded.values():
            mlperf_rules.check_benchmark_in_ruleset(
                bench.submission_benchmark, config["ruleset"]
            )
        return loaded
    except ConfigError as err:
        raise WorkflowError(f"config: {err}") from None


BENCHMARKS = _load_benchmarks()


wildcard_constraints:
    benchmark="|".join(BENCHMARKS),
    scale=SCALE,
    run=r"\d+",


def benchmark_def(name):
    """The registry entry of a configured benchmark."""
    return BENCHMARKS[name]


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
    """Prepared data of a benchmark."""
    return f"resources/{SCALE}/prepared/{name}"


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


def preprocess_role_args(wildcards):
    """`--input role=folder` arguments of the preprocess command."""
    bench = benchmark_def(wildcards.benchmark)
    return " ".join(
        f"--input {role}={dataset_dir(dataset_id)}"
        for role, dataset_id in bench.datasets.items()
    )


# ---- train ----


def train_inputs(wildcards):
    """Prepared data and the verified checkpoint."""
    bench = benchmark_def(wildcards.benchmark)
    checkpoint_id = bench.datasets["checkpoint"]
    return {
        "prepared": prepared_dir(wildcards.benchmark),
        "model": dataset_dir(checkpoint_id),
        "model_verified": verified_record(checkpoint_id),
    }


def train_command(wildcards, input, output):
    """The command of one run: the tiny CPU trainer, or the reference container."""
    run = int(wildcards.run)
    seed = run_seed(run)
    if SCALE == "tiny":
        sub = config["submission"]
        return (
            f"mlperf-wf train --benchmark {wildcards.benchmark} --run {run} --seed {seed}"
            f" --data {input.prepared} --checkpoint {input.model} --result {output.result}"
            f" --ruleset {config['ruleset']} --division {config['division']}"
            f" --org {shlex.quote(sub['org'])} --platform {shlex.quote(sub['platform'])} --status {sub['status']}"
            f" --threads {config['tiny_threads']}"
        )
    paths = launch.RunPaths(
        data=Path(input.prepared),
        checkpoint_dir=Path(input.model),
        result_file=Path(output.result),
    )
    argv = launch.full_scale_argv(benchmark_def(wildcards.benchmark), run, seed, paths)
    return (
        f"mlperf-wf require-pinned --benchmark {wildcards.benchmark} && "
        + launch.shell_join(argv)
    )


def train_threads(wildcards):
    """CPU threads a run occupies locally."""
    return config["tiny_threads"] if SCALE == "tiny" else 1


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


def report_args(wildcards, input):
    """`--result` / `--compliance` pairs of the report command."""
    return " ".join(
        f"--result {result} --compliance {verdict}"
        for result, verdict in zip(input.results, input.verdicts)
    )


def all_reports():
    """Report of every configured benchmark."""
    return [f"results/{name}/report.json" for name in BENCHMARKS]


def all_targets():
    """Every configured benchmark's report, run logs and compliance verdicts.

    The run files are targets too, not only the report's inputs: Snakemake
    does not rebuild a deleted intermediate file while the files made from it
    are up to date, and a user who deletes a run's log wants that run redone.
    """
    targets = ["results/summary.csv"]
    for name in BENCHMARKS:
        targets.append(f"results/{name}/report.json")
        targets.append(f"results/{name}/plots/time_to_train.png")
        targets.append(f"results/{name}/plots/convergence.png")
        for i in run_indices(name):
            targets.append(f"results/{name}/runs/{i}/result.txt")
            targets.append(f"results/{name}/runs/{i}/compliance.json")
    return targets
