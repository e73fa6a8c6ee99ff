"""Preflight: every problem of a full-scale plan at once, before anything is queued.

A full-scale campaign fails late and one problem at a time if nothing looks first: an unpinned image or the tiny
tier's platform stops each train job on its node, missing credentials stop a download after the jobs before it ran,
a scratch area too big for its filesystem stops a run hours in. :func:`plan_problems` looks at everything a plan
will need, for the benchmarks and datasets it targets, and returns every problem found:

- ``ruleset``: the configured round does not hold the benchmark (mlperf-logging's ``benchmark_meta``);
- ``platform``: ``submission.platform`` is the tiny tier's (``cpu-tiny``), or names no system description
  (``config/systems/<platform>.yaml``, which the submission package needs);
- ``image`` and ``geometry`` against the probed system (the description's ``hardware``, ``mlperf-wf system probe``;
  :func:`system_fit_problems`): no image of the benchmark fits its CPU architecture, GPUs or GPU memory, or the runs
  ask more GPUs, nodes, CPUs or host memory per node than it has;
- ``image``: the container image is not pinned by a digest (any launcher but ``local``);
- ``geometry``: the run's nodes cannot be launched that way (several nodes with a one-node launcher or command);
- ``credentials``: a dataset still to download whose catalog entry says its source needs credentials
  (``source.credentials_required``) while the environment gives none (R2: ``MLPERF_WF_CF_ACCESS_CLIENT_ID`` and
  ``..._SECRET``, or ``MLPERF_WF_CF_ACCESS_TOKEN``; Hugging Face: ``HF_TOKEN``);
- ``data``: a dataset the workflow does not download (``external``, or ``fiftyone`` whose fetch has not run) is
  not in place;
- ``batch``: the run's global batch cannot be made on its GPUs, or an RCP hyperparameter is missing for it
  (``full.sizing``, ``full_hyperparameters``);
- ``rcp``: in the closed division, no RCP of the round covers the GBS (the RCP check would fail the set);
- ``rules``: a planned hyperparameter breaks the round's closed rule on it;
- ``walltime``: the run's walltime cannot hold its expected time to train on the system description's accelerator
  (published results scaled to the system, else model FLOPs: ``mlperf_wf.plan.published``);
- ``scratch``: a run's scratch areas (``full.scratch``, sizes overridable with ``full_scratch``) need more than the
  free space of the run folder's filesystem (or of the folder of a one-off job of the image still to make an input).

Datasets already downloaded or verified need nothing more. ``mlperf-wf preflight`` prints the list for a config;
``snakemake`` at full scale prints it after a dry run and refuses to start a real one (``workflow/rules/common.smk``).
Each train job still checks its own image and platform on its node (:func:`run_problems`), against a plan edited
after submission.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mlperf_wf.config import mlperf_rules, registry, system
from mlperf_wf.config.registry import IMAGE_DIGEST
from mlperf_wf.config.workflow_config import WorkflowConfig
from mlperf_wf.errors import ConfigError
from mlperf_wf.kinds import Scale
from mlperf_wf.plan import launch, published, sizing
from mlperf_wf.plan.plan import FETCHED_DIR, TINY_PLATFORM, Plan
from mlperf_wf.plan.shell_wrap import filled, wrap
from mlperf_wf.run import launchers

R2_CREDENTIALS = (("MLPERF_WF_CF_ACCESS_CLIENT_ID", "MLPERF_WF_CF_ACCESS_CLIENT_SECRET"), ("MLPERF_WF_CF_ACCESS_TOKEN",))
"""Either set of variables gives R2 access (``download.AUTH_ENV``: a service token, or an access token)."""
HUB_CREDENTIALS = "HF_TOKEN"
"""The hub's token (``hub.TOKEN_ENV``)."""


@dataclass(frozen=True)
class Problem:
    """One thing that would stop the campaign, and what to do about it."""

    kind: str
    """ruleset, platform, image, geometry, batch, rcp, rules, walltime, credentials, data or scratch."""
    subject: str
    """The benchmark or dataset it concerns, or ``config`` (the platform)."""
    message: str
    """What is wrong and how to mend it (one line)."""

    def __str__(self) -> str:
        return f"{self.subject}: {self.message}"


