"""Command lines of one training run, for every launch backend.

The train rule runs one command per run; which command is chosen by the
``launcher`` config key:

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

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from mlperf_wf.config.registry import SIZING_PLACEHOLDERS, BenchmarkDef, Container, hyperparameter_keys, placeholders
from mlperf_wf.errors import ConfigError
from mlperf_wf.plan import node_roles
from mlperf_wf.plan.sizing import PlannedBatch
from mlperf_wf.run import mllog_parts
from mlperf_wf.run.page_cache import DROP_CACHES_FILE, drop_on_this_node

LAUNCHERS = ("local", "docker", "apptainer", "pyxis")
MASTER_PORT = 29500
CONTAINER_HOME = "/home/mlperf-wf"
"""Home folder of an Apptainer run (bound from the run's own folder: caches, compiled kernels)."""
MLLOG_PARTS_VARIABLE = "MLPERF_WF_MLLOG_PARTS"
"""The folder where each process of a run writes its own MLLOG lines (the images' hooks read it; the train job merges
the files into the result file after the run: ``mlperf_wf.run.mllog_parts``)."""
CACHE_CLEARED_VARIABLE = "MLPERF_WF_CACHE_CLEARED"
"""``true`` when the page cache was dropped on every node of the run before it started, else ``false``; the round
hooks (``containers/hooks``) log it as ``cache_clear``."""


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


class Minutes(int):
    """A placeholder's minutes; the format spec ``-N`` gives N minutes fewer, e.g. ``{walltime_minutes:-15}`` for a
    reference that must stop itself 15 minutes before its job's time limit (gpt3's ``--exit-duration-in-mins``)."""

    def __format__(self, spec: str) -> str:
        if spec.startswith("-") and spec[1:].isdigit():
            return str(int(self) - int(spec[1:]))
        return format(int(self), spec)


@dataclass(frozen=True)
class HostHooks:
    """The start-up hooks and a benchmark's round patches in this checkout (``local`` launcher)."""

    folders: tuple[str, ...]
    """``containers/hooks`` and ``<its folder>/container/patches``, absolute, put first on ``PYTHONPATH``."""
    modules: tuple[str, ...]
    """Patch modules for ``MLPERF_WF_HOOKS``."""


def tiny_command(train_args: list[str], launch: Launch) -> list[str]:
    """``mlperf-wf train ...`` for one process, or under torchrun for several."""
    if launch.tiny_processes > 1:
        return ["torchrun", "--standalone", f"--nproc-per-node={launch.tiny_processes}", "-m", "mlperf_wf", "train", *train_args]
    return ["mlperf-wf", "train", *train_args]


def tiny_container(train_args: list[str], launch: Launch, image: str, workdir: Path, host_mounts: list[Path]) -> list[str]:
    """A tiny run inside a container: this host's Python, venv and project are bind-mounted read-only
    at the same paths, the workflow directory read-write, so the image only supplies a Linux userland."""
    if launch.launcher != "docker":
        raise ConfigError(f"tiny-scale runs in a container use launcher docker, not {launch.launcher!r}")
    mounts = [(str(path), str(path), "ro") for path in host_mounts] + [(str(workdir), str(workdir), "rw")]
    env = {"PATH": f"{Path(host_mounts[0]) / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir)}
    return docker_argv(image, str(workdir), mounts, env, launch.env_passthrough, tiny_command(train_args, launch), gpus=None)


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
    command = override_arguments(bench, command, launch.arguments)
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


_WITH_VARIABLES = re.compile(r"[\w=./:,-]*(\$\{[A-Z_][A-Z0-9_]*\}[\w=./:,-]*)+")


def _join_keep_variables(argv: list[str]) -> str:
    """shlex.join, except that words made of plain characters and ``${VAR}`` references are
    double-quoted, so the shell that runs the line (the job's, or the task's) expands them."""
    return " ".join(f'"{part}"' if _WITH_VARIABLES.fullmatch(part) else shlex.quote(part) for part in argv)


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


def _make_folders(folders: list[Path], command: str) -> str:
    """``command`` after creating the host folders it binds (Apptainer and pyxis refuse a missing one)."""
    if not folders:
        return command
    return f"mkdir -p {' '.join(shlex.quote(str(folder)) for folder in folders)} && {command}"


AMD_DEVICES = ("/dev/kfd", "/dev/dri")
"""What a ROCm container needs to see the GPUs (the ROCm kernel driver and the render nodes), as ROCm references
start their images (dlrmv4's README.MD: ``docker run --device=/dev/kfd --device=/dev/dri``)."""


ULIMIT_LETTERS = {"nofile": "n"}
"""bash's ``ulimit`` option letter for each limit a definition may raise (``full.ulimits``; docker's ``--ulimit`` names)."""


def raise_limits(ulimits: dict[str, int]) -> str:
    """Shell that raises each soft limit for the processes the line starts (they inherit it: srun passes its limits to
    the tasks by default), as the reference's launch script does; where the hard limit is lower, it says so in the
    job's log and the run goes on, as the reference's does."""
    steps = []
    for name, value in sorted(ulimits.items()):
        letter = ULIMIT_LETTERS[name]
        warn = f'echo "mlperf-wf: could not raise the {name} limit to {value} (hard limit $(ulimit -H{letter}))" >&2'
        steps.append(f"{{ ulimit -S{letter} {value} 2>/dev/null || {warn}; }}")
    return "; ".join(steps)


def docker_argv(
    image: str,
    workdir: str,
    mounts: list[tuple[str, str, str]],
    env: dict[str, str],
    passthrough: tuple[str, ...],
    command: list[str],
    gpus: str | None,
    devices: tuple[str, ...] = (),
    ulimits: dict[str, int] | None = None,
) -> list[str]:
    """``docker run`` with mounts, environment and the command.

    A GPU run (``gpus``: ``nvidia`` or ``amd``) gets every GPU (``--gpus all``, or the ROCm devices), the host network
    and IPC namespaces and the unlimited locked memory and large stack NCCL/RCCL and the reference containers expect; a CPU
    (tiny) run gets no network and no raised limits (raising them needs CAP_SYS_RESOURCE). ``devices``: other host
    devices the container sees (``full.devices``).
    """
    argv = ["docker", "run", "--rm"]
    if gpus == "amd":
        argv += [f"--device={device}" for device in AMD_DEVICES]
    elif gpus:
        argv += ["--gpus", "all"]
    argv += [f"--device={device}" for device in devices]
    if gpus:
        # the host's network, as the references' own `docker run` lines (--network=host): NCCL reaches the node's
        # NICs, and a rank's rendezvous address resolves as the host's (in a bridge-less engine a container's own
        # hostname does not resolve, and torchrun waits for its store forever)
        argv += ["--network=host", "--ipc=host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
    else:
        argv += ["--network", "none"]
    for name, value in sorted((ulimits or {}).items()):
        argv += ["--ulimit", f"{name}={value}"]  # the engine sets a container's limits, not the calling shell
    for host, container, mode in mounts:
        argv += ["-v", f"{host}:{container}:{mode}" if mode == "ro" else f"{host}:{container}"]
    for key, value in sorted(env.items()):
        argv += ["-e", f"{key}={value}"]
    for name in passthrough:
        argv += ["-e", name]  # docker copies the value from the host environment
    return [*argv, "-w", workdir, image, *command]


def apptainer_argv(
    image: str,
    workdir: str,
    mounts: list[tuple[str, str, str]],
    env: dict[str, str],
    passthrough: tuple[str, ...],
    command: list[str],
    home: str,
    accelerator: str = "nvidia",
    devices: tuple[str, ...] = (),
) -> list[str]:
    """``apptainer exec --nv`` (``--rocm`` for an AMD image) with binds, environment and the command.

    The image is read-only: ``--writable-tmpfs`` takes the small writes a reference makes beside its
    own files, and ``home`` (a host folder of the run) is the container's home, where Hugging Face,
    DeepSpeed and Triton keep their caches. ``devices`` (``full.devices``) are bound at their own paths.
    """
    argv = ["apptainer", "exec", "--rocm" if accelerator == "amd" else "--nv", "--cleanenv", "--writable-tmpfs", "--home", f"{home}:{CONTAINER_HOME}"]
    argv += ["--bind", ",".join([*(f"{host}:{container}:{mode}" for host, container, mode in mounts), *devices])]
    for key, value in sorted(env.items()):
        argv += ["--env", f"{key}={value}"]
    for name in passthrough:
        argv += ["--env", f"{name}=${{{name}}}"]  # expanded by the job's shell: the value is never written here
    return [*argv, "--pwd", workdir, image, *command]


def srun_step_flags(bench: BenchmarkDef, nodes: int, gpus_per_node: int) -> list[str]:
    """The srun step that starts a full-scale run's processes on the allocation's nodes (pyxis), before its container
    options: one task per node, or one per GPU for ``process_model: per_gpu``."""
    per_gpu = bench.full.process_model == "per_gpu"
    # one task per GPU: the reference's own --mpi, or none (the site's default); a launcher per node needs no PMI
    mpi = ([f"--mpi={bench.full.srun_mpi}"] if bench.full.srun_mpi else []) if per_gpu else ["--mpi=none"]
    return [
        "srun",
        f"--nodes={nodes}",
        f"--ntasks-per-node={gpus_per_node if per_gpu else 1}",
        *mpi,
        # A task that fails ends the others at once (NeMo-Run's Slurm executor, which the llama31 references launch
        # through, passes the same): the other nodes would otherwise wait on it until a collective's timeout, or an
        # hour for llama31_405b's data index, before the job fails and the profile retries it.
        "--kill-on-bad-exit=1",
        # A one-task job runs inside the jobstep's own `srun -n1` step (the executor only skips that wrapper for
        # several tasks): --overlap lets this step share that step's CPUs, memory and GPUs instead of waiting.
        "--overlap",
    ]


def pyxis_script(
    bench: BenchmarkDef,
    image: str,
    mounts: list[tuple[str, str, str]],
    env: dict[str, str],
    passthrough: tuple[str, ...],
    command: list[str],
    launch: Launch,
    workdir: str,
) -> str:
    """The srun line (with MASTER_ADDR/PORT from the allocation) that runs inside the SLURM job."""
    per_gpu = bench.full.process_model == "per_gpu"
    devices = [*(AMD_DEVICES if bench.full.accelerator == "amd" else ()), *bench.full.devices]
    # MASTER_ADDR is the allocation's first host, exported above: a benchmark's one-node default (its reference
    # config's localhost, for the docker and apptainer launchers) must not replace it.
    exports = {**{key: value for key, value in env.items() if key != "MASTER_ADDR"}, "MASTER_PORT": str(MASTER_PORT)}
    names = sorted({*exports, *passthrough, "MASTER_ADDR"})
    srun = [
        *srun_step_flags(bench, launch.nodes, launch.gpus_per_node),
        f"--container-image={image}",
        # enroot's hooks bring NVIDIA GPUs in; ROCm's and other devices are bound like any path.
        "--container-mounts=" + ",".join([*(f"{host}:{container}:{mode}" for host, container, mode in mounts), *(f"{d}:{d}" for d in devices)]),
        "--container-writable",
        "--container-remap-root",
        "--no-container-mount-home",
        f"--container-workdir={workdir}",
        "--container-env=" + ",".join(names),
    ]
    inner = _join_keep_variables(command)
    if per_gpu:
        inner = f"RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS exec {inner}"
    lines = [f'export MASTER_ADDR="$(scontrol show hostnames "{NODELIST}" | head -n 1)"']
    lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(exports.items())]
    lines.append(f"{shlex.join(srun)} bash -c {shlex.quote(inner)}")
    return "; ".join(lines)


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


def full_scale(bench: BenchmarkDef, run: int, seed: int, paths: RunPaths, launch: Launch, image: Container | None = None) -> str:
    """The shell command of one full-scale run with the chosen backend (``image``: default the definition's)."""
    if launch.launcher not in LAUNCHERS:
        raise ConfigError(f"launcher is {launch.launcher!r}; allowed: {', '.join(LAUNCHERS)}")
    problem = geometry_problem(bench, launch)
    if problem:
        raise ConfigError(problem)
    missing = sorted(set(bench.roles_for("train")) - set(paths.inputs))
    if missing:
        raise ConfigError(f"{bench.name}: the run needs the folders of input roles {missing}")
    env = _container_env(bench, paths, seed, launch)
    workdir = launch.workdir or bench.full.workdir
    # what the line does on the host before the launch: the page cache, then the reference's raised limits
    before_launch = "; ".join(filter(None, [drop_page_cache(launch.nodes, srun=launch.launcher == "pyxis"), raise_limits(bench.full.ulimits)]))
    if launch.launcher == "local":
        return f"{before_launch}; {_local(bench, run, seed, paths, launch, env, workdir)}"
    command = reference_command(bench, run, seed, paths, launch)
    scratch_by_name = scratch_folders(bench, paths)
    mounts = _mounts(bench, paths, launch, scratch_by_name)
    image = image or bench.full.container
    # the folders the job writes: the per-run scratch areas, and the input a one-off job of the image makes
    scratch = [*scratch_by_name.values(), *(paths.inputs[role].resolve() for role in paths.writable)]
    passthrough = (*launch.env_passthrough, CACHE_CLEARED_VARIABLE)  # the drop's outcome, set by the line above
    if launch.launcher == "docker":
        argv = docker_argv(
            image.docker_reference,
            workdir,
            mounts,
            env,
            passthrough,
            command,
            gpus=bench.full.accelerator,
            devices=tuple(bench.full.devices),
            ulimits=bench.full.ulimits,
        )
        return f"{before_launch}; {_make_folders(scratch, shell_join(argv))}"
    if launch.launcher == "apptainer":
        home = paths.result_file.parent.resolve() / "home"
        argv = apptainer_argv(
            image.apptainer_reference, workdir, mounts, env, passthrough, command, str(home), bench.full.accelerator, tuple(bench.full.devices)
        )
        return f"{before_launch}; {_make_folders([home, *scratch], _join_keep_variables(argv))}"
    return f"{before_launch}; {_make_folders(scratch, pyxis_script(bench, image.enroot_reference, mounts, env, passthrough, command, launch, workdir))}"


def _local(bench: BenchmarkDef, run: int, seed: int, paths: RunPaths, launch: Launch, env: dict[str, str], workdir: str) -> str:
    """The reference command on this host (its software installed here), with host paths, and this
    checkout's round patches first on ``PYTHONPATH`` (after any the caller already set)."""
    host = {"prepared": str(paths.prepared.resolve()), "results": str(paths.result_file.parent.resolve())}
    host.update({role: str(paths.inputs[role].resolve()) for role in bench.roles_for("train")})
    local = reference_command(bench, run, seed, paths, launch, where=host)
    env = {**env, "COMPLIANCE_FILE": str(paths.result_file.resolve()), MLLOG_PARTS_VARIABLE: str(mllog_parts.parts_folder(paths.result_file.resolve()))}
    words = [f"{key}={shlex.quote(value)}" for key, value in sorted(env.items())]
    if launch.hooks:
        # double-quoted so the job's shell appends what the caller had
        words.append(f'"PYTHONPATH={":".join(launch.hooks.folders)}${{PYTHONPATH:+:$PYTHONPATH}}"')
        words.append(f'"MLPERF_WF_HOOKS={",".join(launch.hooks.modules)}${{MLPERF_WF_HOOKS:+,$MLPERF_WF_HOOKS}}"')
    # a subshell: the job's own redirections and later commands stay in the workflow's folder
    return f"(cd {shlex.quote(workdir)} && exec env {' '.join(words)} {shell_join(local)})"


NODELIST = '${SLURM_JOB_NODELIST:-$(squeue -h -j "$SLURM_JOB_ID" -o %N)}'
"""The job's nodes as SLURM writes them (the SLURM jobstep clears SLURM_JOB_NODELIST before the job's command: ask
squeue then)."""


def node_check_script(
    nodes: int, srun: bool, attempts: Path, excluded: Path, prepared: Path, inputs: dict[str, tuple[Path, Path]], check, gpu_tflops: float | None
) -> str:
    """Shell that checks every node of the run before it starts (``mlperf_wf.run.node_check``) and stops the line, with
    the bad nodes named in the job's log, when one is bad. ``srun``: one task per node of the allocation (``--overlap``,
    on the host: the workflow's own environment), else this host. ``attempts``: the run's node-check folder (each attempt
    a subfolder named by its job); ``check``: the config's ``node_check``; ``gpu_tflops``: what a GPU of the system
    description's model must show where the config sets no expectation."""
    # named once: the probes and the verdict must read the same folder
    name = f'node_check_attempt={shlex.quote(str(attempts))}/"${{SLURM_JOB_ID:-$(date +%s)}}"'
    attempt = '"$node_check_attempt"'
    probe = ["mlperf-wf", "node-check", "probe", "--nodes", str(nodes), "--port", str(MASTER_PORT + 1), "--prepared", str(prepared)]
    for role, (folder, record) in sorted(inputs.items()):
        probe += ["--input", f"{role}={folder}:{record}"]
    probe += ["--matrix-size", str(check.matrix_size), "--timeout", str(check.timeout_s)]
    if check.matmul_tflops_per_device is not None:
        probe += ["--matmul-tflops", f"{check.matmul_tflops_per_device:g}"]
    elif gpu_tflops is not None:
        probe += ["--gpu-matmul-tflops", f"{gpu_tflops:g}"]
    if check.allreduce_gbps is not None:
        probe += ["--allreduce-gbps", f"{check.allreduce_gbps:g}"]
    if srun:
        hosts = f'"$(scontrol show hostnames "{NODELIST}" | paste -sd, -)"'
        master = f'"$(scontrol show hostnames "{NODELIST}" | head -n 1)"'
        run = f"srun --nodes={nodes} --ntasks-per-node=1 --overlap {shlex.join(probe)} --master-addr {master} --out {attempt}"
    else:
        hosts = master = '"$(hostname)"'
        run = f"{shlex.join(probe)} --master-addr {master} --out {attempt}"
    # The probes' exit status does not decide (and must not end the job's `set -e` shell before the verdict): the verdict
    # reads every node's record, a node that wrote none is bad, so a probe that failed or hung cannot pass unseen.
    noted = 'echo "mlperf-wf: a node check ended with status $?; the verdict reads what each node recorded" >&2'
    verdict = f"mlperf-wf node-check verdict --out {attempt} --hosts {hosts} --excluded {shlex.quote(str(excluded))}"
    return f"{name}; {run} || {noted}; {verdict} || exit 1"


def drop_page_cache(nodes: int = 1, srun: bool = False, target: str = DROP_CACHES_FILE) -> str:
    """Shell that drops the page cache on every node of the run and exports ``MLPERF_WF_CACHE_CLEARED`` (``true`` only
    when every node did), saying in the job's log what happened; it never fails the line.

    ``srun``: one task per node of the allocation (``--overlap``, as the power sampler's), on the host, not in the
    container; else on this host. ``target``: the file written (a shell word, expanded on the node; the tests give a
    stand-in).
    """
    node = f'{drop_on_this_node(target)} || {{ echo "mlperf-wf: could not drop the page cache on $(hostname)" >&2; false; }}'
    where = f"srun --nodes={nodes} --ntasks-per-node=1 --overlap bash -c {shlex.quote(node)}" if srun else f"{{ {node}; }}"
    every = f"on every node of the run ({nodes})" if srun else "on this host"
    done = f'echo "mlperf-wf: page cache dropped {every}: the run logs cache_clear: true" >&2'
    failed = f'echo "mlperf-wf: the page cache was not dropped {every} (no permission?): the run logs cache_clear: false" >&2'
    return f"if {where}; then export {CACHE_CLEARED_VARIABLE}=true; {done}; else export {CACHE_CLEARED_VARIABLE}=false; {failed}; fi"


def shell_join(argv: list[str]) -> str:
    """Quote an argv for a shell command line."""
    return shlex.join(argv)
