"""The rehearsal's probe, inside every Python process of a rehearsed train job (tests only).

The rehearsal image puts this module's start-up hook last in ``MLPERF_WF_HOOKS`` (``containers/hooks/sitecustomize.py``
imports it in every Python process of the container: the launcher, every rank, every worker). At start it writes a
record of the process (host, argv, launcher variables) into the rehearsal's record folder. In the reference's entry
process (the script the full-scale command starts, by its path) it then:

1. runs the benchmark's own probe (``tests/benchmarks/<name>/rehearsal.py``: ``probe(ctx)``), which reads the
   reference's files at its pinned commit (argument parser, configs, run scripts) with the job's arguments and
   environment, and checks every path it opens against the mounted tree and every variable it interpolates
   against the environment; where the reference's packages run here the benchmark's probe runs the reference itself
   and takes over at its first GPU step (:meth:`ProbeContext.take_over_at_first_gpu_step`);
2. forms the world as the reference's launcher formed it (gloo, from the launcher's variables) and gathers every
   rank's host, rank, local rank and rendezvous address, so the test can check the geometry; where the benchmark's
   module has them, every rank then runs the reference's own stages past start-up (``past_start_up``: e.g. its data
   stage, under the job's real mounts) and the end of a run at its target (``at_the_target``);
3. on every rank, proves each mount the plan declares read-only refuses a new file, and checks every file the
   reference's code wrote in the process (a Python audit hook from the start: :func:`audit_writes`) against the mounts
   the plan declares read-write (:data:`PLAN_FILE`), naming the file and the reference's line that wrote it;
4. exits 0 on every rank when every check held, 3 (with the problem on stderr and in the records) when one did not.

A run can be told to fail on purpose (``MLPERF_WF_REHEARSAL_FAIL``: ``<seed>:<rank>``): that rank exits 5 after the
world formed, so the test sees whether the launch line lets one failing rank fail the job.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

RECORDS_VARIABLE = "MLPERF_WF_REHEARSAL_RECORDS"
"""Folder the probe writes its records into (bound read-write into the container at the same path)."""
BENCHMARK_VARIABLE = "MLPERF_WF_REHEARSAL_BENCHMARK"
ENTRY_VARIABLE = "MLPERF_WF_REHEARSAL_ENTRY"
"""Comma-separated paths (as the command names them, e.g. ``scripts/train.py``) of the reference's entry scripts."""
FAIL_VARIABLE = "MLPERF_WF_REHEARSAL_FAIL"
SOURCES_VARIABLE = "MLPERF_WF_REHEARSAL_SOURCES"
"""Comma-separated container folders of the reference's code in the image (its files, the round patches and hooks the
Dockerfile copies): a write is the reference's where one of its frames is in them."""
PLAN_FILE = "plan.json"
"""Beside the seeds' records: what the plan declares of the rehearsed job (:func:`tests.rehearsal.campaign.plan_facts`):
``mounts`` (``[container path, ro|rw]`` each) and ``container_writable`` (the line gives the container a writable
filesystem of its own: pyxis's ``--container-writable``, docker without ``--read-only``)."""
FAILED_ON_PURPOSE = 5
PROBLEM_FOUND = 3


class ProbeFailure(Exception):
    """A check of the rehearsal did not hold (the message names the path, variable or value)."""


def host() -> str:
    return socket.gethostname()


def seed() -> str:
    return os.environ.get("SEED", "unknown")