def run_problems(benchmark: str, image: str | None, platform: str | None) -> list[Problem]:
    """The checks of one train job on its node: its image (none with the local launcher) is pinned by digest,
    and its logs will not name the tiny tier's system."""
    problems = []
    if platform == TINY_PLATFORM:
        problems.append(_tiny_platform(benchmark))
    if image is not None and not re.search(f"@{IMAGE_DIGEST}$", image):
        problems.append(_unpinned(benchmark, image))
    return problems


def _tiny_platform(subject: str) -> Problem:
    return Problem(
        "platform",
        subject,
        f"submission.platform is {TINY_PLATFORM!r}, the tiny tier's CPU system; a full-scale run logs it as submission_platform: "
        "set submission.platform to the name of this system (its description: config/systems/<name>.yaml)",
    )


IMAGE_FILES = {"pyxis": ("squashfs",), "apptainer": ("sif", "oci_archive")}
"""The launcher -> the local image files of a site's ``full_container`` (``mlperf-wf bundle import``) it starts, the
first one named."""


def _missing_image_files(benchmark: str, container, launcher: str) -> list[Problem]:
    """The site's image file the launcher would start, where it is named but not there (checked on the login node: the
    shared filesystem the compute nodes read it from)."""
    kind = next((kind for kind in IMAGE_FILES.get(launcher, ()) if getattr(container, kind)), None)
    path = getattr(container, kind) if kind else None
    if path is None or Path(path).is_file():
        return []
    return [Problem("image", benchmark, f"full_container.{benchmark}.{kind}: {path} does not exist; run `mlperf-wf bundle import` again")]


def _unpinned(benchmark: str, image: str) -> Problem:
    return Problem(
        "image",
        benchmark,
        f"the container image {image!r} is not pinned; after pushing it, set its sha256 digest in the workflow config "
        f"(full_container: {{{benchmark}: {{digest: 'sha256:...'}}}}; docker inspect --format '{{{{index .RepoDigests 0}}}}' IMAGE shows it)",
    )


def plan_problems(plan: Plan, benchmarks: Iterable[str], datasets: Iterable[str] | None = None, environ: Mapping[str, str] | None = None) -> list[Problem]:
    """Every problem of the full-scale ``plan`` for the runs of ``benchmarks`` and the
    downloads of ``datasets`` (default: every dataset those benchmarks read), in a stable order."""
    env = os.environ if environ is None else environ
    names = list(dict.fromkeys(benchmarks))
    if datasets is None:
        datasets = [dataset for name in names for dataset in _datasets_of(plan, name)]
    problems: list[Problem] = []
    if names:
        problems += _platform_problems(plan)
    for name in names:
        problems += _benchmark_problems(plan, name)
        problems += walltime_problems(plan, name)
    for dataset_id in dict.fromkeys(datasets):
        problems += _dataset_problems(plan, dataset_id, env)
    return list(dict.fromkeys(problems))


def _datasets_of(plan: Plan, name: str) -> list[str]:
    bench = plan.bench(name)
    return [*bench.roles_for("prepare", plan.of(name).preparation()).values(), *bench.roles_for("train").values()]


def _platform_problems(plan: Plan) -> list[Problem]:
    if plan.settings.submission.platform == TINY_PLATFORM:
        return [_tiny_platform("config")]
    return system_description_problems(plan)


def problems_before_any_job(plan: Plan) -> list[Problem]:
    """What stops an invocation as it starts, before its preflight: at tiny scale, which has no preflight, a platform
    with no system description (it would fail only at packaging, after every run trained); at full scale the
    preflight lists it with every other problem."""
    return system_description_problems(plan) if plan.scale == Scale.TINY else []


def system_description_problems(plan: Plan) -> list[Problem]:
    """``submission.platform`` names no system description: the package, made after every run trained, needs it. At
    either scale, found before any job runs."""
    platform = plan.settings.submission.platform
    if plan.system_description().is_file():
        return []
    known = sorted(path.stem for path in plan.system_description().parent.glob("*.yaml"))
    return [
        Problem(
            "platform",
            "config",
            f"submission.platform {platform!r} has no system description config/systems/{platform}.yaml (the submission package needs it; "
            f"described: {', '.join(known) or 'none'}): copy config/systems/{TINY_PLATFORM}.yaml there and describe this system",
        )
    ]


