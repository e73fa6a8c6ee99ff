"""The launch of one training run, for every launch backend, as part of its job spec.

Each run is a job spec (``mlperf_wf.run.job_spec.JobSpec``): :func:`full_scale_spec` and :func:`tiny_spec` fill its
process (the command with its folder, environment and devices), image, mounts and geometry from the benchmark's
definition and the config, and the plan (``BenchmarkPlan.job_spec``) adds the steps around the launch and the scheduler request.
The train rule writes the spec and runs it with ``mlperf-wf job run``, where the launcher's class
(``mlperf_wf.run.launchers``) renders the command. Which launcher is
chosen by the ``launcher`` config key:

- ``local``: the tiny trainer directly, or under ``torchrun --standalone`` with
  ``tiny_processes`` > 1 (gloo on CPU, so the distributed path really runs). At
  full scale, the reference command on the host (for a node that already has
  the reference's software).
- ``docker``: ``docker run --gpus all --ipc=host`` of the pinned image, with the
  prepared data and every input role the runs read mounted read-only, the result
  folder read-write, and the named environment variables passed through. One node.
  An AMD (ROCm) image (``full.accelerator: amd``) gets ``--device=/dev/kfd --device=/dev/dri`` instead of
  ``--gpus all``, ``apptainer --rocm`` instead of ``--nv``, and those devices in pyxis's mounts. Other host
  devices a reference needs (``full.devices``, e.g. ``/dev/fuse``) are ``--device`` for docker, ``--bind`` for
  apptainer and a mount for pyxis.
- ``apptainer``: ``apptainer exec --nv`` of ``docker://registry/repository@digest``
  (Apptainer refuses a tag and a digest together), the same mounts as ``--bind``,
  a writable tmpfs over the read-only image and a per-run home folder (the
  references write beside their scripts and under ``$HOME``). One node.
- ``pyxis``: ``srun`` with ``--container-image`` (enroot's ``registry#repository:tag``
  form, the digest in the tag's place), ``--container-mounts``, ``--container-writable``,
  ``--container-remap-root`` and ``--no-container-mount-home``, as NVIDIA's run.sub
  launches, from the train job's shell. With several tasks the job asks for the ``mpi``
  resource, so the SLURM jobstep runs it straight from the batch script; a one-task job
  (the executor refuses ``mpi`` there) runs inside the jobstep's ``srun -n1``, so the
  srun line carries ``--overlap``. ``MASTER_ADDR`` is the allocation's first
  host and ``MASTER_PORT`` is fixed, both exported into the container. With
  ``process_model: per_node`` the reference command is a launcher (accelerate,
  torchrun) started once per node; with ``per_gpu`` srun starts one task per
  GPU and each task gets ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` from SLURM.

Before every full-scale run the line drops the page cache, as the rules ask where the reference logs
``cache_clear``, the same way for every benchmark and launcher (:func:`drop_page_cache`): on each node of the
run (pyxis: one ``srun`` task per node, beside the job's own steps) or on this host (docker, apptainer, local),
``sync`` then ``echo 3 > /proc/sys/vm/drop_caches`` (``sudo -n sysctl vm.drop_caches=3`` where only that is
allowed, as NVIDIA's run.sub). Whether it worked goes to the run as ``MLPERF_WF_CACHE_CLEARED`` (``true`` or
``false``), which the round hooks log as ``cache_clear`` instead of the references' hard-coded true; a drop that
fails does not fail the run, it says so in the job's log.

At full scale the reference's mllog writer is pointed at the run's result file
through ``COMPLIANCE_FILE`` (each process writing a file of its own in ``MLPERF_WF_MLLOG_PARTS``, which the train job
merges into the result file after the run: one writer per file), the workflow's submission values reach the run as
``MLPERF_SUBMISSION_*``, and the benchmark's round patches (``<its folder>/container/patches``,
loaded by ``containers/hooks/sitecustomize.py``) are baked into its image; the ``local``
launcher puts the same folders on ``PYTHONPATH``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mlperf_wf.config.registry import SIZING_PLACEHOLDERS, BenchmarkDef, Container, hyperparameter_keys, placeholders
from mlperf_wf.errors import ConfigError
from mlperf_wf.plan import node_roles
from mlperf_wf.plan.sizing import PlannedBatch
from mlperf_wf.run import job_spec, launchers, mllog_parts
from mlperf_wf.run.job_spec import JobSpec
from mlperf_wf.run.launchers import (  # noqa: F401 - the launch lines' pieces, named here for the plan's callers
    AMD_DEVICES,
    CACHE_CLEARED_VARIABLE,
    CONTAINER_HOME,
    MASTER_PORT,
    MLLOG_PARTS_VARIABLE,
    NODELIST,
    drop_page_cache,
    raise_limits,
    shell_join,
)

LAUNCHERS = ("local", "docker", "apptainer", "pyxis")


@dataclass(frozen=True)
class RunPaths:
    """Host paths one run reads and writes."""

    prepared: Path
    """Prepared dataset tree (``resources/<scale>/prepared/<benchmark>/dataset``: links into ``../shards``)."""
    result_file: Path
    """The run's mllog result file."""
    inputs: dict[str, Path] = field(default_factory=dict)
    """Input role -> dataset folder, for every role the benchmark's runs read (``used_by: [train]``)."""
    output_cache: Path | None = None
    """Snakemake's output cache, where cached shards really live (their folders link there)."""
    writable: tuple[str, ...] = ()
    """Input roles this job writes, mounted read-write and created first: the role a one-off job of the image makes
    (``full.made_in_image``); every run mounts its inputs read-only."""


