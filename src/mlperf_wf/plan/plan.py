"""The plan: what every job of the workflow reads, writes and runs, for a configuration.

``Plan`` holds what the campaign shares (its settings, scale, datasets, packages); ``Plan.of(name)`` is the
``BenchmarkPlan`` of one benchmark, its definition looked up once, which turns (run, workflow config) into each job's
paths, command line, scheduler resources, mounts and environment, at either scale. The Snakefile's
``common.smk`` only hands these to the rules, so everything that depends on the scale or
the launcher is here, typed and tested without Snakemake (``tests/plan/test_plan.py``).

Scales never share a results folder: full-scale results are ``results/<benchmark>/``
(the paths users type, e.g. ``results/llama2_70b_lora/report.json``), tiny-scale
results ``results/tiny/<benchmark>/``; datasets are ``resources/<scale>/`` and job logs
``logs/<scale>/``. A tiny run can therefore never be taken for a full one, and every
command works in a folder that holds the other scale's results.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import shlex
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pydantic import ValidationError

from mlperf_wf.acquire import prepare
from mlperf_wf.config import hyperparameters, mlperf_rules, registry, system
from mlperf_wf.config.registry import SHARDS_ROLE, BenchmarkDef, Container
from mlperf_wf.config.system import Hardware
from mlperf_wf.config.workflow_config import GeometryOverride, WorkflowConfig
from mlperf_wf.errors import ConfigError, describe_validation_error
from mlperf_wf.kinds import DEFAULT_PREPARATION, Scale
from mlperf_wf.plan import launch, published, sizing
from mlperf_wf.run import identity, job_spec, launchers, node_check
from mlperf_wf.run.job_spec import JobSpec
from mlperf_wf.run.launchers import merged_after_the_run  # noqa: F401 - named here for the plan's callers

DOWNLOAD_CONNECTIONS = 4
"""Files a download job fetches at once: network-bound, so not the cores Snakemake gives the job (a dry run or a
two-core machine gives one; the job still asks its scheduler for four)."""
TINY_RESULTS = "results/tiny"
FULL_RESULTS = "results"
TINY_LAUNCHERS = ("local", "docker")
TINY_PLATFORM = "cpu-tiny"
"""The tiny tier's system (``config/systems/cpu-tiny.yaml``): a full-scale run refuses to log it."""
TINY_RUN_RESOURCES = {"runtime": 30, "mem_mb": 4000}
"""A tiny run: minutes on a CPU core, a few GB."""
FETCHED_DIR = "resources/full/fetched"
"""Where a fiftyone-protocol dataset's fetch (the reference's own script) writes, one folder per dataset id."""
REHEARSAL_ROOT = "rehearsal"
"""Where ``mlperf-wf rehearse`` runs a benchmark's full-scale job (one folder per benchmark): no campaign result."""
REHEARSAL_NODES = 2
"""Nodes of a rehearsal at most: enough to form a world across nodes (one-node benchmarks keep one)."""
REHEARSAL_STEPS_VARIABLE = "MLPERF_WF_REHEARSAL_STEPS"
"""Training steps after which the rehearsal hook stops every rank (``containers/hooks/mlperf_wf_rehearsal_steps.py``)."""
REHEARSAL_RANKS_VARIABLE = "MLPERF_WF_REHEARSAL_RANKS"
"""The folder, as the job sees it, where the rehearsal hook writes one record per rank."""
REHEARSAL_INPUTS_VARIABLE = "MLPERF_WF_REHEARSAL_INPUTS"
REHEARSAL_STOP_VARIABLE = "MLPERF_WF_REHEARSAL_STOP"
"""``framework`` where the framework's own step limit ends the rehearsal (``full.rehearsal_stop``): the hook only
counts and records each rank."""
"""``role=folder,...``: the input folders, as the job sees them, whose opened files the hook records."""
REHEARSAL_RANKS = "rehearsal-ranks"
"""The rank records' folder in a rehearsal's run folder."""
NODE_CHECK_SUFFIX = "-node-check"
"""Beside a one-off job's folder (``made_in_image_dir``), the folder of its node checks, one per attempt."""


@dataclass(frozen=True)
class TrainJob:
    """Everything the train rule needs for one run."""

    command: str
    """The shell command of the run."""
    launcher: str
    """Backend that starts it (recorded in provenance)."""
    image: str
    """Container image ('' for a run on the host)."""
    threads: int
    """CPU threads it occupies on the job's host."""
    resources: job_spec.Resources
    """Scheduler request (the spec's)."""

    def as_dict(self) -> dict:
        """The job as plain data (the golden plans' form)."""
        return {**{name: getattr(self, name) for name in ("command", "launcher", "image", "threads")}, "resources": self.resources.model_dump()}


def train_job_of(spec: JobSpec) -> TrainJob:
    """What the rules read of a job spec: its shell line (:func:`mlperf_wf.run.launchers.job_line`), launcher, image,
    threads and scheduler request."""
    image = spec.image.reference if spec.image is not None else ""
    return TrainJob(
        command=launchers.job_line(spec),
        launcher=spec.launcher,
        image=image,
        threads=spec.threads,
        resources=spec.resources,
    )


TINY_JOB_MESSAGES = {
    "generate_tiny_mirror": "generate the tiny mirror of {wildcards.dataset}",
    "download": "download {wildcards.dataset} from its tiny mirror",
    "verify": "verify {wildcards.dataset}",
    "preprocess_shard": "prepare {wildcards.benchmark} shard {wildcards.shard}",
    "assemble_prepared": "assemble the prepared dataset of {wildcards.benchmark}",
    "train": "train {wildcards.benchmark} run {wildcards.run} (log {log})",
    "check_compliance": "check {wildcards.benchmark} run {wildcards.run} (seed {params.seed}) against the {params.ruleset} rules",
    "campaign_identity": "record the campaign identity of {wildcards.benchmark}: {output.identity}",
    "report": "report {wildcards.benchmark}: {output.report}",
    "plot_benchmark": "plot {wildcards.benchmark}'s runs",
    "benchmark_page": "write the report page of {wildcards.benchmark}",
    "package": "package and check the {wildcards.ruleset} {wildcards.division} submission: {output.check}",
    "summarize": "summarize every benchmark: {output.csv}",
    "all": "every target is made",
}
"""What a tiny run prints for each job of a rule, in one line (Snakemake's ``message``, formatted with the job's
wildcards, params and files); at full scale each job keeps Snakemake's block (files, resources) and its command."""