def _benchmark_problems(plan: Plan, name: str) -> list[Problem]:
    problems = system_fit_problems(plan, name)
    try:
        plan.of(name).ruleset()
    except ConfigError as err:
        problems.append(Problem("ruleset", name, str(err)))
    try:
        settings = plan.of(name).launch_settings()
    except ConfigError as err:  # the batch its GBS and geometry make (full.sizing, full_hyperparameters)
        return [*problems, Problem("batch", name, str(err))]
    geometry = launch.geometry_problem(plan.bench(name), settings)
    if geometry:
        problems.append(Problem("geometry", name, geometry.split(": ", 1)[1]))
    problems += _placement_problems(plan, name, settings)
    literal = sizing.literal_batch_problem(plan.bench(name), settings.nodes, settings.gpus_per_node)
    if literal:
        problems.append(Problem("batch", name, literal))
    problems += _batch_problems(plan, name, settings.batch)
    if settings.launcher != "local":
        container = plan.of(name).container()
        if not container.digest:
            problems.append(_unpinned(name, container.reference))
        problems += _missing_image_files(name, container, settings.launcher)
    problems += _scratch_problems(plan, name)
    return problems


def _placement_problems(plan: Plan, name: str, settings: launch.Launch) -> list[Problem]:
    """Nodes the runs cannot be placed on: not whole NVLink-domain segments (``sbatch --segment``), or segments on a
    SLURM that cannot place them."""
    problems = []
    segment = settings.segment_nodes
    # a benchmark whose nodes split into roles has each role whole segments: its geometry problem names those counts
    if segment and settings.nodes % segment and plan.bench(name).full.geometry.node_split is None:
        problems.append(
            Problem(
                "geometry",
                name,
                f"the runs ask {settings.nodes} nodes, not whole {segment}-node segments of an NVLink domain (sbatch --segment={segment}: "
                f"each expert-parallel group within one domain, full.geometry.segment_nodes): set full_geometry.{name}.nodes to a multiple of {segment}",
            )
        )
    hardware = plan.system_hardware
    if segment and hardware is not None and hardware.slurm_topology and hardware.slurm_topology != "topology/block":
        problems.append(
            Problem(
                "geometry",
                name,
                f"its runs need whole {segment}-node NVLink segments (sbatch --segment={segment}), which SLURM places with "
                f"TopologyPlugin=topology/block only; config/systems/{plan.settings.submission.platform}.yaml says {hardware.slurm_topology}",
            )
        )
    return problems


def system_fit_problems(plan: Plan, name: str) -> list[Problem]:
    """What of the probed system (``config/systems/<platform>.yaml``'s ``hardware``) the runs of ``name`` cannot run on:
    no image of the benchmark (its own or a variant, ``full.container.targets``) fits its CPU architecture, GPUs or GPU
    memory; or the runs ask more GPUs, nodes, CPUs or host memory per node than it has. Nothing where the system was
    not probed or the image declares no targets."""
    hardware = plan.system_hardware
    if hardware is None:
        return []
    problems = []
    container = plan.bench(name).full.container
    if container.targets is not None and plan.of(name).image_variant() is None:
        fit = system.image_fit(container.targets, hardware)
        if not fit.fits:
            images = [f"{container.image} runs on {container.targets.in_words()}"]
            images += [f"variant {variant} ({image.image}) on {image.targets.in_words()}" for variant, image in container.variants.items()]
            problems.append(
                Problem(
                    "image",
                    name,
                    f"no image fits the system {plan.settings.submission.platform!r} ({hardware.in_words()}; not supported: "
                    f"{', '.join(fit.misfits)}): {'; '.join(images)}",
                )
            )
    nodes, gpus_per_node = plan.of(name).run_geometry()
    where = f"config/systems/{plan.settings.submission.platform}.yaml"
    if gpus_per_node > hardware.gpus_per_node:
        problems.append(
            Problem(
                "geometry",
                name,
                f"the runs ask {gpus_per_node} GPUs per node, the system's nodes have {hardware.gpus_per_node} ({where}): "
                f"set full_geometry.{name}.gpus_per_node",
            )
        )
    if nodes > hardware.nodes:
        problems.append(Problem("geometry", name, f"the runs ask {nodes} nodes, the system has {hardware.nodes} ({where}): set full_geometry.{name}.nodes"))
    cpus = plan.bench(name).full.geometry.cpus_per_gpu * min(gpus_per_node, max(hardware.gpus_per_node, 1))
    if cpus > hardware.cpus_per_node:
        problems.append(
            Problem(
                "geometry",
                name,
                f"the runs ask {cpus} CPUs per node (full.geometry.cpus_per_gpu {plan.bench(name).full.geometry.cpus_per_gpu} x "
                f"{min(gpus_per_node, hardware.gpus_per_node)} GPUs), the system's nodes have {hardware.cpus_per_node} ({where})",
            )
        )
    memory = plan.of(name).host_memory_gb()
    if memory > hardware.host_memory_gib:
        problems.append(
            Problem(
                "geometry", name, f"the runs ask {memory} GiB of host memory per node, the system's nodes have {hardware.host_memory_gib:.0f} GiB ({where})"
            )
        )
    return problems