def records() -> Path:
    folder = Path(os.environ[RECORDS_VARIABLE]) / f"seed-{seed()}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _write(name: str, record: dict) -> None:
    """Whole or not at all: a launcher ends a failed run's other ranks at any moment, maybe mid-write (the records are
    read as ``*.json``; the half-written file is not one)."""
    path = records() / name
    partial = path.with_name(f".{name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(record, indent=1, default=str))
    os.replace(partial, path)


WRITE_EVENTS = frozenset(("open", "os.rename", "os.mkdir", "os.remove", "os.rmdir", "os.symlink", "os.link", "os.truncate", "shutil.copyfile", "shutil.rmtree"))
"""Audit events (PEP 578) by which Python code writes a file or folder (``os.replace`` raises ``os.rename``)."""
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
WRITTEN_ARGUMENT = {"os.rename": 1, "os.symlink": 1, "os.link": 1, "shutil.copyfile": 1}
"""The argument of an event that names the written path (the destination); the first one otherwise."""

_writes: dict[str, str] = {}
"""Path written -> the first frame of the reference's code that wrote it (``file:line``), in this process."""


REHEARSAL_CODE = f"{Path(__file__).resolve().parent}/"
"""The rehearsal's own code (this probe, the benchmarks' probes and stand-ins)."""


def _reference_frame(sources: tuple[str, ...]) -> str | None:
    """The innermost frame of the reference's code calling this write; None where the rehearsal's own code is nearer
    (its records, its check of the read-only mounts, its log lines: the reference runs under the probe's start-up)."""
    frame = sys._getframe(3)  # past this function, the hook's record and the hook
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith("<"):  # a frozen module of the standard library (<frozen os>), a string's code
            frame = frame.f_back
            continue
        if not name.startswith("/"):
            name = os.path.abspath(name)
        if name.startswith(REHEARSAL_CODE):
            return None
        if name.startswith(sources):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _written_path(event: str, args: tuple) -> object:
    if event == "open":
        path, mode, flags = args
        writing = any(letter in mode for letter in "wax+") if isinstance(mode, str) else bool(flags & WRITE_FLAGS)
        return path if writing else None
    return args[WRITTEN_ARGUMENT.get(event, 0)]


def audit_writes(sources: tuple[str, ...], ignored: str) -> None:
    """Record every path the reference's code writes in this process (:data:`WRITE_EVENTS`), with its first frame in
    ``sources``; writes under ``ignored`` (the rehearsal's records) and writes no reference frame made are not its."""
    if not sources:
        return

    def hook(event: str, args: tuple) -> None:
        if event in WRITE_EVENTS:
            try:
                record(event, args)
            except Exception:  # an error in a hook would fail the reference's own call: the audit never does
                traceback.print_exc()

    def record(event: str, args: tuple) -> None:
        path = _written_path(event, args)
        if not isinstance(path, (str, bytes, os.PathLike)):  # a file descriptor: its path was audited when opened
            return
        path = os.path.abspath(os.fsdecode(path))
        # a device (/dev/null, /dev/shm's segments of the launcher) is no file the job leaves
        if path in _writes or path.startswith((ignored, "/dev/")):
            return
        where = _reference_frame(sources)
        if where is not None:
            _writes[path] = where

    sys.addaudithook(hook)


def _writable(path: str, plan: dict) -> bool:
    """Whether the plan declares ``path`` writable: under a read-write mount (the deepest mount holding it decides), or
    outside every mount where the line gives the container a writable filesystem of its own."""
    holding = [(container, mode) for container, mode in plan["mounts"] if path == container or path.startswith(container.rstrip("/") + "/")]
    if holding:
        return max(holding, key=lambda mount: len(mount[0]))[1] == "rw"
    return bool(plan["container_writable"])


def plan_facts() -> dict | None:
    path = Path(os.environ[RECORDS_VARIABLE]) / PLAN_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def check_read_only_mounts(ctx: ProbeContext, plan: dict) -> None:
    """Every mount the plan declares read-only refuses a new file (a file mount: opening it for writing)."""
    for container, mode in plan["mounts"]:
        if mode != "ro" or not os.path.exists(container):
            continue
        target = os.path.join(container, f".rehearsal-write-{host()}-{os.getpid()}") if os.path.isdir(container) else container
        try:
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | (os.O_EXCL if target != container else 0))
        except OSError as error:
            ctx.record("read-only", container, "the plan mounts it read-only", True, error.strerror or str(error))
            continue
        os.close(descriptor)
        if target != container:
            os.remove(target)
        ctx.fail(f"the plan mounts {container} read-only, but this rank on {host()} could write {target} in it")


def check_writes(ctx: ProbeContext, plan: dict) -> None:
    """Every file the reference's code wrote in this process lands where the plan declares it writable."""
    outside = []
    for path, where in sorted(_writes.items()):
        held = _writable(path, plan)
        mounted = any(path == container or path.startswith(container.rstrip("/") + "/") for container, _ in plan["mounts"])
        # the container's own filesystem is the node's and goes with the job: kept apart in the records
        where = where if mounted else f"{where} (in the container's own filesystem)"
        ctx.record("write", path, "the reference writes it where the plan declares it writable", held, where)
        if not held:
            outside.append(f"{path} (written by {where})")
    if outside:
        ctx.fail(f"the reference wrote outside what the plan declares writable: {'; '.join(outside)}")


LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")
SLURM_VARIABLES = ("SLURM_JOB_ID", "SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_NUM_NODES", "SLURMD_NODENAME")


def _process_record() -> dict:
    return {
        "host": host(),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": sys.argv,
        "executable": sys.executable,
        "cwd": os.getcwd(),
        "time": time.time(),
        "launch": {name: os.environ[name] for name in LAUNCH_VARIABLES if name in os.environ},
        "slurm": {name: os.environ[name] for name in SLURM_VARIABLES if name in os.environ},
    }


@dataclass
class ProbeContext:
    """What a benchmark's probe gets: the entry process's arguments, environment and working folder, and checks."""

    benchmark: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    checked: list[dict] = field(default_factory=list)
    """Every check made (kind, what, why, held), for the test to read."""
    log_file: str | None = None
    """Where the reference writes its MLLOG lines, as the probe found it."""
    world_from_launcher: bool = True
    """False where the reference forms its world itself (e.g. it spawns its ranks): the probe then forms a world of 1."""

    def argument(self, flag: str, default: str | None = None) -> str | None:
        """The value of ``--flag value`` or ``--flag=value`` in the entry's arguments (the last one wins, as argparse)."""
        value = default
        for index, word in enumerate(self.argv):
            if word == flag and index + 1 < len(self.argv):
                value = self.argv[index + 1]
            elif word.startswith(flag + "="):
                value = word.split("=", 1)[1]
        return value

    def record(self, kind: str, what: str, why: str, held: bool, detail: str = "") -> None:
        self.checked.append({"kind": kind, "what": what, "why": why, "held": held, "detail": detail})

    def path(self, path: str | Path, why: str, kind: str = "any") -> Path:
        """``path`` (relative to the working folder) must exist (``kind``: file, dir or any) as the reference opens it."""
        resolved = (self.cwd / path) if not str(path).startswith("/") else Path(path)
        held = resolved.is_file() if kind == "file" else resolved.is_dir() if kind == "dir" else resolved.exists()
        self.record("path", str(path), why, held)
        if not held:
            raise ProbeFailure(f"{why}: {path} does not exist{'' if kind == 'any' else f' as a {kind}'} in the container")
        return resolved

    def opens(self, path: str | Path, why: str, size: int = 64) -> bytes:
        """Open and read the start of a file the reference reads (the mount must make it readable)."""
        resolved = self.path(path, why, kind="file")
        with open(resolved, "rb") as stream:
            return stream.read(size)

    def glob(self, pattern: str, why: str) -> list[Path]:
        """Files a glob the reference expands matches (at least one)."""
        import glob as globbing

        base = pattern if pattern.startswith("/") else str(self.cwd / pattern)
        found = sorted(Path(p) for p in globbing.glob(base))
        self.record("glob", pattern, why, bool(found), f"{len(found)} files")
        if not found:
            raise ProbeFailure(f"{why}: {pattern} matches no file in the container")
        return found

    def variable(self, name: str, why: str) -> str:
        """An environment variable the reference reads without a default must be set."""
        held = name in self.env
        self.record("variable", name, why, held, self.env.get(name, ""))
        if not held:
            raise ProbeFailure(f"{why}: environment variable {name} is not set in the job")
        return self.env[name]

    def equal(self, what: str, found: object, expected: object, why: str) -> None:
        held = found == expected
        self.record("value", what, why, held, f"found {found!r}, expected {expected!r}")
        if not held:
            raise ProbeFailure(f"{why}: {what} is {found!r}, expected {expected!r}")

    def reference_function(self, script: str, name: str, namespace: dict | None = None):
        """A function of the reference's own file (``script``, relative to the working folder), compiled alone from its
        source at the pinned commit, with ``namespace`` as its globals (the modules it uses that import here), e.g. the
        argument parser of a script whose framework does not install here."""
        import ast

        path = self.path(script, f"the reference's {name}", kind="file")
        tree = ast.parse(path.read_text(), str(path))
        found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
        if not found:
            self.fail(f"{script} has no function {name} at the pinned commit")
        code = compile(ast.Module(body=found, type_ignores=[]), str(path), "exec")
        scope: dict = {"__name__": f"reference:{script}", **(namespace or {})}
        exec(code, scope)  # the reference's own function, from its pinned source
        return scope[name]

    def fail(self, message: str) -> None:
        self.record("problem", message, message, False)
        raise ProbeFailure(message)

    def mllog_to(self, path: str, why: str) -> None:
        """Where the reference writes its MLLOG lines; the probe writes its own start-of-run lines there from rank 0,
        through mlperf-logging, as the reference's logger would (the test reads them back in ``runs/<i>/result.txt``)."""
        self.log_file = path
        self.record("log", path, why, True)