class Plan:
    """Paths, commands and resources of every job for one configuration (see the module docstring)."""

    def __init__(self, settings: WorkflowConfig, project_root: Path, workdir: Path | None = None, output_cache: Path | None = None) -> None:
        self.settings = settings
        self.scale = settings.scale
        self.project_root = project_root
        self.workdir = workdir or Path.cwd()
        self.output_cache = output_cache
        self.results_root = TINY_RESULTS if settings.scale == Scale.TINY else FULL_RESULTS
        self.logs_root = f"logs/{settings.scale}"
        self.benchmarks = {name: registry.load_benchmark(name) for name in registry.benchmark_names()}
        self.power = settings.power
        self._views: dict[str, BenchmarkPlan] = {}
        self._check_settings()

    # ---- checks at parse time ----

    def _check_settings(self) -> None:
        s = self.settings
        known = sorted(self.benchmarks)
        unknown = [name for name in s.benchmarks if name not in self.benchmarks]
        if unknown:
            raise ConfigError(f"config: benchmarks: {unknown} has no folder in src/mlperf_wf/benchmarks/; known: {', '.join(known)}")
        if s.scale == Scale.TINY and s.launcher not in ("auto", *TINY_LAUNCHERS):
            raise ConfigError(f"config: launcher is {s.launcher!r} but tiny-scale runs use auto, {' or '.join(TINY_LAUNCHERS)}")
        for key in (
            "full_geometry",
            "full_container",
            "tiny_hyperparameters",
            "full_arguments",
            "full_hyperparameters",
            "full_workdir",
            "full_mounts",
            "full_scratch",
            "reference_logs",
            "preparation",
        ):
            for name in getattr(s, key):
                if name not in self.benchmarks:
                    raise ConfigError(f"config: {key}.{name}: names no benchmark; known: {', '.join(known)}")
        for name, folder in s.reference_logs.items():
            if not Path(folder).is_dir():
                raise ConfigError(f"config: reference_logs.{name}: {folder!r} is not a folder; give a folder of :::MLLOG logs (searched recursively)")
        for name in s.benchmarks:
            self.of(name).ruleset()
        for name, way in s.preparation.items():
            prepare.check_preparation(self.bench(name), way, key=f"config: preparation.{name}")
        for name in self.benchmarks:
            own = self.of(name)
            own.scratch_sizes()
            own.container()
            own.hyperparameters()
            own.extra_mounts()
            launch.override_arguments(own.bench, own.bench.full.command, own.site_arguments())

    # ---- rules and runs ----

    def bench(self, name: str) -> BenchmarkDef:
        """The definition of benchmark ``name``."""
        return self.benchmarks[name]

    def of(self, name: str) -> BenchmarkPlan:
        """The plan of benchmark ``name`` (one per benchmark and plan, so that what it caches is computed once)."""
        if name not in self._views:
            self._views[name] = BenchmarkPlan(self, self.bench(name))
        return self._views[name]

    def rounds_in_words(self) -> str:
        """Each configured benchmark's round and division as its runs are checked (the report's front page)."""
        return "; ".join(f"{own.name}: ruleset {own.ruleset()}, {own.division()} division" for own in map(self.of, self.settings.benchmarks))

    def system_description(self) -> Path:
        """``config/systems/<submission.platform>.yaml``: the package's system JSON is made from it."""
        return self.workdir / self.system_description_input()

    def system_description_input(self) -> str:
        """:meth:`system_description` as the package rule's input: relative to the workflow folder, so that the
        campaign folder moved or copied elsewhere keeps the same set of inputs (Snakemake reruns a job whose set changed)."""
        return str(registry.config_dir(Path()) / "systems" / f"{self.settings.submission.platform}.yaml")

    # ---- what Snakemake prints ----

    def job_message(self, rule: str) -> str | None:
        """The one line a tiny run prints for each job of ``rule``; None at full scale (Snakemake's job block)."""
        return TINY_JOB_MESSAGES[rule] if self.scale == Scale.TINY else None

    def shows_shell_commands(self, asked: bool) -> bool:
        """Whether jobs' shell commands are printed: at full scale (the dry run is the plan's review), and at tiny
        scale only when ``-p`` was given on the command line (``asked``)."""
        return self.scale == Scale.FULL or asked

    # ---- the summary and the packages: every finished benchmark of the scale ----

    @functools.cached_property
    def finished_elsewhere(self) -> dict[str, tuple[str, str]]:
        """Benchmarks this invocation does not run whose report is in the scale's results (an earlier campaign in the
        folder): name -> the ruleset and division of its report. The summary and the packages keep them; nothing of
        theirs is planned again. A report that cannot be read is left out, with a warning."""
        found = {}
        for name in registry.benchmark_names():
            path = self.workdir / self.of(name).report()
            if name in self.settings.benchmarks or not path.is_file():
                continue
            try:
                report = json.loads(path.read_text())
                found[name] = (str(report["ruleset"]), str(report["division"]))
            except (OSError, ValueError, KeyError, TypeError) as err:
                print(f"mlperf-wf: {path}: not read as a report ({err!r}): left out of the summary and packages", file=sys.stderr)
        return found

    def finished_reports(self) -> list[str]:
        """Reports of :attr:`finished_elsewhere`, by name."""
        return [self.of(name).report() for name in sorted(self.finished_elsewhere)]

    def finished_digests(self, reports: Iterable[str]) -> str:
        """``path:sha256`` of each finished report: a parameter of the jobs that read them, so that one made again
        (its benchmark's campaign ran again) makes the summary and its package again."""
        return " ".join(f"{path}:{hashlib.sha256((self.workdir / path).read_bytes()).hexdigest()[:16]}" for path in reports)

    def package_groups(self) -> dict[str, tuple[list[str], list[str]]]:
        """``<ruleset>-<division>`` -> (reports this invocation makes, finished reports) of each package: a package is
        one round and one division, so benchmarks that differ in ruleset or division have one each."""
        groups: dict[str, tuple[list[str], list[str]]] = {}
        for own in map(self.of, self.settings.benchmarks):
            groups.setdefault(f"{own.ruleset()}-{own.division()}", ([], []))[0].append(own.report())
        for name, (ruleset, division) in sorted(self.finished_elsewhere.items()):
            groups.setdefault(f"{ruleset}-{division}", ([], []))[1].append(self.of(name).report())
        return dict(sorted(groups.items()))

    def package_group(self, group: str) -> tuple[list[str], list[str]]:
        """(reports this invocation makes, finished reports) of the package of ``group``; a group no benchmark is in
        is one line naming the ones there are."""
        groups = self.package_groups()
        if group not in groups:
            raise ConfigError(
                f"package {group!r}: no benchmark of this invocation or finished in {self.results_root} is checked under that "
                f"ruleset and division; packages: {', '.join(groups) or 'none'}"
            )
        return groups[group]

    def package_dir(self, group: str) -> str:
        """Where the package of ``group`` (``<ruleset>-<division>``) is built: ``<org>/`` inside is what is uploaded."""
        return f"{self.results_root}/submission/{group}/package"

    def package_check(self, group: str) -> str:
        """The checkers' verdicts on the package of ``group``."""
        return f"{self.results_root}/submission/{group}/package_check.json"

    def seed(self, run: int) -> int:
        """Seed of run ``run`` (distinct per run)."""
        return self.settings.seed_base + run

    @functools.cached_property
    def system_hardware(self) -> Hardware | None:
        """What a node of the full-scale system has (``config/systems/<submission.platform>.yaml``'s ``hardware``, written
        by ``mlperf-wf system probe``); None at tiny scale, or where the description is missing or not probed (the plan
        then assumes the reference's system)."""
        path = self.system_description()
        if self.scale != Scale.FULL or not path.is_file():
            return None
        return system.read_system(path).hardware

    # ---- paths ----

    def dataset_dir(self, dataset_id: str) -> str:
        """Local folder of a downloaded dataset."""
        return f"resources/{self.scale}/datasets/{dataset_id}"

    def verified_record(self, dataset_id: str) -> str:
        """Verification record of a dataset."""
        return f"resources/{self.scale}/verified/{dataset_id}.json"

    def verified_stamps(self, dataset_id: str) -> str:
        """What each file of a dataset looked like when verify last read it (not a declared output: it survives a
        rerun, so verifying again reads only changed files, and a preparation checks the dataset against it)."""
        return f"resources/{self.scale}/verified/{dataset_id}.stamps.json"

    def target_problem(self, targets: Iterable[str]) -> str | None:
        """One line for the targets under ``results/`` that this invocation cannot make, where Snakemake would only say
        MissingRuleException: a folder that names no benchmark (a typo; the known names listed), or the other
        scale's path (``results/tiny/...`` is the tiny tier's, ``results/<benchmark>/...`` the full scale's)."""
        known = registry.benchmark_names()
        shared = {"submission", "summary.csv", "summary.png", "summary.svg"}
        unknown, other_scale = [], []
        for target in targets:
            parts = Path(target).parts
            if len(parts) < 2 or parts[0] != FULL_RESULTS:
                continue
            tiny = parts[1] == Path(TINY_RESULTS).name
            folder = parts[2] if tiny and len(parts) > 2 else parts[1]
            if folder not in known and folder not in shared:
                unknown.append(f"{target} ({folder!r})")
            elif tiny != (self.scale == Scale.TINY):
                other_scale.append(target)
        if unknown:
            return f"target {', '.join(unknown)} names no benchmark; known: {', '.join(known)}"
        if other_scale:
            wanted = "full" if self.scale == Scale.TINY else "tiny"
            return (
                f"target {', '.join(other_scale)} is a {wanted}-scale path ({FULL_RESULTS}/<benchmark>/... at full scale, "
                f"{TINY_RESULTS}/<benchmark>/... at tiny scale) and this invocation plans scale={self.scale}: add --config scale={wanted}"
            )
        return None

    # ---- download ----

    def download_inputs(self, dataset_id: str) -> dict[str, str]:
        """At tiny scale the download reads the generated mirror."""
        return {"mirror": f"resources/tiny/mirror/{dataset_id}"} if self.scale == Scale.TINY else {}

    def download_source_args(self, dataset_id: str) -> str:
        """Where ``mlperf-wf download`` fetches a dataset from: the tiny mirror, or the catalog's source.

        R2: ``--uri/--md5``. FiftyOne: ``--source`` (the mirror, or the folder the reference's fetch wrote) and whose
        counts and checksums apply (``--expect``). Hugging Face Hub: ``--endpoint`` (the mirror is ``file:`` its folder) and, at full scale,
        ``--revision``, so that a new pinned commit changes the job's command and Snakemake reruns it. An external
        dataset gets none, so ``mlperf-wf download`` stops with its instructions.
        """
        source = registry.load_dataset(dataset_id).source
        mirror = f"resources/tiny/mirror/{dataset_id}"
        if source.protocol == "fiftyone":
            # The tiny mirror is a FiftyOne folder itself; at full scale the user's fetch wrote FETCHED_DIR/<id>.
            return f"--source file:{mirror} --expect tiny" if self.scale == Scale.TINY else f"--source file:{FETCHED_DIR}/{dataset_id} --expect catalog"
        if source.protocol == "huggingface":
            return f"--endpoint file:{mirror}" if self.scale == Scale.TINY else f"--endpoint {source.endpoint} --revision {source.revision}"
        if self.scale == Scale.TINY:
            metadata = f"file:{mirror}/metadata/{dataset_id}"
            return f"--uri {metadata}.uri --md5 {metadata}.md5"
        return f"--uri {source.uri} --md5 {source.md5}" if source.protocol == "r2" else ""

    # ---- full-scale launches: a run's, a rehearsal's, a one-off job's of an image ----

    def _full_scale_spec(
        self,
        bench: BenchmarkDef,
        run: int,
        seed: int,
        paths: launch.RunPaths,
        settings: launch.Launch,
        node_check_step: job_spec.NodeCheck | None,
        sampled: bool,
    ) -> JobSpec:
        """The spec of a full-scale launch of ``bench``'s image (a run, or a one-off job that makes an input): the
        preflight, an emptied job folder, the node check where given, the launch, the scratch removal, the MLLOG merge;
        ``sampled``: with the power sampler where the config asks for it."""
        bench = self.of(bench.name).run_definition()  # with its image variant's vendor and environment, where it takes one
        container = self.of(bench.name).container()
        spec = launch.full_scale_spec(bench, run, seed, paths, settings, image=container)
        on_host = settings.launcher == "local"
        steps = spec.steps.model_copy(
            update={
                "preflight": job_spec.Preflight(
                    benchmark=bench.name, image=None if on_host else container.reference, platform=self.settings.submission.platform
                ),
                "fresh_run_folder": str(paths.result_file.parent),
                "node_check": node_check_step,
                "remove_scratch": str(paths.result_file.parent / "scratch") if bench.full.scratch else None,
                "power": self.power if sampled and self.power.enabled else None,
                "mllog_merge": str(paths.result_file),
            }
        )
        tasks = spec.geometry.tasks
        resources = job_spec.Resources(
            runtime=settings.walltime_minutes,
            nodes=settings.nodes,
            gres=f"gpu:{settings.gpus_per_node}",
            tasks=tasks,
            cpus_per_gpu=bench.full.geometry.cpus_per_gpu,
            mem_mb=self.of(bench.name).host_memory_gb() * 1024,
            # Several launchers or ranks: the job's own srun places them, so the jobstep must not wrap it in
            # `srun -n1` (the executor refuses `mpi` for one task; pyxis's srun then overlaps the jobstep's step).
            mpi="srun" if tasks > 1 else None,
        )
        return spec.model_copy(update={"steps": steps, "resources": resources})

    # ---- inputs a benchmark's own image makes (full.made_in_image) ----

    @functools.cached_property
    def made_in_image(self) -> dict[str, tuple[str, str]]:
        """Dataset id -> (benchmark, role) of each input a one-off job of a benchmark's image makes, at full scale (the
        tiny tier mirrors and downloads its stand-in like any dataset's)."""
        if self.scale == Scale.TINY:
            return {}
        return {dataset_id: (name, role) for name in self.benchmarks for dataset_id, role in self.bench(name).datasets_made_in_image().items()}

    def made_in_image_dir(self, dataset_id: str) -> str:
        """The one-off job's own folder (its mllog, scratch, home): never a run's, so nothing it logs is scored."""
        return f"resources/{self.scale}/made_in_image/{dataset_id}"

    def image_job_inputs(self, dataset_id: str) -> dict[str, str]:
        """What the one-off job reads: the runs' inputs but the one it makes."""
        name, role = self.made_in_image_of(dataset_id)
        return {key: value for key, value in self.of(name).train_inputs().items() if key not in (role, f"{role}_verified")}

    def image_job_remade_by(self, dataset_id: str) -> list[str]:
        """The keys of :meth:`image_job_inputs` whose change makes the dataset again (its ``made_from`` roles and their
        verification records); the rule marks the others ``ancient``: needed to start, never a reason to remake."""
        name, role = self.made_in_image_of(dataset_id)
        sources = self.bench(name).full.made_in_image[role].made_from
        return [key for source in sources for key in (source, f"{source}_verified")]

    def image_job(self, dataset_id: str) -> TrainJob:
        """The one-off full-scale job of a benchmark's image that makes ``dataset_id`` (:meth:`image_job_spec`, rendered)."""
        return train_job_of(self.image_job_spec(dataset_id))

    @cache  # noqa: B019 - one Plan per workflow; the rule asks for several fields of the same job
    def image_job_spec(self, dataset_id: str) -> JobSpec:
        """The spec of the one-off full-scale job of a benchmark's image that makes ``dataset_id``
        (``full.made_in_image``): the reference command on the runs' geometry with the role's folder read-write and
        the definition's words replaced; its mllog goes to :meth:`made_in_image_dir`."""
        name, role = self.made_in_image_of(dataset_id)
        own = self.of(name)
        bench = own.bench
        made = bench.full.made_in_image[role]
        settings = dataclasses.replace(own.launch_settings(), replaced_words=tuple(made.replace_words.items()))
        paths = dataclasses.replace(own.run_paths(0), result_file=Path(self.made_in_image_dir(dataset_id)) / "result.txt", writable=(role,))
        # its nodes are checked as a run's (a bad node it names is excluded from its retry and from every later job),
        # recorded beside its folder, which each attempt empties
        nodes = self.node_check_step(bench, 0, settings, paths, attempts=f"{self.made_in_image_dir(dataset_id)}{NODE_CHECK_SUFFIX}")
        spec = self._full_scale_spec(bench, 0, self.image_job_seed(), paths, settings, node_check_step=nodes, sampled=False)
        return spec.model_copy(update={"steps": spec.steps.model_copy(update={"check_prepared": own.prepared_dataset()})})

    def image_job_seed(self) -> int:
        """The one-off job's seed: one no run uses (``seed_base - 1``; ``seed_base`` 0 leaves run 0's), so that nothing
        of the job could pass for a run's. What the job makes must not depend on it (a conversion, a cache)."""
        return max(self.settings.seed_base - 1, 0)

    def made_in_image_of(self, dataset_id: str) -> tuple[str, str]:
        """(benchmark, role) of the one-off job that makes ``dataset_id``, or one line saying none does."""
        if dataset_id not in self.made_in_image:
            made = ", ".join(self.made_in_image) or "none at this scale"
            raise ConfigError(f"{dataset_id}: no benchmark's image makes it; made in an image: {made}")
        return self.made_in_image[dataset_id]

    def node_check_step(
        self,
        bench: BenchmarkDef,
        run: int,
        settings: launch.Launch | None = None,
        paths: launch.RunPaths | None = None,
        attempts: str | None = None,
        excluded: str | None = None,
    ) -> job_spec.NodeCheck | None:
        """The node check of a full-scale job (``node_check``), or None when it is off: every input the job reads but the
        ones it writes (``paths.writable``), its attempts recorded in ``attempts`` (default: run ``run``'s), the bad
        nodes it names in ``excluded`` (default: the campaign's :meth:`excluded_nodes_file`)."""
        check = self.settings.node_check
        if not check.enabled:
            return None
        name = bench.name
        paths = paths or self.of(name).run_paths(run)
        records = {role: Path(self.verified_record(dataset_id)) for role, dataset_id in bench.roles_for("train").items()}
        inputs = {role: (folder, records[role]) for role, folder in paths.inputs.items() if role not in paths.writable}
        expect = node_check.default_matmul_expectation(published.peak_tflops(published.family_of(self._accelerator_model_name)))
        folder, bad_nodes = Path(attempts or self.of(name).node_check_dir(run)), Path(excluded or self.excluded_nodes_file())
        return launch.node_check_step(folder, bad_nodes, paths.prepared, inputs, check, expect)

    def excluded_nodes_file(self) -> str:
        """The nodes a failed node check named; every later train job of this scale excludes them."""
        return f"{self.results_root}/{node_check.EXCLUDED_FILE}"

    @functools.cached_property
    def _accelerator_model_name(self) -> str | None:
        return self.accelerator_model_name()

    def accelerator_model_name(self) -> str | None:
        """``accelerator_model_name`` of this platform's system description, where it has one."""
        path = self.workdir / "config" / "systems" / f"{self.settings.submission.platform}.yaml"
        if not path.is_file():
            return None
        import yaml

        described = yaml.safe_load(path.read_text()) or {}
        return described.get("accelerator_model_name") if isinstance(described, dict) else None

    def campaign_config_record(self) -> str:
        """Where the running Snakemake records its config for the train jobs' campaign gate (``stop_when_doomed``)."""
        return f"{self.logs_root}/campaign_config.json"