def system_fit_notes(plan: Plan, name: str) -> list[str]:
    """What runs on the probed system but not as the reference did: the image variant taken, PTX the driver compiles
    at first use (inside the timed region), GPUs of a node left idle, more CPUs asked than the node has cores."""
    hardware = plan.system_hardware
    if hardware is None:
        return []
    notes = []
    variant = plan.of(name).image_variant()
    if variant is not None:
        notes.append(f"{name}: takes image variant {variant} ({plan.of(name).container().image}), which fits {hardware.in_words()}")
    targets = plan.of(name).container().targets
    if targets is not None:
        notes += [f"{name}: {note}" for note in system.image_fit(targets, hardware).notes]
    gpus_per_node = plan.of(name).run_geometry()[1]
    if gpus_per_node < hardware.gpus_per_node:
        notes.append(f"{name}: the runs use {gpus_per_node} of each node's {hardware.gpus_per_node} GPUs (full_geometry.{name}.gpus_per_node)")
    cpus = plan.bench(name).full.geometry.cpus_per_gpu * gpus_per_node
    if hardware.cores_per_node < cpus <= hardware.cpus_per_node:
        notes.append(f"{name}: the runs ask {cpus} CPUs per node, more than its {hardware.cores_per_node} cores (SMT threads make {hardware.cpus_per_node})")
    return notes


def _batch_problems(plan: Plan, name: str, batch: sizing.PlannedBatch | None) -> list[Problem]:
    """A closed run set whose GBS no RCP covers, or whose planned values break the round's closed rules."""
    if batch is None or plan.of(name).division() != "closed":
        return []
    problems = []
    if batch.coverage.kind in ("above", "none"):
        table = sizing.rcp_table(plan.bench(name).submission_benchmark, batch.ruleset)
        sizes = [point.gbs for point in table.points] if table else []
        problems.append(
            Problem(
                "rcp",
                name,
                f"GBS {batch.split.gbs}: {batch.coverage.message} ({batch.ruleset}); the RCP check fails such a set: "
                f"set full_hyperparameters.{name}.global_batch_size to one of {', '.join(map(str, sizes)) or 'none'}",
            )
        )
    for check in batch.rules:
        if check.held is False:
            problems.append(
                Problem("rules", name, f"{check.key} {check.value} breaks the {batch.ruleset} closed rule `{check.rule}`: change full_hyperparameters.{name}")
            )
    return problems


def batch_tables(plan: Plan, benchmarks: Iterable[str]) -> str:
    """The dry run's table of each planned benchmark's batch and hyperparameters: every value from the RCP, every
    deviation and every closed rule on them (``sizing.describe_batch``)."""
    lines, notes = [], []
    for name in benchmarks:
        notes += system_fit_notes(plan, name)
        try:
            settings = plan.of(name).launch_settings()
        except ConfigError:
            continue  # a preflight problem says why
        if settings.batch is not None:
            lines += sizing.describe_batch(settings.batch)
            lines += [f"  {line}" for line in launch.argument_deviations(plan.bench(name), settings.arguments)]
        split = plan.bench(name).full.geometry.node_split
        if split is not None and launch.geometry_problem(plan.bench(name), settings) is None:
            lines.append(f"{name}: its {settings.nodes} nodes are {launch.node_split(plan.bench(name), settings).in_words(split)}")
    table = "\n".join(["batch and hyperparameters of the full-scale runs (mlperf-wf size explains each):", *lines]) if lines else ""
    if notes:
        table = "\n".join(
            [*([table, ""] if table else []), "on the probed system (config/systems/<submission.platform>.yaml):", *(f"  {note}" for note in notes)]
        )
    return table


