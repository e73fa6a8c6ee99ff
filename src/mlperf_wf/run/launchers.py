"""Launchers: the shell line of a job, rendered from its spec (``mlperf_wf.run.job_spec.JobSpec``).

Each launcher is a small class that turns the spec's process, image and mounts into the command that starts the run:
:class:`HostCommand` (a tiny run on the host), :class:`Local` (the reference command on the host, full scale),
:class:`Docker`, :class:`Apptainer` and :class:`Pyxis`. :func:`launcher_for` picks one for a spec, and
:func:`job_line` adds the steps around the launch in their order: the preflight, the emptied run folder and the node
check, then the page-cache drop and the raised limits, the folders the container binds, the launch, the scratch
removal, the power sampler and the MLLOG merge. :func:`rule_line` puts the campaign gate and the prepared tree's check
in front, as the train job runs it.

What each launcher's line does is described in ``mlperf_wf.plan.launch``'s module docstring.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import ClassVar

from mlperf_wf.run import power
from mlperf_wf.run.job_spec import JobSpec, Mount, NodeCheck, Process
from mlperf_wf.run.page_cache import DROP_CACHES_FILE, drop_on_this_node

MASTER_PORT = 29500
CONTAINER_HOME = "/home/mlperf-wf"
"""Home folder of an Apptainer run (bound from the run's own folder: caches, compiled kernels)."""
MLLOG_PARTS_VARIABLE = "MLPERF_WF_MLLOG_PARTS"
"""The folder where each process of a run writes its own MLLOG lines (the images' hooks read it; the train job merges
the files into the result file after the run: ``mlperf_wf.run.mllog_parts``)."""
CACHE_CLEARED_VARIABLE = "MLPERF_WF_CACHE_CLEARED"
"""``true`` when the page cache was dropped on every node of the run before it started, else ``false``; the round
hooks (``containers/hooks``) log it as ``cache_clear``."""
AMD_DEVICES = ("/dev/kfd", "/dev/dri")
"""What a ROCm container needs to see the GPUs (the ROCm kernel driver and the render nodes), as ROCm references
start their images (dlrmv4's README.MD: ``docker run --device=/dev/kfd --device=/dev/dri``)."""
ULIMIT_LETTERS = {"nofile": "n"}
"""bash's ``ulimit`` option letter for each limit a definition may raise (``full.ulimits``; docker's ``--ulimit`` names)."""
NODELIST = '${SLURM_JOB_NODELIST:-$(squeue -h -j "$SLURM_JOB_ID" -o %N)}'
"""The job's nodes as SLURM writes them (the SLURM jobstep clears SLURM_JOB_NODELIST before the job's command: ask
squeue then)."""

_WITH_VARIABLES = re.compile(r"[\w=./:,-]*(\$\{[A-Z_][A-Z0-9_]*\}[\w=./:,-]*)+")


def shell_join(argv: list[str] | tuple[str, ...]) -> str:
    """Quote an argv for a shell command line."""
    return shlex.join(argv)


def join_keep_variables(argv: list[str] | tuple[str, ...]) -> str:
    """shlex.join, except that words made of plain characters and ``${VAR}`` references are
    double-quoted, so the shell that runs the line (the job's, or the task's) expands them."""
    return " ".join(f'"{part}"' if _WITH_VARIABLES.fullmatch(part) else shlex.quote(part) for part in argv)


def bind_list(mounts: tuple[Mount, ...], devices: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Each mount as ``host:container:mode``, then ``devices`` as given (Apptainer's ``--bind``, pyxis's
    ``--container-mounts``)."""
    return [*(f"{m.host}:{m.container}:{m.mode}" for m in mounts), *devices]


def env_flags(flag: str, process: Process, passthrough: str) -> list[str]:
    """``flag KEY=VALUE`` for the process's environment (sorted), then ``flag`` and ``passthrough`` formatted with
    each passed-through name (``{name}``): Docker copies a bare name from the host, Apptainer gets ``NAME=${NAME}``."""
    words = []
    for key, value in sorted(process.env.items()):
        words += [flag, f"{key}={value}"]
    for name in process.passthrough:
        words += [flag, passthrough.format(name=name)]
    return words


def make_folders(folders: tuple[str, ...] | list[str], command: str) -> str:
    """``command`` after creating the host folders it binds (Apptainer and pyxis refuse a missing one)."""
    if not folders:
        return command
    return f"mkdir -p {' '.join(shlex.quote(str(folder)) for folder in folders)} && {command}"


class Launcher:
    """Renders the command that starts a spec's process."""

    name: ClassVar[str]
    """The ``launcher`` config value."""
    on_allocation: ClassVar[bool] = False
    """True where the run's steps go through ``srun`` on every node of the allocation (pyxis); else this host."""

    def command(self, spec: JobSpec) -> str:
        """The shell command of the launch."""
        raise NotImplementedError


class HostCommand(Launcher):
    """A tiny run on the host: the process's argv as it is (``mlperf-wf train``, or torchrun for several processes)."""

    name = "local"

    def command(self, spec: JobSpec) -> str:
        return shell_join(spec.process.command)


class Local(Launcher):
    """The reference command on the host (its software installed here), in its folder, with the run's environment and
    this checkout's round patches first on ``PYTHONPATH`` (after any the caller already set)."""

    name = "local"

    def command(self, spec: JobSpec) -> str:
        process = spec.process
        words = [f"{key}={shlex.quote(value)}" for key, value in sorted(process.env.items())]
        if process.hooks:
            # double-quoted so the job's shell appends what the caller had
            words.append(f'"PYTHONPATH={":".join(process.hooks.folders)}${{PYTHONPATH:+:$PYTHONPATH}}"')
            words.append(f'"MLPERF_WF_HOOKS={",".join(process.hooks.modules)}${{MLPERF_WF_HOOKS:+,$MLPERF_WF_HOOKS}}"')
        # a subshell: the job's own redirections and later commands stay in the workflow's folder
        return f"(cd {shlex.quote(process.workdir)} && exec env {' '.join(words)} {shell_join(process.command)})"


class Docker(Launcher):
    """``docker run`` of the image with the mounts, the environment and the command.

    A GPU run gets every GPU (``--gpus all``, or the ROCm devices), the host network and IPC namespaces and the
    unlimited locked memory and large stack NCCL/RCCL and the reference containers expect; a CPU (tiny) run gets no
    network and no raised limits (raising them needs CAP_SYS_RESOURCE)."""

    name = "docker"

    def argv(self, spec: JobSpec) -> list[str]:
        """The ``docker run`` argv."""
        process = spec.process
        argv = ["docker", "run", "--rm"]
        if process.accelerator == "amd":
            argv += [f"--device={device}" for device in AMD_DEVICES]
        elif process.accelerator:
            argv += ["--gpus", "all"]
        argv += [f"--device={device}" for device in process.devices]
        if process.accelerator:
            # the host's network, as the references' own `docker run` lines (--network=host): NCCL reaches the node's
            # NICs, and a rank's rendezvous address resolves as the host's (in a bridge-less engine a container's own
            # hostname does not resolve, and torchrun waits for its store forever)
            argv += ["--network=host", "--ipc=host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
        else:
            argv += ["--network", "none"]
        for name, value in sorted(process.ulimits.items()):
            argv += ["--ulimit", f"{name}={value}"]  # the engine sets a container's limits, not the calling shell
        for mount in spec.mounts:
            argv += ["-v", f"{mount.host}:{mount.container}:ro" if mount.mode == "ro" else f"{mount.host}:{mount.container}"]
        argv += env_flags("-e", process, "{name}")  # docker copies a bare name's value from the host environment
        return [*argv, "-w", process.workdir, spec.image.launched, *process.command]

    def command(self, spec: JobSpec) -> str:
        return shell_join(self.argv(spec))


class Apptainer(Launcher):
    """``apptainer exec --nv`` (``--rocm`` for an AMD image) with binds, environment and the command.

    The image is read-only: ``--writable-tmpfs`` takes the small writes a reference makes beside its own files, and
    the process's ``home`` (a host folder of the run) is the container's home, where Hugging Face, DeepSpeed and
    Triton keep their caches. Devices (``full.devices``) are bound at their own paths."""

    name = "apptainer"

    def argv(self, spec: JobSpec) -> list[str]:
        """The ``apptainer exec`` argv."""
        process = spec.process
        gpus = "--rocm" if process.accelerator == "amd" else "--nv"
        argv = ["apptainer", "exec", gpus, "--cleanenv", "--writable-tmpfs", "--home", f"{process.home}:{CONTAINER_HOME}"]
        argv += ["--bind", ",".join(bind_list(spec.mounts, process.devices))]
        argv += env_flags("--env", process, "{name}=${{{name}}}")  # expanded by the job's shell: never written here
        return [*argv, "--pwd", process.workdir, spec.image.launched, *process.command]

    def command(self, spec: JobSpec) -> str:
        return join_keep_variables(self.argv(spec))


def srun_step_flags(nodes: int, gpus_per_node: int, per_gpu: bool, srun_mpi: str | None) -> list[str]:
    """The srun step that starts a full-scale run's processes on the allocation's nodes (pyxis), before its container
    options: one task per node, or one per GPU for ``process_model: per_gpu``."""
    # one task per GPU: the reference's own --mpi, or none (the site's default); a launcher per node needs no PMI
    mpi = ([f"--mpi={srun_mpi}"] if srun_mpi else []) if per_gpu else ["--mpi=none"]
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


class Pyxis(Launcher):
    """The srun line (with MASTER_ADDR/PORT from the allocation) that runs the image through pyxis inside the SLURM
    job."""

    name = "pyxis"
    on_allocation = True

    def command(self, spec: JobSpec) -> str:
        process, geometry = spec.process, spec.geometry
        per_gpu = geometry.process_model == "per_gpu"
        devices = [*(AMD_DEVICES if process.accelerator == "amd" else ()), *process.devices]
        # MASTER_ADDR is the allocation's first host, exported above: a benchmark's one-node default (its reference
        # config's localhost, for the docker and apptainer launchers) must not replace it.
        exports = {**{key: value for key, value in process.env.items() if key != "MASTER_ADDR"}, "MASTER_PORT": str(MASTER_PORT)}
        names = sorted({*exports, *process.passthrough, "MASTER_ADDR"})
        srun = [
            *srun_step_flags(geometry.nodes, geometry.gpus_per_node, per_gpu, process.srun_mpi),
            f"--container-image={spec.image.launched}",
            # enroot's hooks bring NVIDIA GPUs in; ROCm's and other devices are bound like any path.
            "--container-mounts=" + ",".join(bind_list(spec.mounts, [f"{d}:{d}" for d in devices])),
            "--container-writable",
            "--container-remap-root",
            "--no-container-mount-home",
            f"--container-workdir={process.workdir}",
            "--container-env=" + ",".join(names),
        ]
        inner = join_keep_variables(process.command)
        if per_gpu:
            inner = f"RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS exec {inner}"
        lines = [f'export MASTER_ADDR="$(scontrol show hostnames "{NODELIST}" | head -n 1)"']
        lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(exports.items())]
        lines.append(f"{shlex.join(srun)} bash -c {shlex.quote(inner)}")
        return "; ".join(lines)


FULL_LAUNCHERS: dict[str, type[Launcher]] = {"local": Local, "docker": Docker, "apptainer": Apptainer, "pyxis": Pyxis}
"""The launcher of each ``launcher`` value at full scale."""
TINY_LAUNCHERS: dict[str, type[Launcher]] = {"local": HostCommand, "docker": Docker}
"""The launcher of each ``launcher`` value at tiny scale (a container only supplies a Linux userland there)."""


def launcher_for(spec: JobSpec) -> Launcher:
    """The launcher that renders ``spec``'s command."""
    table = TINY_LAUNCHERS if spec.scale == "tiny" else FULL_LAUNCHERS
    return table[spec.launcher]()


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


def node_check_script(nodes: int, srun: bool, step: NodeCheck) -> str:
    """Shell that checks every node of the run before it starts (``mlperf_wf.run.node_check``) and stops the line, with
    the bad nodes named in the job's log, when one is bad. ``srun``: one task per node of the allocation (``--overlap``,
    on the host: the workflow's own environment), else this host."""
    # named once: the probes and the verdict must read the same folder
    name = f'node_check_attempt={shlex.quote(step.attempts)}/"${{SLURM_JOB_ID:-$(date +%s)}}"'
    attempt = '"$node_check_attempt"'
    check = step.check
    probe = ["mlperf-wf", "node-check", "probe", "--nodes", str(nodes), "--port", str(MASTER_PORT + 1), "--prepared", step.prepared]
    for role, (folder, record) in sorted(step.inputs.items()):
        probe += ["--input", f"{role}={folder}:{record}"]
    probe += ["--matrix-size", str(check.matrix_size), "--timeout", str(check.timeout_s)]
    if check.matmul_tflops_per_device is not None:
        probe += ["--matmul-tflops", f"{check.matmul_tflops_per_device:g}"]
    elif step.gpu_tflops is not None:
        probe += ["--gpu-matmul-tflops", f"{step.gpu_tflops:g}"]
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
    verdict = f"mlperf-wf node-check verdict --out {attempt} --hosts {hosts} --excluded {shlex.quote(step.excluded)}"
    return f"{name}; {run} || {noted}; {verdict} || exit 1"


def merged_after_the_run(command: str, result_file: Path | str) -> str:
    """``command`` (a run's launch), then the MLLOG files its processes wrote (``mlperf_wf.run.mllog_parts``) merged
    into ``result_file``, whether the run succeeded or not (a failed run's log is read too); a failed merge fails the
    job, and the run's own status is the job's (``set -e`` does not stop at the left of ``||``)."""
    merge = f"mlperf-wf merge-mllog {shlex.quote(str(result_file))}"
    return f'run_status=0; ({command}) || run_status=$?; {merge} || exit 1; [ "$run_status" = 0 ] || exit "$run_status"'


def job_line(spec: JobSpec) -> str:
    """The shell line of the job: the launch with the steps around it (see the module docstring)."""
    if spec.refused is not None:
        return f"echo {shlex.quote(spec.refused)} >&2; exit 2"
    launcher, steps, nodes = launcher_for(spec), spec.steps, spec.geometry.nodes
    before = [drop_page_cache(nodes, srun=launcher.on_allocation) if steps.drop_page_cache else "", raise_limits(spec.process.ulimits)]
    command = "; ".join(filter(None, [*before, make_folders(steps.make_folders, launcher.command(spec))]))
    if steps.remove_scratch:
        # per-run scratch (data indexes, converted caches: hundreds of GB a run) goes once the run succeeded; a
        # failed run keeps it to be looked at, and the next attempt starts from an emptied run folder anyway.
        # `|| exit $?`: a failure in front of `&&` does not stop a `set -e` shell, and the job's next step
        # (provenance) would make the failed run's job succeed
        command = f"({command}) && rm -rf {shlex.quote(steps.remove_scratch)} || exit $?"
    if steps.power is not None:
        # a sampler on every node of the run: srun places one per node under pyxis, else one on this host
        command = power.with_sampler(command, steps.power, Path(spec.result_file), nodes, srun=launcher.on_allocation)
    if steps.mllog_merge:
        command = merged_after_the_run(command, steps.mllog_merge)
    first = []
    if steps.preflight:
        image = f" --image {steps.preflight.image}" if steps.preflight.image else ""
        platform = shlex.quote(steps.preflight.platform)
        # `|| exit 2` and not `&&`: a failed check must stop the whole line, which may hold several commands
        first.append(f"mlperf-wf preflight --benchmark {steps.preflight.benchmark}{image} --platform {platform} || exit 2")
    if steps.fresh_run_folder:
        # every attempt starts in an empty run folder: a retried run must not resume the failed attempt's checkpoints
        first.append(f"mlperf-wf fresh-run-folder {shlex.quote(steps.fresh_run_folder)} || exit 2")
    if steps.node_check:
        first.append(node_check_script(nodes, launcher.on_allocation, steps.node_check))
    return "; ".join([*first, command])


def campaign_gate(spec: JobSpec) -> str:
    """The job's first command with ``stop_when_doomed``: the job ends, not started, when its benchmark's set can no
    longer be valid (``mlperf_wf.results.doom``); '' when the spec has no gate."""
    gate = spec.steps.campaign_gate
    if gate is None:
        return ""
    return f"mlperf-wf campaign-gate --benchmark {gate.benchmark} --run {gate.run} --config-file {shlex.quote(gate.config_file)} || exit $?; "


def rule_line(spec: JobSpec) -> str:
    """The job as the train job runs it: the campaign gate, the prepared tree's check (``|| exit``: bash's errexit
    does not stop at the left side of a failing ``&&``), then :func:`job_line`, in one group, so that everything it
    prints goes to one place and a refusal (``exit 2``) ends the job with its reason there."""
    check = f"mlperf-wf check-prepared {shlex.quote(spec.steps.check_prepared)} || exit $?; " if spec.steps.check_prepared else ""
    return f"{{ {campaign_gate(spec)}{check}{job_line(spec)}; }}"