class BenchmarkPlan:
    """The plan of one benchmark (:meth:`Plan.of`): every path, command, resource and check of its jobs, from its
    definition, looked up once, and the campaign's :class:`Plan`."""

    def __init__(self, plan: Plan, bench: BenchmarkDef) -> None:
        self.plan = plan
        self.bench = bench
        self.name = bench.name

    @cache  # noqa: B019 - one Plan per workflow, alive as long as the process
    def ruleset(self) -> str:
        """Ruleset of a benchmark's runs: ``ruleset``, or its newest round when that is ``latest``."""
        return mlperf_rules.resolve_ruleset(self.bench.submission_benchmark, self.plan.settings.ruleset)

    def division(self) -> str:
        """Division of a benchmark's runs: the config's, except that a benchmark whose closed rules cannot hold
        at tiny size runs its tiny tier as open (its definition's ``tiny.division``)."""
        if self.plan.scale == Scale.TINY and self.bench.tiny.division == "open":
            return "open"
        return self.plan.settings.division

    def run_count(self) -> int:
        """Runs to make: ``runs``, or the count the rules require."""
        return self.plan.settings.runs or mlperf_rules.required_runs(self.bench.submission_benchmark)

    def hyperparameters(self) -> hyperparameters.TinyHyperparameters:
        """The tiny hyperparameters with the config's overrides (checked when the workflow is parsed)."""
        return hyperparameters.resolve(self.bench, self.plan.settings.tiny_hyperparameters.get(self.name))

    def image_variant(self) -> str | None:
        """The image variant the runs of the benchmark take on the probed system (``full.container.variants``): the first
        that fits where the definition's own image does not; None: the definition's image."""
        hardware = self.plan.system_hardware
        return None if hardware is None else system.choose_image(self.bench.full.container, hardware)[0]

    def run_definition(self) -> BenchmarkDef:
        """The definition the full-scale runs of the benchmark launch: its own, or, where they take an image variant
        (:meth:`image_variant`), with the variant's vendor (its devices) and its environment over ``full.env``."""
        bench = self.bench
        variant = self.image_variant()
        if variant is None:
            return bench
        chosen = bench.full.container.variants[variant]
        env = {key: value for key, value in {**bench.full.env, **chosen.env}.items() if value is not None}
        full = bench.full.model_copy(update={"accelerator": chosen.accelerator, "env": env})
        return bench.model_copy(update={"full": full})

    def container(self) -> Container:
        """The full-scale image: the definition's (or the variant that fits the probed system, :meth:`image_variant`),
        with the config's ``full_container`` override."""
        base = self.bench.full.container
        variant = self.image_variant()
        if variant is not None:
            chosen = base.variants[variant]
            base = base.model_copy(update={"image": chosen.image, "dockerfile": chosen.dockerfile, "targets": chosen.targets})
        override = self.plan.settings.full_container.get(self.name)
        if not override:
            return base
        try:
            return Container.model_validate({**base.model_dump(), **override.model_dump(exclude_none=True)})
        except ValidationError as err:
            raise ConfigError(describe_validation_error(f"config: full_container.{self.name}", err, separator=".")) from None

    def scratch_sizes(self) -> dict[str, float]:
        """GB each scratch area of a run needs: the definition's ``size_gb``, or the config's ``full_scratch``."""
        areas = self.bench.full.scratch
        override = self.plan.settings.full_scratch.get(self.name) or {}
        unknown = sorted(set(override) - set(areas))
        if unknown:
            known = ", ".join(areas) or "none"
            raise ConfigError(f"config: full_scratch.{self.name}: {unknown} names no scratch area of its definition (full.scratch: {known})")
        return {area: float(override.get(area, spec.size_gb)) for area, spec in areas.items()}

    # ---- paths ----

    def datasets_read(self) -> list[str]:
        """Every dataset a benchmark's chosen preparation and its runs read, each once (sorted)."""
        bench = self.bench
        return sorted({*bench.roles_for("prepare", self.preparation()).values(), *bench.roles_for("train").values()})

    def prepared_dir(self) -> str:
        """Prepared data of a benchmark: ``shards/`` (one cached job each) and ``dataset/`` (the tree its runs read)."""
        return f"resources/{self.plan.scale}/prepared/{self.name}"

    def prepared_dataset(self) -> str:
        return f"{self.prepared_dir()}/dataset"

    def run_file(self, run: int, file: str) -> str:
        """A file of one run's folder (``result.txt``, ``compliance.json``, ``provenance.json``)."""
        return f"{self.plan.results_root}/{self.name}/runs/{run}/{file}"

    def run_files(self, file: str) -> list[str]:
        """That file of every run."""
        return [self.run_file(run, file) for run in range(self.run_count())]

    def report(self) -> str:
        return f"{self.plan.results_root}/{self.name}/report.json"

    # ---- preparation ----

    def preparation(self) -> str:
        """The preparation a benchmark's data goes through (the config's ``preparation``, else its default)."""
        return self.plan.settings.preparation.get(self.name, DEFAULT_PREPARATION)

    def shards_dir(self) -> str:
        return f"{self.prepared_dir()}/shards"

    def preprocess_inputs(self, shard: str) -> dict[str, str]:
        """Every dataset the shard's preparation reads, by role, with its verification record, and the earlier
        shards it reads."""
        inputs = {}
        for role, dataset_id in self.bench.roles_for("prepare", self.preparation()).items():
            inputs[role] = self.plan.dataset_dir(dataset_id)
            inputs[f"{role}_verified"] = self.plan.verified_record(dataset_id)
        for earlier in prepare.shard_inputs(self.bench, shard, self.plan.scale, self.preparation()):
            inputs[f"shard_{earlier}"] = f"{self.shards_dir()}/{earlier}"
        return inputs

    def preprocess_args(self, shard: str) -> str:
        """``--input ROLE=FOLDER`` arguments of the preprocess command with each dataset's ``--verified ROLE=STAMPS``
        (``shards=`` the shards folder for a shard that reads earlier shards), and ``--preparation`` when it is not the
        default."""
        way = self.preparation()
        args = []
        for role, dataset_id in self.bench.roles_for("prepare", way).items():
            args += [f"--input {role}={self.plan.dataset_dir(dataset_id)}", f"--verified {role}={self.plan.verified_stamps(dataset_id)}"]
        if prepare.shard_inputs(self.bench, shard, self.plan.scale, way):
            args.append(f"--input {SHARDS_ROLE}={self.shards_dir()}")
        if way != DEFAULT_PREPARATION:
            args.append(self.preparation_args())
        return " ".join(args)

    def preparation_args(self) -> str:
        """``--preparation NAME`` for a preparation other than the default (none otherwise)."""
        way = self.preparation()
        return "" if way == DEFAULT_PREPARATION else f"--preparation {way}"

    def shard_names(self) -> list[str]:
        """Shards of a benchmark's preparation at this scale (its prepare module declares them)."""
        return prepare.shard_names(self.bench, self.plan.scale, self.preparation())

    def shard_dirs(self) -> list[str]:
        return [f"{self.shards_dir()}/{shard}" for shard in self.shard_names()]

    def shard_resources(self, shard: str) -> dict[str, int]:
        return prepare.shard_resources(self.bench, shard, self.plan.scale, self.preparation())

    # ---- training ----

    def train_inputs(self) -> dict[str, str]:
        """The prepared tree, and every dataset the runs read directly (with its verification record)."""
        inputs = {"prepared": self.prepared_dataset()}
        for role, dataset_id in self.bench.roles_for("train").items():
            inputs[role] = self.plan.dataset_dir(dataset_id)
            inputs[f"{role}_verified"] = self.plan.verified_record(dataset_id)
        return inputs

    def extra_mounts(self) -> tuple[tuple[str, str, str], ...]:
        """``full_mounts`` of a benchmark as (host, container, mode), host paths absolute."""
        mounts = []
        for item in self.plan.settings.full_mounts.get(self.name, []):
            parts = str(item).split(":")
            mode = parts.pop() if len(parts) == 3 else "ro"
            if len(parts) != 2 or not all(parts) or mode not in ("ro", "rw") or not parts[1].startswith("/"):
                raise ConfigError(f"config: full_mounts.{self.name}: {item!r} is not HOST:CONTAINER[:ro|rw] with an absolute container path")
            mounts.append((str((self.plan.workdir / parts[0]).resolve()), parts[1], mode))
        return tuple(mounts)

    def reference_logs_args(self) -> str:
        """``--reference-logs FOLDER`` of the plot job where the config names reference logs for the benchmark."""
        folder = self.plan.settings.reference_logs.get(self.name)
        return f"--reference-logs {shlex.quote(str(Path(folder).resolve()))}" if folder else ""

    def site_arguments(self) -> tuple[tuple[str, str], ...]:
        """``full_arguments`` of a benchmark as (flag, value) pairs."""
        return tuple((str(flag), str(value)) for flag, value in self.plan.settings.full_arguments.get(self.name, {}).items())

    def host_hooks(self) -> launch.HostHooks | None:
        """This checkout's start-up hooks and the benchmark's round patches (``<its folder>/container/patches``)."""
        patches = self.plan.project_root / "src" / registry.container_folder(self.name).relative_to(registry.PACKAGE_DIR.parent) / "patches"
        modules = tuple(sorted(path.stem for path in patches.glob("*.py")))
        if not modules:
            return None
        return launch.HostHooks(folders=(str(self.plan.project_root / "containers" / "hooks"), str(patches)), modules=modules)

    def submission_env(self) -> dict[str, str]:
        """``MLPERF_SUBMISSION_*`` of a full-scale run: what the config says, for the round patches to log."""
        s = self.plan.settings
        return {
            "MLPERF_SUBMISSION_BENCHMARK": self.bench.submission_benchmark,
            "MLPERF_SUBMISSION_DIVISION": self.division(),
            "MLPERF_SUBMISSION_ORG": s.submission.org,
            "MLPERF_SUBMISSION_PLATFORM": s.submission.platform,
            "MLPERF_SUBMISSION_STATUS": s.submission.status,
        }

    def host_memory_gb(self) -> int:
        """Host memory a node of the run needs (definition or ``full_geometry``); 0: not declared."""
        declared = self.geometry_override().host_memory_gb or self.bench.full.geometry.host_memory_gb
        return int(declared or 0)

    def geometry_override(self) -> GeometryOverride:
        """The config's ``full_geometry`` of a benchmark (every field None where the definition's holds)."""
        return self.plan.settings.full_geometry.get(self.name) or GeometryOverride()

    def run_geometry(self) -> tuple[int, int]:
        """(nodes, GPUs per node) of the full-scale runs of the benchmark: the config's ``full_geometry``, else the definition's."""
        geometry, override = self.bench.full.geometry, self.geometry_override()
        return override.nodes or geometry.nodes, override.gpus_per_node or geometry.gpus_per_node

    @cache  # noqa: B019 - one Plan per workflow; a run's spec and its campaign identity read the same settings
    def launch_settings(self) -> launch.Launch:
        """Launcher, geometry (definition or ``full_geometry``), environment and site overrides of a benchmark's runs."""
        geometry = self.bench.full.geometry
        override = self.geometry_override()
        chosen = self.plan.settings.launcher
        nodes, gpus_per_node = self.run_geometry()
        if chosen == "auto":
            # docker runs on one node: a run that spans several (gpt3's 8) goes through SLURM and pyxis
            chosen = "local" if self.plan.scale == Scale.TINY else "docker" if nodes == 1 else "pyxis"
        return launch.Launch(
            launcher=chosen,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            env_passthrough=self.plan.settings.env_passthrough,
            tiny_processes=self.plan.settings.tiny_processes,
            env=tuple(sorted(self.submission_env().items())),
            arguments=self.site_arguments(),
            workdir=self.plan.settings.full_workdir.get(self.name),
            extra_mounts=self.extra_mounts(),
            hooks=self.host_hooks(),
            walltime_minutes=override.walltime_minutes or geometry.walltime_minutes,
            batch=self.planned_batch(nodes, gpus_per_node) if self.plan.scale == Scale.FULL else None,
            quality_target=self.launch_quality_target(),
            segment_nodes=self.segment_nodes(),
            rehearsal=override.rehearsal,
        )

    def segment_nodes(self) -> int | None:
        """The NVLink-domain segment a full-scale run of the benchmark is placed in (``full.geometry.segment_nodes``), where
        the system's domains span it: a system not probed is taken as the reference's (an NVL72 rack); None where the
        domains are smaller (the expert groups cross the network anyway) or at tiny scale."""
        wanted = self.bench.full.geometry.segment_nodes
        hardware = self.plan.system_hardware
        if self.plan.scale != Scale.FULL or wanted is None or self.geometry_override().nvlink_segments is False:
            return None
        return None if hardware is not None and hardware.nvlink_domain_nodes < wanted else wanted

    def launch_quality_target(self) -> float | None:
        """The quality target a full-scale run stops at (its command's ``{quality_target}``): the rules' for the
        benchmark's round and division; None where the round is not the benchmark's (the preflight says so)."""
        try:
            return mlperf_rules.quality_target(self.bench.submission_benchmark, self.ruleset(), self.division()).value
        except ConfigError:
            return None

    @cache  # noqa: B019 - one Plan per workflow; every train job and the preflight ask for the same batch
    def planned_batch(self, nodes: int, gpus_per_node: int) -> sizing.PlannedBatch | None:
        """The full-scale batch and RCP hyperparameters of the benchmark on its geometry (``full.sizing``)."""
        try:
            ruleset = self.ruleset()
        except ConfigError:
            return None  # a round the benchmark is not part of: the preflight's ruleset problem says so
        overrides = self.plan.settings.full_hyperparameters.get(self.name, {})
        hardware = self.plan.system_hardware
        gpu_memory_gib = hardware.gpu_memory_gb * 1e9 / 2**30 if hardware is not None and hardware.gpu_memory_gb else None
        return sizing.plan_batch(self.bench, ruleset, nodes, gpus_per_node, overrides, gpu_memory_gib)

    def train_job(self, run: int) -> TrainJob:
        """Command, resources and provenance fields of run ``run`` of the benchmark (its :meth:`job_spec`, rendered)."""
        return train_job_of(self.train_spec(run))

    @cache  # noqa: B019 - one Plan per workflow; each rule asks for several fields of the same job
    def train_spec(self, run: int) -> JobSpec:
        """The spec of run ``run`` of the benchmark (:meth:`job_spec`), as the train rule asks for it."""
        return self.job_spec(run)

    def job_spec(self, run: int) -> JobSpec:
        """The spec of run ``run`` of the benchmark's train job: the launch, the steps around it and the scheduler request."""
        spec = self._tiny_spec(run) if self.plan.scale == Scale.TINY else self._full_spec(run)
        gate = None
        if self.plan.settings.stop_when_doomed:
            gate = job_spec.CampaignGate(benchmark=self.name, run=run, config_file=self.plan.campaign_config_record())
        inputs = self.train_inputs()
        recorded = job_spec.Provenance(
            out=self.run_file(run, "provenance.json"),
            result=self.run_file(run, "result.txt"),
            consumed=tuple(inputs.values()),
            scale=str(self.plan.scale),
            node_checks=self.node_check_records(run),
            config=json.dumps(identity.config_of(self.plan, self.name), sort_keys=True),
        )
        steps = spec.steps.model_copy(update={"campaign_gate": gate, "check_prepared": inputs["prepared"], "provenance": recorded})
        return spec.model_copy(update={"steps": steps})

    def _tiny_spec(self, run: int) -> JobSpec:
        s, name = self.plan.settings, self.name
        settings = self.launch_settings()
        result = self.run_file(run, "result.txt")
        args = [
            "--benchmark", name, "--run-index", str(run), "--seed", str(self.plan.seed(run)),
            "--data", self.prepared_dataset(), "--result", result,
            "--ruleset", self.ruleset(), "--division", self.division(),
            "--org", s.submission.org, "--platform", s.submission.platform, "--status", s.submission.status, "--threads", str(s.tiny_threads),
        ]  # fmt: skip
        for role, dataset_id in self.bench.roles_for("train").items():
            args += ["--input", f"{role}={self.plan.dataset_dir(dataset_id)}"]
        overrides = s.tiny_hyperparameters.get(name)
        if overrides:
            args += ["--hyperparameters", json.dumps(overrides, sort_keys=True)]
        if settings.launcher == "docker":
            # The image gives a userland; this host's venv, Python and project come in read-only.
            host = [Path(sys.prefix), Path(sys.base_prefix), self.plan.project_root]
            if self.plan.output_cache:  # cached shards are links into it
                host.append(self.plan.output_cache)
            spec = launch.tiny_spec(args, settings, s.tiny_image, self.plan.workdir, host)
        else:
            spec = launch.tiny_spec(args, settings)
        return spec.model_copy(
            update={
                "result_file": result,
                "threads": s.tiny_threads * s.tiny_processes,
                "resources": job_spec.Resources(**TINY_RUN_RESOURCES),
                "steps": job_spec.Steps(power=self.plan.power if self.plan.power.enabled else None),
            }
        )

    def _full_spec(self, run: int) -> JobSpec:
        settings = self.launch_settings()
        paths = self.run_paths(run)
        check = self.plan.node_check_step(self.bench, run, settings, paths)
        return self.plan._full_scale_spec(self.bench, run, self.plan.seed(run), paths, settings, check, sampled=True)

    # ---- the rehearsal of the benchmark's full-scale job (``mlperf-wf rehearse``) ----

    def rehearsal_dir(self) -> str:
        """The rehearsal's own folder: its run folder, node checks and job log; never under the campaign's results."""
        return f"{REHEARSAL_ROOT}/{self.name}"

    def rehearsal_geometry(self) -> tuple[int, int]:
        """(nodes, GPUs per node) of a rehearsal: two nodes of the runs' GPUs per node (one for a one-node benchmark), or
        the fewest nodes above that which hold whole model replicas (``full.sizing.model_parallel``, e.g. gpt3's 64 GPUs
        of tensor x pipeline parallelism): a smaller data-parallel world, never more nodes than the runs'."""
        nodes, gpus_per_node = self.run_geometry()
        sizing_def = self.bench.full.sizing
        parallel = sizing_def.model_parallel if sizing_def is not None else 1
        chosen = min(nodes, REHEARSAL_NODES)
        while chosen < nodes and (chosen * gpus_per_node) % parallel:
            chosen += 1
        return chosen, gpus_per_node

    def rehearsal_ranks_per_node(self, steps: int) -> int:
        """The ranks each node of the rehearsal job runs, which its hook records: one per GPU, or, where one process
        drives every GPU of its node (``full.gpus_per_process: node``, TensorFlow's ``MirroredStrategy``), the
        launcher's tasks per node of :meth:`rehearsal_job`."""
        nodes, gpus_per_node = self.rehearsal_geometry()
        if self.bench.full.gpus_per_process == "one":
            return gpus_per_node
        return self.rehearsal_spec(steps).geometry.tasks // nodes

    def rehearsal_inputs(self, settings: launch.Launch, paths: launch.RunPaths) -> dict[str, str]:
        """Input role (``prepared`` and each role the runs read) -> the folder the job sees it at: the container's mount,
        or the host folder where the reference runs on the host (``local``)."""
        if settings.launcher == "local":
            return {"prepared": str(paths.prepared.resolve()), **{role: str(folder.resolve()) for role, folder in paths.inputs.items()}}
        mounts = self.bench.full.mounts
        return {"prepared": mounts["prepared"], **{role: mounts[role] for role in paths.inputs}}

    def rehearsal_launch(self) -> launch.Launch:
        """The runs' launch settings on :meth:`rehearsal_geometry`, the batch planned for it (full scale). On fewer
        nodes than the runs' the geometry is a rehearsal's (roles split below the reference's ratio, each at least one
        node), and inside one NVLink segment where the runs' segment is larger than the rehearsal."""
        nodes, gpus_per_node = self.rehearsal_geometry()
        settings = dataclasses.replace(self.launch_settings(), nodes=nodes, gpus_per_node=gpus_per_node)
        if nodes < self.run_geometry()[0]:
            segment = settings.segment_nodes if settings.segment_nodes and settings.segment_nodes <= nodes else None
            settings = dataclasses.replace(settings, rehearsal=True, segment_nodes=segment)
        if self.plan.scale == Scale.FULL:
            settings = dataclasses.replace(settings, batch=self.planned_batch(nodes, gpus_per_node))
        return settings

    def rehearsal_rank_nodes(self) -> int:
        """Nodes of the rehearsal whose GPUs are the ranks that take training steps: the training role's where the
        nodes split into roles (``full.geometry.node_split``: generation workers take no optimizer step), else all."""
        roles = launch.node_split(self.bench, self.rehearsal_launch())
        return roles.train if roles is not None else self.rehearsal_geometry()[0]

    def rehearsal_stop(self, steps: int) -> str:
        """The word a rehearsal of ``steps`` steps appends to the command so the framework ends the run itself
        (``full.rehearsal_stop``); empty where the hook ends every rank."""
        stop = self.bench.full.rehearsal_stop
        return stop.override.format(steps=steps) if stop is not None else ""

    @cache  # noqa: B019 - one Plan per workflow; the rule asks for several fields of the same job
    def rehearsal_job(self, steps: int) -> TrainJob:
        """The benchmark's full-scale train job on :meth:`rehearsal_geometry`, stopped after ``steps`` training steps by
        the images' rehearsal hook (``containers/hooks/mlperf_wf_rehearsal_steps.py``), which records every rank in the run
        folder's ``rehearsal-ranks``, or, where the definition says so (``full.rehearsal_stop``), by the framework's own
        step limit appended to the command, the hook then only counting and recording; its run folder, node checks and
        excluded nodes are :meth:`rehearsal_dir`'s."""
        return train_job_of(self.rehearsal_spec(steps))

    @cache  # noqa: B019 - one Plan per workflow; the job and the expected ranks read the same spec
    def rehearsal_spec(self, steps: int) -> JobSpec:
        """The spec of :meth:`rehearsal_job`."""
        if steps < 1:
            raise ConfigError(f"rehearsal steps: {steps} is not allowed; give a whole number of training steps >= 1")
        settings = self.rehearsal_launch()
        folder = Path(self.rehearsal_dir())
        paths = dataclasses.replace(self.run_paths(0), result_file=folder / "run" / "result.txt")
        inside = paths.result_file.resolve().parent if settings.launcher == "local" else Path(self.bench.full.mounts["results"])
        inputs = self.rehearsal_inputs(settings, paths)
        env = {
            REHEARSAL_STEPS_VARIABLE: str(steps),
            REHEARSAL_RANKS_VARIABLE: str(inside / REHEARSAL_RANKS),
            REHEARSAL_INPUTS_VARIABLE: ",".join(f"{role}={where}" for role, where in sorted(inputs.items())),
        }
        stop = self.rehearsal_stop(steps)
        if stop:  # the framework's own step limit ends the run; the hook counts and records only
            env[REHEARSAL_STOP_VARIABLE] = "framework"
            settings = dataclasses.replace(settings, appended_words=(stop,))
        settings = dataclasses.replace(settings, env=tuple(sorted({**dict(settings.env), **env}.items())))
        bench = self.bench
        check = self.plan.node_check_step(bench, 0, settings, paths, attempts=str(folder / "node-check"), excluded=str(folder / node_check.EXCLUDED_FILE))
        return self.plan._full_scale_spec(bench, 0, self.plan.image_job_seed(), paths, settings, node_check_step=check, sampled=False)

    # ---- a full-scale run's node check and SLURM request ----

    def node_check_line(self, run: int, settings: launch.Launch | None = None, paths: launch.RunPaths | None = None, attempts: str | None = None) -> str:
        """The node check of a full-scale job's line (:meth:`node_check_step` as shell), or '' when it is off."""
        settings = settings or self.launch_settings()
        step = self.plan.node_check_step(self.bench, run, settings, paths, attempts)
        return launchers.node_check_script(settings.nodes, settings.launcher == "pyxis", step) if step else ""

    def run_paths(self, run: int) -> launch.RunPaths:
        """Host paths a full-scale run reads and writes."""
        return launch.RunPaths(
            prepared=Path(self.prepared_dataset()),
            result_file=Path(self.run_file(run, "result.txt")),
            inputs={role: Path(self.plan.dataset_dir(dataset_id)) for role, dataset_id in self.bench.roles_for("train").items()},
            output_cache=self.plan.output_cache,
        )

    def node_check_records(self, run: int) -> str:
        """The run's node-check folder for its provenance ('' where it has none: tiny scale, or the check off)."""
        return self.node_check_dir(run) if self.plan.scale == Scale.FULL and self.plan.settings.node_check.enabled else ""

    def node_check_dir(self, run: int) -> str:
        """Where every attempt of a run records its node check: beside the run folder, which each attempt empties."""
        return f"{self.plan.results_root}/{self.name}/node-check/{run}"

    def campaign_gate(self, run: int) -> str:
        """The train job's first command with ``stop_when_doomed``: the job ends, not started, when its benchmark's set
        can no longer be valid (:mod:`mlperf_wf.results.doom`); '' when the option is off."""
        return launchers.campaign_gate(self.train_spec(run))

    def train_slurm_extra(self, rehearsal: bool = False) -> str:
        """A full-scale job's extra ``sbatch`` flags for the benchmark's image: whole nodes (as NVIDIA's run.sub,
        ``--exclusive``), whole NVLink-domain segments where its runs need them (``--segment``, as the reference's
        SBATCH_SEGMENT), and none of the nodes a node check named (``--exclude``), read when a job is submitted or
        resubmitted; ``rehearsal``: those a rehearsal's node check of the benchmark named too (its own file, which no
        campaign job reads)."""
        excluded = node_check.excluded_nodes(self.plan.workdir / self.plan.excluded_nodes_file())
        if rehearsal:
            excluded = sorted({*excluded, *node_check.excluded_nodes(self.plan.workdir / self.rehearsal_dir() / node_check.EXCLUDED_FILE)})
        segment = self.rehearsal_launch().segment_nodes if rehearsal else self.segment_nodes()
        return "--exclusive" + (f" --segment={segment}" if segment else "") + (f" --exclude={','.join(excluded)}" if excluded else "")