def walltime_problems(plan: Plan, name: str) -> list[Problem]:
    """A walltime that cannot hold a run's expected time to train on the system description's accelerator (none where
    the description names no accelerator the published results know: the dry run's estimate then assumes one)."""

    expected = run_time(plan, name)
    if expected is None or expected.assumed or expected.holds:
        return []
    return [
        Problem(
            "walltime",
            name,
            f"its walltime of {expected.walltime_minutes} min cannot hold a run expected to train in {expected.estimate.minutes:.0f} min on "
            f"{expected.nodes}x{expected.gpus_per_node} {expected.family} (+{sizing.STARTUP_MINUTES} min start-up; {expected.estimate.basis}): "
            f"every run would end aborted; set full_geometry: {{{name}: {{walltime_minutes: {expected.needed_walltime}}}}} or more nodes",
        )
    ]


def launch_tables(plan: Plan, benchmarks: Iterable[str]) -> str:
    """The dry run's launch of each planned benchmark's runs, as its launcher renders it from run 0's spec (the line a
    site reviews: ``srun ... --container-image ...``, ``docker run ...``); ``mlperf-wf job run`` runs it between the
    steps around it (the preflight, the node check, the page-cache drop, the MLLOG merge)."""
    lines = []
    for name in benchmarks:
        try:
            spec = plan.of(name).train_spec(0)
        except ConfigError:
            continue  # a preflight problem says why
        where = f"{spec.geometry.nodes} node{'s' if spec.geometry.nodes > 1 else ''} x {spec.geometry.gpus_per_node} GPUs"
        # wrapped as Snakemake's printed commands are (mlperf_wf.plan.shell_wrap: the shell reads the same command)
        command = wrap(launchers.launcher_for(spec).command(spec), first=2)
        lines += [f"{name} ({spec.launcher}, {where}; the other runs differ in seed and run folder):", f"  {command}"]
    return "\n".join(["launch of the full-scale runs (mlperf-wf job run starts it from each run's spec):", *lines]) if lines else ""


def time_tables(plan: Plan, benchmarks: Iterable[str]) -> str:
    """The dry run's expected time to train and walltime of each planned benchmark's runs, one line each and its
    basis (``mlperf_wf.plan.published``)."""

    lines = []
    for name in benchmarks:
        expected = run_time(plan, name)
        if expected is None:
            continue
        where = f"{name} on {expected.nodes}x{expected.gpus_per_node} {expected.family}" + (f" ({expected.assumed})" if expected.assumed else "")
        if expected.estimate is None:
            lines.append(f"  {where}: no published result and no model FLOPs; measure a first run (mlperf-wf size --throughput-from)")
            continue
        verdict = "holds it" if expected.holds else "cannot hold it: every run would end aborted"
        if expected.estimate.lower_bound:
            # the estimate counts part of the work: it can show a walltime too short, never that one holds a run
            verdict = "cannot hold it: every run would end aborted" if not expected.holds else "is not checked by it: measure a first run"
            lines.append(
                filled(
                    f"  {where}: at least {expected.estimate.minutes:.0f} min to train (a lower bound); the run's {expected.walltime_minutes} min {verdict}",
                    6,
                )
            )
        else:
            lines.append(
                filled(
                    f"  {where}: expected {expected.estimate.minutes:.0f} min to train, walltime {expected.needed_walltime} min asked for; "
                    f"the run's {expected.walltime_minutes} min {verdict}",
                    6,
                )
            )
        lines.append(filled(f"    from {expected.estimate.basis}", 6))
    return "\n".join(["expected time to train of the full-scale runs:", *lines]) if lines else ""