LEFTOVER = ".rehearsal-failed-attempt"
"""A file a rank that fails on purpose leaves in its run folder."""


def _run_folder() -> Path:
    """The run's folder as the container sees it (where the plan points ``COMPLIANCE_FILE``)."""
    return Path(os.environ.get("COMPLIANCE_FILE", "/nonexistent/result.txt")).parent


def _rank_info() -> tuple[int, int, int]:
    env = os.environ
    rank = int(env.get("RANK", env.get("SLURM_PROCID", "0")))
    local = int(env.get("LOCAL_RANK", env.get("SLURM_LOCALID", "0")))
    world = int(env.get("WORLD_SIZE", env.get("SLURM_NTASKS", "1")))
    return rank, local, world


def _form_world(ctx: ProbeContext) -> dict:
    """Join the world the launcher set up (gloo) and gather every rank's view of it."""
    rank, local, world = _rank_info()
    mine = {
        "host": host(),
        "rank": rank,
        "local_rank": local,
        "world_size": world,
        "master": f"{os.environ.get('MASTER_ADDR', '')}:{os.environ.get('MASTER_PORT', '')}",
        "pid": os.getpid(),
    }
    if not ctx.world_from_launcher or world == 1:
        return {"ranks": [mine], "world_size": 1 if not ctx.world_from_launcher else world}
    import datetime

    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    return {"ranks": gathered, "world_size": dist.get_world_size()}


def written_file(handler: object) -> str | None:
    """The file a logging handler was opened on: the run's result file where the images' hooks gave the process a file
    of its own for it (``mlperf_wf_result_file``), else its own file."""
    return getattr(handler, "mlperf_wf_result_file", None) or getattr(handler, "baseFilename", None)


def _write_mllog(ctx: ProbeContext) -> None:
    if not ctx.log_file:
        return
    from mlperf_logging import mllog
    from mlperf_logging.mllog import constants

    logger = mllog.get_mllogger()
    handlers = getattr(getattr(logger, "logger", None), "handlers", [])
    # a round patch may have pointed mllog at the file already: a second handler would write every line twice
    if not any(written_file(handler) == os.path.abspath(ctx.log_file) for handler in handlers):
        mllog.config(filename=ctx.log_file)
    logger.event(key=constants.CACHE_CLEAR, value=os.environ.get("MLPERF_WF_CACHE_CLEARED", "") in ("1", "true"))
    for key, variable in (
        (constants.SUBMISSION_BENCHMARK, "MLPERF_SUBMISSION_BENCHMARK"),
        (constants.SUBMISSION_DIVISION, "MLPERF_SUBMISSION_DIVISION"),
        (constants.SUBMISSION_ORG, "MLPERF_SUBMISSION_ORG"),
        (constants.SUBMISSION_PLATFORM, "MLPERF_SUBMISSION_PLATFORM"),
        (constants.SUBMISSION_STATUS, "MLPERF_SUBMISSION_STATUS"),
    ):
        logger.event(key=key, value=os.environ.get(variable, ""))
    logger.event(key=constants.SEED, value=int(seed()) if seed().isdigit() else seed())
    logger.start(key=constants.INIT_START)