def unplannable_job(problem: str, scale: Scale) -> TrainJob:
    """The train job of a run the config cannot plan (``problem``, one line) at ``scale``: the DAG still renders, so
    that a dry run shows the whole plan and the preflight lists this problem with every other one; run, it fails with
    the line."""
    return train_job_of(unplannable_spec(problem, scale))


def unplannable_spec(problem: str, scale: Scale) -> JobSpec:
    """The spec of a job of the campaign's ``scale`` that only refuses with ``problem`` (status 2)."""
    return JobSpec(scale=str(scale), launcher="none", resources=job_spec.Resources(runtime=1), refused=problem)


def load(config: dict | WorkflowConfig, project_root: Path, workdir: Path | None = None, check_definitions: bool = True) -> Plan:
    """Check every benchmark and dataset definition, then plan ``config`` (Snakemake's dict, or the model); any problem
    is one ``ConfigError`` line. ``check_definitions=False``: the caller's definitions were checked by the process that
    started it (a Snakemake job step parses the Snakefile again inside every cluster job)."""
    problems = registry.check_all(read_imports=False) if check_definitions else []  # `mlperf-wf check` reads every import
    if problems:
        more = f" ({len(problems) - 1} more: mlperf-wf check lists them)" if len(problems) > 1 else ""
        raise ConfigError(problems[0] + more)
    settings = config if isinstance(config, WorkflowConfig) else WorkflowConfig.parse(config)
    return Plan(settings, project_root, workdir, launch.output_cache_dir())