def _scratch_problems(plan: Plan, name: str) -> list[Problem]:
    """The runs' scratch areas, and those of each one-off job of the image still to make an input (``full.made_in_image``:
    its folder under ``resources/``, maybe another filesystem), against the free space where each goes."""
    sizes = plan.of(name).scratch_sizes()
    need = sum(sizes.values())
    if not need:
        return []
    areas = ", ".join(f"{area} {size:g} GB" for area, size in sizes.items())
    folders = {"each run's scratch areas": plan.workdir / Path(plan.of(name).run_file(0, "result.txt")).parent.parent}
    for dataset_id, (maker, _) in plan.made_in_image.items():
        if maker == name and not (plan.workdir / plan.dataset_dir(dataset_id)).exists():
            folders[f"the scratch areas of the one-off job that makes {dataset_id}"] = plan.workdir / plan.made_in_image_dir(dataset_id)
    problems = []
    for whose, folder in folders.items():
        existing = next(parent for parent in (folder, *folder.parents) if parent.exists())
        free = shutil.disk_usage(existing).free / 1e9
        if free < need:
            message = (
                f"{whose} need {need:g} GB ({areas}) under {folder}, but its filesystem has {free:.1f} GB free: "
                f"free space, or set the sizes this site needs in full_scratch ({{{name}: {{AREA: GB}}}})"
            )
            problems.append(Problem("scratch", name, message))
    return problems


def _dataset_problems(plan: Plan, dataset_id: str, env: Mapping[str, str]) -> list[Problem]:
    if (plan.workdir / plan.dataset_dir(dataset_id)).exists() or (plan.workdir / plan.verified_record(dataset_id)).exists():
        return []  # downloaded (or verified): nothing more to fetch
    dataset = registry.load_dataset(dataset_id, plan.workdir)
    source = dataset.source
    if source.protocol == "r2" and source.credentials_required and not any(all(env.get(var) for var in group) for group in R2_CREDENTIALS):
        return [
            Problem(
                "credentials",
                dataset_id,
                "to download it, MLCommons R2 needs access (members only): export MLPERF_WF_CF_ACCESS_CLIENT_ID and "
                "MLPERF_WF_CF_ACCESS_CLIENT_SECRET (a Cloudflare Access service token) or MLPERF_WF_CF_ACCESS_TOKEN "
                f"({registry.dataset_where(dataset_id)} license says how to get it)",
            )
        ]
    if source.protocol == "huggingface" and source.credentials_required and not env.get(HUB_CREDENTIALS):
        return [
            Problem(
                "credentials",
                dataset_id,
                f"to download it, the Hugging Face repository {source.repository} needs a token: export {HUB_CREDENTIALS} "
                "(an account that accepted the repository's terms)",
            )
        ]
    if source.protocol == "external":
        return [Problem("data", dataset_id, f"not downloaded by the workflow and not in {plan.dataset_dir(dataset_id)}: {source.instructions}")]
    if source.protocol == "fiftyone":
        if not (plan.workdir / FETCHED_DIR / dataset_id).exists():
            return [Problem("data", dataset_id, f"its fetch has not written {FETCHED_DIR}/{dataset_id}: {source.instructions}")]
    return []


def config_problems(
    config: dict, project_root: Path, workdir: Path, benchmarks: Iterable[str] | None = None, environ: Mapping[str, str] | None = None
) -> list[Problem]:
    """Every problem of ``config``'s full-scale plan for ``benchmarks`` (default: the config's), also when a benchmark's
    ruleset does not resolve (which stops the plan from loading: the other problems are still found)."""
    from mlperf_wf.plan import plan as planning

    settings = WorkflowConfig.parse({**config, "scale": Scale.FULL})
    names = list(dict.fromkeys(benchmarks or settings.benchmarks))
    known = registry.benchmark_names()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ConfigError(f"preflight: {unknown} names no benchmark; known: {', '.join(known)}")
    loadable = tuple(name for name in settings.benchmarks if _ruleset_resolves(name, settings.ruleset))
    plan = planning.load(settings.model_copy(update={"benchmarks": loadable}), project_root=project_root, workdir=workdir)
    return plan_problems(plan, names, environ=environ)