def output_cache_dir() -> Path | None:
    """``$SNAKEMAKE_OUTPUT_CACHE`` when the workflow runs with ``--cache``."""
    import os

    value = os.environ.get("SNAKEMAKE_OUTPUT_CACHE")
    return Path(value) if value else None


@dataclass(frozen=True)
class Launch:
    """How one run is launched."""

    launcher: str
    """local, docker, apptainer or pyxis."""
    nodes: int = 1
    """Nodes of the run (full scale)."""
    gpus_per_node: int = 8
    """Accelerators per node (full scale)."""
    env_passthrough: tuple[str, ...] = ()
    """Host environment variables passed into the container by name (values never appear on the command line)."""
    tiny_processes: int = 1
    """Processes of a tiny run (torchrun with gloo when > 1)."""
    env: tuple[tuple[str, str], ...] = ()
    """Environment the workflow gives every full-scale run (``MLPERF_SUBMISSION_*``)."""
    arguments: tuple[tuple[str, str], ...] = ()
    """Reference-command flags whose value this site sets (``full_arguments``), e.g. ``("--max_steps", "800")``."""
    workdir: str | None = None
    """Folder the reference command starts in (``full_workdir``); default the definition's container workdir."""
    extra_mounts: tuple[tuple[str, str, str], ...] = ()
    """Site mounts ``(host, container, ro|rw)`` added to every container run (``full_mounts``)."""
    hooks: HostHooks | None = None
    """Where this host's copy of the round patches is, for the ``local`` launcher."""
    walltime_minutes: int = 240
    """Time limit of the run's job (the definition's ``walltime_minutes``): the command's ``{walltime_minutes}``."""
    batch: PlannedBatch | None = None
    """The run's global batch, its split and RCP hyperparameters (``full.sizing``): ``{gbs}``, ``{hp[KEY]}`` ..."""
    replaced_words: tuple[tuple[str, str], ...] = ()
    """Whole words of the reference command and what runs instead (a one-off job of the image: ``full.made_in_image``)."""
    quality_target: float | None = None
    """The quality the runs stop at under the plan's round and division (mlperf-logging's rules): the command's and
    the environment's ``{quality_target}``; a ``Launch`` made without a plan takes the latest round's closed target."""
    segment_nodes: int | None = None
    """Nodes of the NVLink-domain segment the run is placed in (``full.geometry.segment_nodes`` where the system's
    domains span it): the command's ``{segment_nodes}`` and the job's ``sbatch --segment``; None: none."""
    rehearsal: bool = False
    """Whether the geometry is a rehearsal's (``full_geometry.<name>.rehearsal``): roles split below the reference's ratio."""
    appended_words: tuple[str, ...] = ()
    """Words appended to the reference command (``mlperf-wf rehearse``'s step limit, ``full.rehearsal_stop``)."""


