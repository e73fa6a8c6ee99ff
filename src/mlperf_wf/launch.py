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
- ``apptainer``: ``apptainer exec --nv`` of ``docker://image@digest``, the same
  mounts as ``--bind``. One node.
- ``pyxis``: ``srun`` with ``--container-image``/``--container-mounts``/
  ``--no-container-mount-home``, as NVIDIA's run.sub launches, inside the
  SLURM allocation of the train job. ``MASTER_ADDR`` is the allocation's first
  host and ``MASTER_PORT`` is fixed, both exported into the container. With
  ``process_model: per_node`` the reference command is a launcher (accelerate,
  torchrun) started once per node; with ``per_gpu`` srun starts one task per
  GPU and each task gets ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` from SLURM.

At full scale the reference's mllog writer is pointed at the run's result file
through ``COMPLIANCE_FILE``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from mlperf_wf.errors import ConfigError
from mlperf_wf.registry import BenchmarkDef

LAUNCHERS = ("local", "docker", "apptainer", "pyxis")
MASTER_PORT = 29500


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
    return docker_argv(image, str(workdir), mounts, env, launch.env_passthrough, tiny_command(train_args, launch), gpus=False)


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
    }
    command = [part.format(**values) for part in bench.full.command]
    if launch.nodes > 1:
        command = _insert_after_launcher(command, [a.format(**values) for a in bench.full.multi_node_args])
    return command


_WITH_VARIABLES = re.compile(r"[\w=./:,-]*(\$\{[A-Z_][A-Z0-9_]*\}[\w=./:,-]*)+")


def _join_keep_variables(argv: list[str]) -> str:
    """shlex.join, except that words made of plain characters and ``${VAR}`` references are
    double-quoted, so the shell that runs the line (the job's, or the task's) expands them."""
    return " ".join(f'"{part}"' if _WITH_VARIABLES.fullmatch(part) else shlex.quote(part) for part in argv)


def _insert_after_launcher(command: list[str], extra: list[str]) -> list[str]:
    """Put multi-node launcher flags right after the launcher word (``accelerate launch``/``torchrun``)."""
    head = 2 if command[:2] == ["accelerate", "launch"] else 1
    return command[:head] + extra + command[head:]


def _container_env(bench: BenchmarkDef, paths: RunPaths, seed: int) -> dict[str, str]:
    env = dict(bench.full.env)
    env["COMPLIANCE_FILE"] = f"{bench.full.mounts['results']}/{paths.result_file.name}"
    env["SEED"] = str(seed)
    return env


def _mounts(bench: BenchmarkDef, paths: RunPaths) -> list[tuple[str, str, str]]:
    """Read-only prepared data (the whole prepared folder, so the dataset tree's relative links into
    ``shards/`` resolve), every input role the runs read (read-only), the result folder, and the
    output cache at its own path (cached shards are links into it)."""
    mounts = bench.full.mounts
    missing = sorted(set(bench.roles_for("train")) - set(paths.inputs))
    if missing:
        raise ConfigError(f"{bench.name}: the run needs the folders of input roles {missing}")
    chosen = [(str(paths.prepared.parent.resolve()), mounts["prepared"], "ro")]
    for role in bench.roles_for("train"):
        chosen.append((str(paths.inputs[role].resolve()), mounts[role], "ro"))
    chosen.append((str(paths.result_file.parent.resolve()), mounts["results"], "rw"))
    if paths.output_cache is not None:
        cache = str(paths.output_cache.resolve())
        chosen.append((cache, cache, "ro"))
    return chosen


def docker_argv(
    image: str, workdir: str, mounts: list[tuple[str, str, str]], env: dict[str, str], passthrough: tuple[str, ...], command: list[str], gpus: bool
) -> list[str]:
    """``docker run`` with mounts, environment and the command.

    A GPU run gets every GPU, the host IPC namespace and the unlimited locked memory
    and large stack NCCL and the reference containers expect; a CPU (tiny) run gets
    no network and no raised limits (raising them needs CAP_SYS_RESOURCE).
    """
    argv = ["docker", "run", "--rm"]
    if gpus:
        argv += ["--gpus", "all", "--ipc=host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
    else:
        argv += ["--network", "none"]
    for host, container, mode in mounts:
        argv += ["-v", f"{host}:{container}:{mode}" if mode == "ro" else f"{host}:{container}"]
    for key, value in sorted(env.items()):
        argv += ["-e", f"{key}={value}"]
    for name in passthrough:
        argv += ["-e", name]  # docker copies the value from the host environment
    return [*argv, "-w", workdir, image, *command]


def apptainer_argv(
    image: str, workdir: str, mounts: list[tuple[str, str, str]], env: dict[str, str], passthrough: tuple[str, ...], command: list[str]
) -> list[str]:
    """``apptainer exec --nv`` with binds, environment and the command."""
    argv = ["apptainer", "exec", "--nv", "--cleanenv", "--no-home"]
    argv += ["--bind", ",".join(f"{host}:{container}:{mode}" for host, container, mode in mounts)]
    for key, value in sorted(env.items()):
        argv += ["--env", f"{key}={value}"]
    for name in passthrough:
        argv += ["--env", f"{name}=${{{name}}}"]  # expanded by the job's shell: the value is never written here
    return [*argv, "--pwd", workdir, f"docker://{image}", *command]


def pyxis_script(
    bench: BenchmarkDef, image: str, mounts: list[tuple[str, str, str]], env: dict[str, str], passthrough: tuple[str, ...], command: list[str], launch: Launch
) -> str:
    """The srun line (with MASTER_ADDR/PORT from the allocation) that runs inside the SLURM job."""
    per_gpu = bench.full.process_model == "per_gpu"
    tasks_per_node = launch.gpus_per_node if per_gpu else 1
    exports = {**env, "MASTER_PORT": str(MASTER_PORT)}
    names = sorted({*exports, *passthrough, "MASTER_ADDR"})
    srun = [
        "srun",
        f"--nodes={launch.nodes}",
        f"--ntasks-per-node={tasks_per_node}",
        "--mpi=pmix" if per_gpu else "--mpi=none",
        f"--container-image={image}",
        "--container-mounts=" + ",".join(f"{host}:{container}:{mode}" for host, container, mode in mounts),
        "--no-container-mount-home",
        f"--container-workdir={bench.full.workdir}",
        "--container-env=" + ",".join(names),
    ]
    inner = _join_keep_variables(command)
    if per_gpu:
        inner = f"RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS exec {inner}"
    lines = ['export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"']
    lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(exports.items())]
    lines.append(f"{shlex.join(srun)} bash -c {shlex.quote(inner)}")
    return "; ".join(lines)


def full_scale(bench: BenchmarkDef, run: int, seed: int, paths: RunPaths, launch: Launch, image: str | None = None) -> str:
    """The shell command of one full-scale run with the chosen backend (``image``: default the definition's)."""
    if launch.launcher not in LAUNCHERS:
        raise ConfigError(f"launcher is {launch.launcher!r}; allowed: {', '.join(LAUNCHERS)}")
    if launch.nodes > 1 and not bench.full.multi_node_args:
        raise ConfigError(f"{bench.name}: {launch.nodes} nodes requested, but its reference command runs on one node (no full.multi_node_args); set nodes: 1")
    if launch.nodes > 1 and launch.launcher in ("docker", "apptainer", "local"):
        raise ConfigError(f"{bench.name}: {launch.nodes} nodes need the pyxis launcher; {launch.launcher} runs on one node")
    command = reference_command(bench, run, seed, paths, launch)
    env = _container_env(bench, paths, seed)
    mounts = _mounts(bench, paths)
    image = image or bench.full.container.reference
    if launch.launcher == "docker":
        return shell_join(docker_argv(image, bench.full.workdir, mounts, env, launch.env_passthrough, command, gpus=True))
    if launch.launcher == "apptainer":
        return _join_keep_variables(apptainer_argv(image, bench.full.workdir, mounts, env, launch.env_passthrough, command))
    if launch.launcher == "pyxis":
        return pyxis_script(bench, image, mounts, env, launch.env_passthrough, command, launch)
    # local: the reference command on this host (its software installed there), with host paths
    host = {"prepared": str(paths.prepared.resolve()), "results": str(paths.result_file.parent.resolve())}
    host.update({role: str(paths.inputs[role].resolve()) for role in bench.roles_for("train")})
    local = reference_command(bench, run, seed, paths, launch, where=host)
    env = {**env, "COMPLIANCE_FILE": str(paths.result_file.resolve())}
    exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in sorted(env.items()))
    return f"cd {shlex.quote(bench.full.workdir)} && env {exports} {shell_join(local)}"


def shell_join(argv: list[str]) -> str:
    """Quote an argv for a shell command line."""
    return shlex.join(argv)