def take_over(ctx: ProbeContext) -> None:
    """Form the world, write the records and the log lines, and end this process (0: every check held)."""
    status, problem = 0, ""
    world: dict = {}
    plan = plan_facts()
    try:
        world = _form_world(ctx)
        rank = _rank_info()[0]
        if rank == 0:
            _write_mllog(ctx)
        failing = os.environ.get(FAIL_VARIABLE, "")
        if plan is not None:  # before the stages: a stage that fails does not hide it
            check_read_only_mounts(ctx, plan)
        if not failing.startswith(f"{seed()}:"):  # in a run with a rank failing on purpose, the others would wait for it
            _every_rank(ctx, "past_start_up")
            _every_rank(ctx, "at_the_target")
        if failing and failing == f"{seed()}:{rank}":
            status, problem = FAILED_ON_PURPOSE, f"rank {rank} fails on purpose ({FAIL_VARIABLE}={failing})"
            # what a failed attempt leaves in its run folder; a retry must not start beside it
            leftover = _run_folder() / LEFTOVER
            if leftover.parent.is_dir():
                leftover.write_text(f"left by the attempt of process {os.getpid()} on {host()}\n")
        else:
            # every rank waits until all have written, so that no rank's exit tears down a peer still gathering
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.barrier()
    except ProbeFailure as error:
        status, problem = PROBLEM_FOUND, str(error)
    except Exception:  # any error of the probe is a failed rehearsal, with its traceback kept
        status, problem = PROBLEM_FOUND, traceback.format_exc()
    if plan is not None:
        # after the world's last barrier (one rank's writes are not another's), and after a failed stage too: a write
        # the kernel refused names its file and the reference's line here, not only in a traceback
        try:
            check_writes(ctx, plan)
        except ProbeFailure as error:
            status, problem = status or PROBLEM_FOUND, "\n".join(filter(None, [problem, str(error)]))
    _write_rank(ctx, world, status, problem)
    if status == 0 and os.environ.get(REHEARSAL_STEPS_VARIABLE):
        # the training loop's steps: the benchmark's own stand-in where its framework is not torch's ranks (bert's
        # TensorFlow process), else a torch rank's (not qwen's Ray driver)
        stand_in = getattr(importlib.import_module(f"tests.benchmarks.{ctx.benchmark}.rehearsal"), "train_until_stopped", None)
        if stand_in is not None:
            status = stand_in(ctx)
        elif ctx.world_from_launcher:
            status = _train_until_stopped()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


REHEARSAL_STEPS_VARIABLE = "MLPERF_WF_REHEARSAL_STEPS"
"""Set by ``mlperf-wf rehearse``'s job: the images' rehearsal hook stops the run after that many training steps."""
STAND_IN_STEPS_AT_MOST = 1000


def _train_until_stopped() -> int:
    """In ``mlperf-wf rehearse``'s job, the box's stand-in for the reference's training loop past its first GPU step: a
    small model's data-parallel steps on CPU (gradients all-reduced over the formed world, then torch's optimizer step)
    until the images' rehearsal hook stops the process; PROBLEM_FOUND where it never does."""
    import torch
    import torch.distributed as dist

    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(STAND_IN_STEPS_AT_MOST):
        model(torch.ones(8, 16)).sum().backward()
        if dist.is_available() and dist.is_initialized():
            for parameter in model.parameters():
                dist.all_reduce(parameter.grad)
        optimizer.step()
        optimizer.zero_grad()
    print(f"rehearsal probe: {STAND_IN_STEPS_AT_MOST} steps and the rehearsal hook did not stop the run", file=sys.stderr, flush=True)
    return PROBLEM_FOUND


def _every_rank(ctx: ProbeContext, stage: str) -> None:
    """A stage of the reference that the benchmark's rehearsal runs past its start-up, on every rank of the formed
    world, where its module has it: ``past_start_up(ctx)`` (the reference's own CPU-capable stages after start-up, e.g.
    its data stage), then ``at_the_target(ctx)`` (the end of a run that reaches its target)."""
    hook = getattr(importlib.import_module(f"tests.benchmarks.{ctx.benchmark}.rehearsal"), stage, None)
    if hook is not None:
        hook(ctx)