class Minutes(int):
    """A placeholder's minutes; the format spec ``-N`` gives N minutes fewer, e.g. ``{walltime_minutes:-15}`` for a
    reference that must stop itself 15 minutes before its job's time limit (gpt3's ``--exit-duration-in-mins``)."""

    def __format__(self, spec: str) -> str:
        if spec.startswith("-") and spec[1:].isdigit():
            return str(int(self) - int(spec[1:]))
        return format(int(self), spec)


HostHooks = job_spec.HostHooks
"""The start-up hooks and a benchmark's round patches in this checkout (``local`` launcher)."""


def tiny_command(train_args: list[str], launch: Launch) -> list[str]:
    """``mlperf-wf train ...`` for one process, or under torchrun for several."""
    if launch.tiny_processes > 1:
        return ["torchrun", "--standalone", f"--nproc-per-node={launch.tiny_processes}", "-m", "mlperf_wf", "train", *train_args]
    return ["mlperf-wf", "train", *train_args]


def tiny_spec(train_args: list[str], launch: Launch, image: str = "", workdir: Path | None = None, host_mounts: list[Path] | None = None) -> JobSpec:
    """The spec of a tiny run's launch: the trainer on the host, or (``image``) inside a container where this host's
    Python, venv and project are bind-mounted read-only at the same paths and the workflow directory read-write, so
    the image only supplies a Linux userland."""
    command = tiny_command(train_args, launch)
    resources = job_spec.Resources(runtime=1)
    geometry = job_spec.Geometry(processes=launch.tiny_processes)
    if not image:
        return JobSpec(scale="tiny", launcher="local", process=job_spec.Process(command=tuple(command)), geometry=geometry, resources=resources)
    if launch.launcher != "docker":
        raise ConfigError(f"tiny-scale runs in a container use launcher docker, not {launch.launcher!r}")
    host_mounts = host_mounts or []
    mounts = [job_spec.Mount(host=str(path), container=str(path), mode="ro") for path in host_mounts]
    mounts.append(job_spec.Mount(host=str(workdir), container=str(workdir), mode="rw"))
    env = {"PATH": f"{Path(host_mounts[0]) / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir)}
    process = job_spec.Process(command=tuple(command), workdir=str(workdir), env=env, passthrough=launch.env_passthrough)
    return JobSpec(
        scale="tiny",
        launcher="docker",
        image=job_spec.Image(reference=image, launched=image),
        mounts=tuple(mounts),
        process=process,
        geometry=geometry,
        resources=resources,
    )


def reference_command(bench: BenchmarkDef, run: int, seed: int, paths: RunPaths, launch: Launch, where: dict[str, str] | None = None) -> list[str]:
    """The reference command for one run; ``where`` maps prepared/results/each run role to paths (default: the container mounts)."""
    mounts = where or {**bench.full.mounts, "prepared": f"{bench.full.mounts['prepared']}/{paths.prepared.name}"}
    values = {
        **{role: mounts[role] for role in bench.roles_for("train")},
        "seed": str(seed),
        "run": str(run),
        "prepared": mounts["prepared"],
        "results": mounts["results"],
        "result_file": f"{mounts['results']}/{paths.result_file.name}",
        "nodes": str(launch.nodes),
        "gpus_per_node": str(launch.gpus_per_node),
        "processes": str(launch.nodes * launch.gpus_per_node),
        "master_addr": "${MASTER_ADDR}",
        "master_port": "${MASTER_PORT}",
        "node_rank": "${SLURM_NODEID}",
        "walltime_minutes": Minutes(launch.walltime_minutes),
        # Hydra's None where the run has no segment (the system's NVLink domains are single nodes)
        "segment_nodes": str(launch.segment_nodes) if launch.segment_nodes else "null",
        **_batch_values(bench, launch),
        **_node_split_values(bench, launch),
    }
    if any("quality_target" in placeholders(part) for part in bench.full.command):
        values["quality_target"] = quality_target_text(bench, launch)
    replaced = dict(launch.replaced_words)  # the definition checks that each is a word of its command
    command = [replaced.get(part, part).format(**values) for part in bench.full.command]
    command = [*override_arguments(bench, command, launch.arguments), *launch.appended_words]
    if launch.nodes > 1:
        command = _insert_after_launcher(command, [a.format(**values) for a in bench.full.multi_node_args])
    return command


def node_split(bench: BenchmarkDef, launch: Launch) -> node_roles.NodeRoles | None:
    """The run's nodes of each role (``full.geometry.node_split``); None where every node trains; ``ConfigError`` (one
    line) where the nodes cannot split."""
    split = bench.full.geometry.node_split
    return node_roles.split_nodes(bench.name, split, launch.nodes, launch.segment_nodes, launch.rehearsal) if split else None


def _node_split_values(bench: BenchmarkDef, launch: Launch) -> dict[str, str]:
    roles = node_split(bench, launch)
    return {"train_nodes": str(roles.train), "generation_nodes": str(roles.generation)} if roles else {}


def override_arguments(bench: BenchmarkDef, command: list[str], arguments: tuple[tuple[str, str], ...]) -> list[str]:
    """Give each flag of ``arguments`` its new value. A flag the reference command does not have is an
    error, never appended: a misspelt flag must not be silently ignored by the reference's parser."""
    command = list(command)
    for flag, value in arguments:
        if flag not in command[:-1]:
            flags = sorted(word for word in command if word.startswith("--"))
            raise ConfigError(f"config: full_arguments.{bench.name}: {flag!r} is not a flag of its reference command; its flags: {', '.join(flags)}")
        command[command.index(flag) + 1] = value
    return command


def argument_deviations(bench: BenchmarkDef, arguments: tuple[tuple[str, str], ...]) -> list[str]:
    """The site's ``full_arguments`` that replace a value the plan derives from the batch (an RCP value, the split, a
    step count in samples), one line each for the dry run's table: named deviations, never silent ones."""
    lines = []
    words = list(bench.full.command)
    for flag, value in arguments:
        at = words.index(flag) + 1 if flag in words[:-1] else None
        key = planned_by_the_batch(bench, words[at]) if at is not None else None
        if key:
            lines.append(f"{flag} {value}  DEVIATION: full_arguments replaces the plan's {words[at]} ({key} sets it and keeps this table in charge)")
    return lines


def planned_by_the_batch(bench: BenchmarkDef, word: str) -> str | None:
    """The config key that sets a command word derived from the batch (``{hp[KEY]}``, ``{gbs...}``, the split, a
    rule's value); None for any other word."""
    keys = hyperparameter_keys(word)
    if keys:
        return f"full_hyperparameters.{bench.name}.{keys[0]}"
    if any(name in SIZING_PLACEHOLDERS for name in placeholders(word)):
        return f"full_hyperparameters.{bench.name}.global_batch_size or full_geometry.{bench.name}"
    return None


def _insert_after_launcher(command: list[str], extra: list[str]) -> list[str]:
    """Put multi-node launcher flags right after the launcher word (``accelerate launch``/``torchrun``)."""
    head = 2 if command[:2] == ["accelerate", "launch"] else 1
    return command[:head] + extra + command[head:]


def _batch_values(bench: BenchmarkDef, launch: Launch) -> dict[str, object]:
    """The sizing placeholders of a run: the plan's batch, or the definition's at its latest round on the launch's
    geometry (a ``Launch`` made without a plan)."""
    from mlperf_wf.config import mlperf_rules
    from mlperf_wf.plan import sizing

    if bench.full.sizing is None or not sizing.wired(bench):
        return {}
    batch = launch.batch
    if batch is None:
        ruleset = mlperf_rules.resolve_ruleset(bench.submission_benchmark, "latest")
        batch = sizing.plan_batch(bench, ruleset, launch.nodes, launch.gpus_per_node)
    return batch.format_values()


def quality_target_text(bench: BenchmarkDef, launch: Launch) -> str:
    """``{quality_target}``: the launch's target, or the latest round's closed one, as its shortest number."""
    from mlperf_wf.config import mlperf_rules

    if launch.quality_target is not None:
        return f"{launch.quality_target:g}"
    ruleset = mlperf_rules.resolve_ruleset(bench.submission_benchmark, "latest")
    return f"{mlperf_rules.quality_target(bench.submission_benchmark, ruleset).value:g}"


def definition_env(bench: BenchmarkDef, launch: Launch) -> dict[str, str]:
    """The definition's ``full.env`` with its placeholders filled for ``launch``: the batch's (``GBS: "{gbs}"``: a
    reference reading its batch from the environment gets the plan's) and ``{quality_target}`` (the rules' target,
    where the reference reads it from the environment)."""
    values: dict[str, object] = {**_batch_values(bench, launch)}
    env = {}
    for key, value in bench.full.env.items():
        names = set(placeholders(value))
        if "quality_target" in names and "quality_target" not in values:
            values["quality_target"] = quality_target_text(bench, launch)
        env[key] = value.format(**values) if names and names <= values.keys() else value  # a batch not wired keeps its text
    return env


def _container_env(bench: BenchmarkDef, paths: RunPaths, seed: int, launch: Launch) -> dict[str, str]:
    env = definition_env(bench, launch)
    env.update(dict(launch.env))
    env["COMPLIANCE_FILE"] = f"{bench.full.mounts['results']}/{paths.result_file.name}"
    env[MLLOG_PARTS_VARIABLE] = f"{bench.full.mounts['results']}/{mllog_parts.PARTS_FOLDER}"
    env["SEED"] = str(seed)
    return env


def _mounts(bench: BenchmarkDef, paths: RunPaths, launch: Launch, scratch: dict[str, Path]) -> list[tuple[str, str, str]]:
    """Read-only prepared data (the whole prepared folder, so the dataset tree's relative links into
    ``shards/`` resolve), every input role the runs read (read-only), the result folder, the
    run's ``scratch`` folders where the reference writes, the output cache at its own path (cached shards are
    links into it), and the site's own mounts."""
    mounts = bench.full.mounts
    chosen = [(str(paths.prepared.parent.resolve()), mounts["prepared"], "ro")]
    for role in bench.roles_for("train"):
        chosen.append((str(paths.inputs[role].resolve()), mounts[role], "rw" if role in paths.writable else "ro"))
    chosen.append((str(paths.result_file.parent.resolve()), mounts["results"], "rw"))
    chosen += [(str(folder), bench.full.scratch[name].mount, "rw") for name, folder in scratch.items()]
    if paths.output_cache is not None:
        cache = str(paths.output_cache.resolve())
        chosen.append((cache, cache, "ro"))
    return chosen + list(launch.extra_mounts)


def scratch_folders(bench: BenchmarkDef, paths: RunPaths) -> dict[str, Path]:
    """Host folder of each scratch area of a run: ``<run folder>/scratch/<name>``."""
    return {name: paths.result_file.parent.resolve() / "scratch" / name for name in bench.full.scratch}


def srun_step_flags(bench: BenchmarkDef, nodes: int, gpus_per_node: int) -> list[str]:
    """The srun step that starts ``bench``'s processes on the allocation's nodes (pyxis), before its container options."""
    return launchers.srun_step_flags(nodes, gpus_per_node, bench.full.process_model == "per_gpu", bench.full.srun_mpi)


def geometry_problem(bench: BenchmarkDef, launch: Launch) -> str | None:
    """Why the run's nodes cannot be launched this way (one line), or None."""
    # per_gpu: srun starts every rank on every node and each reads its rank from SLURM, so no launcher flags are needed
    if launch.nodes > 1 and not bench.full.multi_node_args and bench.full.process_model != "per_gpu":
        return f"{bench.name}: {launch.nodes} nodes requested, but its reference command runs on one node (no full.multi_node_args); set nodes: 1"
    if launch.nodes > 1 and launch.launcher in ("docker", "apptainer", "local"):
        return (
            f"{bench.name}: {launch.nodes} nodes need the pyxis launcher; {launch.launcher} runs on one node "
            f"(set launcher: pyxis, or full_geometry: {{{bench.name}: {{nodes: 1}}}})"
        )
    try:
        node_split(bench, launch)
    except ConfigError as err:
        return str(err)
    return None


def full_scale_spec(bench: BenchmarkDef, run: int, seed: int, paths: RunPaths, launch: Launch, image: Container | None = None) -> JobSpec:
    """The spec of one full-scale run's launch with the chosen backend (``image``: default the definition's): the
    process, image, mounts and geometry, the page-cache drop and the folders the container binds. The plan adds the
    other steps and the scheduler request (``BenchmarkPlan.job_spec``)."""
    if launch.launcher not in LAUNCHERS:
        raise ConfigError(f"launcher is {launch.launcher!r}; allowed: {', '.join(LAUNCHERS)}")
    problem = geometry_problem(bench, launch)
    if problem:
        raise ConfigError(problem)
    missing = sorted(set(bench.roles_for("train")) - set(paths.inputs))
    if missing:
        raise ConfigError(f"{bench.name}: the run needs the folders of input roles {missing}")
    env = _container_env(bench, paths, seed, launch)
    per_gpu = bench.full.process_model == "per_gpu"
    geometry = job_spec.Geometry(
        nodes=launch.nodes,
        gpus_per_node=launch.gpus_per_node,
        tasks=launch.nodes * (launch.gpus_per_node if per_gpu else 1),
        process_model=bench.full.process_model,
    )
    process = {
        "workdir": launch.workdir or bench.full.workdir,
        "accelerator": bench.full.accelerator,
        "devices": tuple(bench.full.devices),
        "ulimits": dict(bench.full.ulimits),
        "srun_mpi": bench.full.srun_mpi,
    }
    spec = {"scale": "full", "launcher": launch.launcher, "result_file": str(paths.result_file), "geometry": geometry}
    spec["resources"] = job_spec.Resources(runtime=launch.walltime_minutes, nodes=launch.nodes)
    if launch.launcher == "local":
        # the reference command on this host (its software installed here), with host paths
        host = {"prepared": str(paths.prepared.resolve()), "results": str(paths.result_file.parent.resolve())}
        host.update({role: str(paths.inputs[role].resolve()) for role in bench.roles_for("train")})
        result = paths.result_file.resolve()
        env = {**env, "COMPLIANCE_FILE": str(result), MLLOG_PARTS_VARIABLE: str(mllog_parts.parts_folder(result))}
        command = reference_command(bench, run, seed, paths, launch, where=host)
        process = job_spec.Process(command=tuple(command), env=env, hooks=launch.hooks, **process)
        return JobSpec(process=process, steps=job_spec.Steps(drop_page_cache=True), **spec)
    command = reference_command(bench, run, seed, paths, launch)
    scratch_by_name = scratch_folders(bench, paths)
    image = image or bench.full.container
    launched = {"docker": image.docker_reference, "apptainer": image.apptainer_reference, "pyxis": image.enroot_reference}
    # the folders the job writes: the per-run scratch areas, and the input a one-off job of the image makes
    folders = [*scratch_by_name.values(), *(paths.inputs[role].resolve() for role in paths.writable)]
    home = None
    if launch.launcher == "apptainer":
        home = str(paths.result_file.parent.resolve() / "home")
        folders.insert(0, home)
    passthrough = (*launch.env_passthrough, CACHE_CLEARED_VARIABLE)  # the drop's outcome, set before the launch
    return JobSpec(
        image=job_spec.Image(reference=image.reference, digest=image.digest, launched=launched[launch.launcher]),
        mounts=tuple(job_spec.Mount(host=host, container=container, mode=mode) for host, container, mode in _mounts(bench, paths, launch, scratch_by_name)),
        process=job_spec.Process(command=tuple(command), env=env, passthrough=passthrough, home=home, **process),
        steps=job_spec.Steps(drop_page_cache=True, make_folders=tuple(str(folder) for folder in folders)),
        **spec,
    )


def node_check_step(
    attempts: Path, excluded: Path, prepared: Path, inputs: dict[str, tuple[Path, Path]], check, gpu_tflops: float | None
) -> job_spec.NodeCheck:
    """The node-check step of a job: ``attempts``, the job's node-check folder (each attempt a subfolder named by its
    job); ``check``, the config's ``node_check``; ``gpu_tflops``: what a GPU of the system description's model must
    show where the config sets no expectation."""
    return job_spec.NodeCheck(
        attempts=str(attempts),
        excluded=str(excluded),
        prepared=str(prepared),
        inputs={role: (str(folder), str(record)) for role, (folder, record) in inputs.items()},
        check=check,
        gpu_tflops=gpu_tflops,
    )