def _ruleset_resolves(name: str, ruleset: str) -> bool:
    try:
        mlperf_rules.resolve_ruleset(registry.load_benchmark(name).submission_benchmark, ruleset)
    except ConfigError:
        return False
    return True


def unloadable_config(config: dict, project_root: Path, workdir: Path, error: ConfigError) -> str:
    """What to say when the plan refuses ``config``: at full scale, when the preflight can still look (a ruleset a
    benchmark is not part of stops the plan), every problem at once; otherwise the plan's one line."""
    if config.get("scale") == Scale.FULL:
        try:
            problems = config_problems(config, project_root, workdir)
        except ConfigError:
            problems = []
        if problems:
            return describe(problems)
    return str(error)


def tracker(plan: Plan, main_process: bool) -> Tracker | None:
    """A :class:`Tracker` for a full-scale Snakemake invocation's main process; None at tiny scale (nothing to check)
    and in jobs (they read the Snakefile again on their nodes)."""
    return Tracker(plan) if plan.scale == Scale.FULL and main_process else None


def describe(problems: list[Problem], what: str = "the full-scale plan") -> str:
    """The problems as one block: a heading line, then one line each."""
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    return "\n".join([f"preflight: {count} in {what}:", *(f"  - {problem}" for problem in problems)])


def warning(problems: list[Problem], what: str) -> str:
    """The dry run's warning block: the problems (each from a line of its own that starts with ``  - ``), and that a
    real run refuses on them."""
    # each problem stays one line: it is found and quoted by its line (the commands are what a dry run wraps)
    lines = f"WARNING: mlperf-wf {describe(problems, what)}".splitlines()
    return "\n".join([*lines, "A run without -n refuses to start until they are fixed."])


def targeted_benchmarks(plan: Plan, targets: Iterable[str]) -> list[str] | None:
    """The benchmarks a command line's targets name (``results/<name>/...``, ``resources/full/prepared/<name>...``), the
    config's when it names none (the default target); None when a target is something else (a dataset, a rule)."""
    names: list[str] = []
    for target in targets:
        parts = Path(target).parts
        if len(parts) > 1 and parts[0] == "results" and parts[1] in plan.benchmarks:
            names.append(parts[1])
        elif len(parts) > 3 and parts[:3] == ("resources", "full", "prepared") and parts[3] in plan.benchmarks:
            names.append(parts[3])
        else:
            return None
    return list(dict.fromkeys(names)) or list(plan.settings.benchmarks)