def _spawned_rank(local_rank: int, ctx: ProbeContext, first_rank: int, world_size: int, master_addr: str, master_port: str) -> None:
    os.environ.update(
        RANK=str(first_rank + local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(world_size), MASTER_ADDR=master_addr, MASTER_PORT=str(master_port)
    )
    ctx.world_from_launcher = True
    take_over(ctx)


def spawn_world(ctx: ProbeContext, nprocs: int, world_size: int, first_rank: int, master_addr: str, master_port: str | int) -> None:
    """For a reference whose entry process spawns its ranks itself (``torch.multiprocessing``, one per GPU): spawn
    ``nprocs`` processes as it does (global ranks ``first_rank``.., local ranks 0..nprocs-1, the reference's own
    rendezvous address); each forms the world and writes its rank record (:func:`take_over`). This process then ends
    with the first failing child's status (as ``spawn(join=True)`` raises), else 0."""
    import torch.multiprocessing as mp

    status = 0
    try:
        mp.spawn(_spawned_rank, args=(ctx, first_rank, world_size, master_addr, str(master_port)), nprocs=nprocs, join=True)
    except mp.ProcessExitedException as error:
        status = error.exit_code or PROBLEM_FOUND
    except Exception:  # a child's error spawn re-raises here
        traceback.print_exc()
        status = PROBLEM_FOUND
    # the reference's entry process returns from its spawn and ends as a script does: its exit handlers run (the
    # rehearsal hook records what this process read), then it ends with the children's status
    hook = sys.modules.get("mlperf_wf_rehearsal_steps")
    if hook is not None:
        hook._exit_status["status"] = status
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _is_entry() -> bool:
    """Whether this process is one of the reference's entry scripts (a path as the command names it), or a module it
    starts with ``python -m`` (named ``-m <module>``; ``-m`` alone: any module)."""
    entries = [e for e in os.environ.get(ENTRY_VARIABLE, "").split(",") if e]
    script = sys.argv[0] if sys.argv else ""
    if not script or script == "-c":
        return False
    if script == "-m":  # while site runs, argv[0] is still "-m"; the module's name is in the original arguments
        words = list(getattr(sys, "orig_argv", []))
        module = words[words.index("-m") + 1] if "-m" in words[:-1] else ""
        return any(entry == "-m" or entry == f"-m {module}" for entry in entries)
    resolved = os.path.realpath(script)
    return any(resolved == os.path.realpath(entry) or script == entry for entry in entries)


def start() -> None:
    """The start-up hook: record this process; in the reference's entry process, probe and take over."""
    benchmark = os.environ.get(BENCHMARK_VARIABLE)
    if not benchmark or RECORDS_VARIABLE not in os.environ:
        return
    audit_writes(tuple(filter(None, os.environ.get(SOURCES_VARIABLE, "").split(","))), os.environ[RECORDS_VARIABLE])
    _write(f"process-{host()}-{os.getpid()}.json", _process_record())
    if not _is_entry():
        return
    ctx = ProbeContext(benchmark=benchmark, argv=list(sys.argv[1:]), env=dict(os.environ), cwd=Path.cwd())
    folder = _run_folder()
    # recorded, not raised: the test reads it from a retried run's records
    ctx.record("clean", str(folder), "a run starts in a run folder with nothing of an earlier attempt", not (folder / LEFTOVER).exists())
    try:
        module = importlib.import_module(f"tests.benchmarks.{benchmark}.rehearsal")
        module.probe(ctx)
    except ProbeFailure as error:
        ctx.checked.append({"kind": "problem", "what": str(error), "why": "", "held": False, "detail": ""})
        _fail(ctx, str(error))
    except Exception:
        _fail(ctx, traceback.format_exc())
    take_over(ctx)


def _fail(ctx: ProbeContext, problem: str) -> None:
    """A check failed before the world formed: record it and end this rank with its status."""
    _write_rank(ctx, {}, PROBLEM_FOUND, problem)
    os._exit(PROBLEM_FOUND)


def _write_rank(ctx: ProbeContext, world: dict, status: int, problem: str) -> None:
    """This rank's record: its process, place in the world, every check and how it ended."""
    rank, local, _ = _rank_info()
    record = {**_process_record(), "rank": rank, "local_rank": local, "world": world, "checked": ctx.checked}
    _write(f"rank-{host()}-{os.getpid()}.json", {**record, "status": status, "problem": problem, "log_file": ctx.log_file})
    if problem:
        print(f"rehearsal probe ({ctx.benchmark}, rank {rank} on {host()}): {problem}", file=sys.stderr, flush=True)