class Tracker:
    """What one Snakemake invocation plans: the benchmarks of its train jobs and the datasets of its download jobs, as
    the input functions see them while the DAG is built, or as the DAG's jobs to run name them."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.benchmarks: dict[str, None] = {}
        self.datasets: dict[str, None] = {}
        self.reported = False
        """Set once the problems were shown (or the run refused), so that they are not shown twice."""
        self.early: tuple[list[Problem], str] | None = None
        """The problems a dry run listed before its jobs (:meth:`show_early`), and what they were of."""

    def show_early(self, targets: Iterable[str]) -> str | None:
        """A dry run's problems before Snakemake lists its jobs, as far as the command line and the folder tell them
        before the DAG is built: the targeted benchmarks with a run left to make, the datasets of theirs not downloaded
        yet. Returns the warning block (None when there is nothing to say or the targets are not benchmarks')."""
        named = targeted_benchmarks(self.plan, targets)
        if named is None:
            return None
        workdir = self.plan.workdir
        benchmarks = [name for name in named if not all((workdir / path).exists() for path in self.plan.of(name).run_files("result.txt"))]
        datasets = [
            dataset_id
            for name in benchmarks
            for dataset_id in _datasets_of(self.plan, name)
            if dataset_id not in self.plan.made_in_image and not (workdir / self.plan.dataset_dir(dataset_id)).exists()
        ]
        datasets = list(dict.fromkeys(datasets))
        problems = plan_problems(self.plan, benchmarks, datasets)
        if not problems:
            return None
        self.early = (problems, f"the full-scale plan of {', '.join(benchmarks) or ', '.join(datasets)}")
        return warning(*self.early)

    def closing(self, problems: list[Problem], what: str) -> str | None:
        """What the dry run prints at its end: one line where the problems are those it listed first, else the block."""
        if self.early is not None and (problems, what) == self.early:
            count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
            return f"mlperf-wf preflight: the {count} listed before the jobs stop a run without -n until they are fixed."
        return f"\n{warning(problems, what)}" if problems else None

    def saw_benchmark(self, name: str) -> None:
        self.benchmarks[name] = None

    def saw_dataset(self, dataset_id: str) -> None:
        self.datasets[dataset_id] = None

    def planned_benchmarks(self, jobs: Iterable[tuple[str, Mapping[str, str]]] | None = None) -> list[str]:
        """The benchmarks of the train jobs to run when given, else every benchmark the input functions saw."""
        if jobs is None:
            return list(self.benchmarks)
        return list(dict.fromkeys(wildcards["benchmark"] for rule, wildcards in jobs if rule == "train"))

    def problems(self, jobs: Iterable[tuple[str, Mapping[str, str]]] | None = None) -> tuple[list[Problem], str]:
        """The problems, and what was checked: the ``(rule, wildcards)`` of the jobs to run when given (train jobs name
        a benchmark, download jobs a dataset), else everything the input functions saw."""
        jobs = None if jobs is None else list(jobs)
        benchmarks = self.planned_benchmarks(jobs)
        datasets = list(self.datasets) if jobs is None else [wildcards["dataset"] for rule, wildcards in jobs if rule == "download"]
        datasets = list(dict.fromkeys(datasets))
        named = ", ".join(benchmarks) or ", ".join(datasets)
        return plan_problems(self.plan, benchmarks, datasets), f"the full-scale plan of {named}"


# ---- the expected time of a run (published results or model FLOPs) ----

ASSUMED_FAMILY = "H100"
"""The accelerator the dry run's estimate assumes where the system description names none the table knows."""


@dataclass(frozen=True)
class RunTime:
    """What one full-scale run of a plan is expected to take, against the walltime it is given."""

    benchmark: str
    nodes: int
    gpus_per_node: int
    family: str
    assumed: str | None
    """Why the family is assumed (the system description names none the table knows); None: it is the system's."""
    estimate: published.TimeEstimate | None
    """None: no published result fits and no FLOPs estimate can be made."""
    walltime_minutes: int
    """The walltime the run is given (definition or ``full_geometry``)."""

    @property
    def needed_walltime(self) -> int | None:
        """The walltime the estimate asks for (:func:`mlperf_wf.plan.sizing.walltime_for`)."""
        from mlperf_wf.plan import sizing

        return sizing.walltime_for(self.estimate.minutes) if self.estimate else None

    @property
    def holds(self) -> bool:
        """Whether the walltime holds the expected time to train and the start-up (False: every run would end
        aborted)."""
        from mlperf_wf.plan import sizing

        return self.estimate is None or self.walltime_minutes >= self.estimate.minutes + sizing.STARTUP_MINUTES


def run_time(plan, name: str) -> RunTime | None:
    """The expected time to train of a full-scale run of ``name`` in ``plan`` on its geometry and the system
    description's accelerator (:data:`ASSUMED_FAMILY` where it names none the table knows); None where the plan
    cannot say (no batch can be planned: the preflight says why)."""
    from mlperf_wf.plan import sizing

    try:
        settings = plan.of(name).launch_settings()
        ruleset = plan.of(name).ruleset()
    except ConfigError:
        return None
    bench = plan.bench(name)
    family = published.family_of(plan.accelerator_model_name())
    assumed = None
    if family is None:
        assumed = f"assumed {ASSUMED_FAMILY}: config/systems/{plan.settings.submission.platform}.yaml names no accelerator the table knows"
        family = ASSUMED_FAMILY
    samples = None
    table = sizing.rcp_table(bench.submission_benchmark, ruleset)
    if table is not None and bench.full.sizing is not None:
        gbs = settings.batch.split.gbs if settings.batch else bench.full.sizing.global_batch_size
        mean = sizing.coverage(table, gbs).mean
        samples = sizing.samples(table, mean, bench.full.sizing) if mean else None
    count = settings.nodes * settings.gpus_per_node
    return RunTime(name, settings.nodes, settings.gpus_per_node, family, assumed, published.estimate(name, family, count, samples), settings.walltime_minutes)
