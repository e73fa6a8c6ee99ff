"""Fixtures shared by test modules: a real Docker engine on a private socket."""

from __future__ import annotations

import ast
import compileall
import fcntl
import getpass
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

# Before anything loads torch (libgomp reads it once): three workers share two cores, and torch's OpenMP threads would
# spin at every barrier while the core they wait for runs another worker, doubling a tiny trainer's CPU under load
# (bench/omp_wait_policy.py). Set here, it reaches the workers, every Snakemake job and the cluster in a box's jobs.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Every Python process the suite starts runs tests/process_start/sitecustomize.py (the garbage collector's threshold);
# the workers import it here, as they import torch, transformers and Snakemake and run tests in process.
PROCESS_START = Path(__file__).resolve().parent / "process_start"
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROCESS_START), os.environ.get("PYTHONPATH")]))
import tests.process_start.sitecustomize  # noqa: E402, F401

if str(PROCESS_START) in str(getattr(sys.modules.get("sitecustomize"), "__file__", "")):
    del sys.modules["sitecustomize"]  # a test that puts the round patches' hooks on its path imports theirs in process

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_COMMIT = "aa344c7"
"""The commit of the mlcommons/training excerpt in ``../shared/reference-src``."""
REFERENCE_COMMIT_DIR = f"mlcommons-training-{REFERENCE_COMMIT}"


def reference_source(path: str) -> Path | None:
    """A folder or file of the unmodified mlcommons/training excerpt (``../shared/reference-src`` beside the
    project, or ``$MLPERF_WF_REFERENCE_SRC``), e.g. ``"llama2_70b_lora"``; None when it is not on this machine."""
    named = os.environ.get("MLPERF_WF_REFERENCE_SRC")
    for base in [Path(named)] if named else [ROOT.parent / "shared" / "reference-src"]:
        for candidate in (base / REFERENCE_COMMIT_DIR / path, base / path):
            if candidate.exists():
                return candidate
    return None


SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
"""Where test_slurm writes its one-node cluster (the SLURM jobstep strips SLURM_CONF, so it must be here)."""
CONF_BACKUP = SYSTEM_CONF.with_name("slurm.conf.before-mlperf-wf-tests")
"""Where a site's own slurm.conf waits while the test runs (beside it, so a later session can put it back)."""
CONF_MARKER = "# written by mlperf-workflow's tests/workflow/test_slurm.py; removed when the test ends"


def remove_stale_test_conf() -> None:
    """Put back what a killed test session left: its slurm.conf points at a controller that no longer runs,
    and every `scontrol` (the Snakemake SLURM plugin calls one at start-up) then waits ~10 s for it."""
    if not SYSTEM_CONF.exists() or not SYSTEM_CONF.read_text().startswith(CONF_MARKER):
        return
    if subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True).returncode == 0:
        return  # a test session is running it now
    if CONF_BACKUP.exists():
        CONF_BACKUP.replace(SYSTEM_CONF)
    else:
        SYSTEM_CONF.unlink()


SHARED, TINY_MIRRORS = "shared", "tiny-mirrors"
"""The session's folder for what is made once (:func:`shared_folder`), and the tiny mirrors' place in it."""
SHARED_AHEAD: list[subprocess.Popen] = []
"""What the session's first process started making ahead (:func:`pytest_sessionstart`)."""


def pytest_sessionstart(session: pytest.Session) -> None:
    remove_stale_test_conf()
    first_process = not hasattr(session.config, "workerinput")  # the xdist controller (before its workers), or the only one
    if first_process:
        # A session killed before its Docker engine stopped left the engine's network namespace mounted in its
        # temporary folder: pytest could never remove that folder (a PytestWarning in every later session).
        # (Another session's running engine keeps its own, and a session still running keeps all of its mounts: a test
        # that starts a session of its own, tests/config/test_remove_a_benchmark.py, must not unmount another test's tmpfs.)
        _hold_session_lock(session.config._tmp_path_factory.getbasetemp())
        sessions = Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}"
        _unmount_under(sessions, keep=(*_running_engine_folders(), *_running_sessions(sessions)))
        # Where the environment sets PYTHONDONTWRITEBYTECODE (this machine's does), no process writes the project's
        # bytecode, so each of the session's ~2000 processes compiled the modules it imports again (the harness and
        # the trainer in each run, the probe in each rank): up to 0.1 s a start (bench/bytecode_cache.py). Compiled
        # once here into the ignored __pycache__ folders; a process reads them as it would its own.
        for folder in ("src", "tests"):
            compileall.compile_dir(ROOT / folder, quiet=1)
    whole_suite = [str(arg) for arg in session.config.args] in ([], [str(ROOT / "tests")], ["tests"])
    if whole_suite and first_process:
        # llama2_70b_lora's tiny mirror (3 minutes of pretraining) starts now, beside the first tests, rather than
        # when the first test that needs it holds a worker; that test waits on the same lock (made_once)
        folder = session.config._tmp_path_factory.getbasetemp() / SHARED / TINY_MIRRORS  # shared_folder's, seen from above
        code = "import sys; from pathlib import Path; from tests.conftest import TinyMirrors; TinyMirrors(Path(sys.argv[1])).make(sys.argv[2])"
        argv = [sys.executable, "-c", code, str(folder), "llama2_70b_lora"]
        SHARED_AHEAD.append(subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))


def pytest_sessionfinish(session: pytest.Session) -> None:
    for proc in SHARED_AHEAD:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the generator it started too
        proc.wait()
    for group in filter(None, _CPU_CGROUP):
        try:  # back to the hierarchy's root, then the process's own cgroup goes (unless a process it started still runs)
            (group.parent.parent / "cgroup.procs").write_text(str(os.getpid()))
            group.rmdir()
        except OSError:
            pass


CPU_COSTS = os.environ.get("MLPERF_WF_TEST_CPU")
"""A file to which each test appends its CPU seconds (its fixtures' set-up and tear-down included) and wall seconds, one
JSON line: what ``make test`` costs, apart from how loaded the machine was (``bench/test_costs.py`` sums it). Where
the process may make a cgroup (root, cgroup v1's cpuacct or v2), each pytest process moves into one of its own at its
start: every process it starts stays there, the cluster in a box's daemons and their jobs included (``counted``:
``cgroup``); elsewhere, its process and the children it waited for (``counted``: ``children``)."""
CPU_CGROUP_PARENT = "mlperf-wf-tests"


def _own_cpu_cgroup() -> Path | None:
    """A new cgroup of this process (``<v1 cpuacct or v2 root>/mlperf-wf-tests/<pid>``), this process moved into it;
    None where none can be made."""
    # v1's cpuacct hierarchy (its cpuacct.usage), else v2's unified one (its cgroup.controllers): what _cpu_seconds reads
    for root, marker in ((Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage"), (Path("/sys/fs/cgroup"), "cgroup.controllers")):
        if not (root / marker).exists():
            continue
        group = root / CPU_CGROUP_PARENT / str(os.getpid())
        for left in (root / CPU_CGROUP_PARENT).glob("[0-9]*"):
            if Path("/proc", left.name).exists():
                continue  # its pytest process runs (another worker of this session)
            try:  # an earlier session's, empty once what it started ended (rmdir refuses a cgroup with a process)
                left.rmdir()
            except OSError:
                pass
        try:
            group.mkdir(parents=True, exist_ok=True)
            (group / "cgroup.procs").write_text(str(os.getpid()))
            return group
        except OSError:
            return None
    return None


_CPU_CGROUP: list[Path | None] = []
"""This process's cgroup (:func:`_own_cpu_cgroup`), made at its first test."""


def _cpu_seconds() -> tuple[float, str]:
    import resource

    if not _CPU_CGROUP:
        _CPU_CGROUP.append(_own_cpu_cgroup())
    group = _CPU_CGROUP[0]
    if group is not None:
        if (group / "cpuacct.usage").exists():
            return int((group / "cpuacct.usage").read_text()) / 1e9, "cgroup"
        stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6, "cgroup"
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, "children"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    if not CPU_COSTS:
        yield
        return
    import json

    (cpu, _), wall, started = _cpu_seconds(), time.monotonic(), time.time()
    yield
    spent, counted = _cpu_seconds()
    cost = {"test": item.nodeid, "cpu": round(spent - cpu, 2), "wall": round(time.monotonic() - wall, 2), "counted": counted}
    cost.update(worker=os.environ.get("PYTEST_XDIST_WORKER", "main"), started=round(started, 1))
    with open(CPU_COSTS, "a") as log:
        log.write(json.dumps(cost) + "\n")


SERVICES = {"docker_host", "rehearsal_box", "slurm"}
"""Fixtures that start a machine-wide service: the Docker engine (a private socket and data root), the cluster in a box
(its own namespaces and bridge), the one-node SLURM at /etc/slurm. A test that uses one runs in a service group of
:data:`WORK_GROUPS`, one after another within the group."""
SERVICE_GROUPS = ("box", "engines")
"""The groups of :data:`WORK_GROUPS` that start services. They run beside each other: the box's daemons live in their
own namespaces and reach the host's only through ``SLURM_CONF``; each group's worker starts its own Docker engine."""
WORK_GROUPS = {
    # the cluster in a box: one box per session, its campaigns one after another
    "tests/plan/test_bundle.py": "box",
    "tests/benchmarks/bert/test_bert_rehearsal.py": "box",
    "tests/benchmarks/deepseekv3_671b/test_deepseekv3_671b_rehearsal.py": "box",
    "tests/benchmarks/llama31_405b/test_llama31_405b_rehearsal.py": "box",
    "tests/benchmarks/llama31_8b/test_llama31_8b_rehearsal.py": "box",
    "tests/benchmarks/qwen35_397b_grpo/test_qwen35_397b_grpo_rehearsal.py": "box",
    "tests/workflow/test_rehearsal.py": "box",
    # the one-node SLURM owns /etc/slurm/slurm.conf and the machine's munged; these share one Docker engine
    "tests/workflow/test_slurm.py": "engines",
    "tests/workflow/test_docker.py": "engines",
    "tests/run/test_reference_in_the_loop.py": "engines",
    "tests/workflow/test_image_apt_sources.py": "engines",
    # one session fixture's campaign (tiny_project), made once in the worker that runs both
    "tests/workflow/test_workflow.py": "llama2_70b_lora campaign",
    "tests/benchmarks/llama2_70b_lora/test_llama2_70b_lora.py": "llama2_70b_lora campaign",
    "tests/workflow/test_readme.py": "llama2_70b_lora campaign",
}
"""Module -> the work group that runs in one xdist worker: the modules of a service, or the modules that share a
session fixture's campaign. The xdist scheduler sees test ids only (checked against the fixtures below)."""


ONE_UNIT_PER_TEST = {"tests/benchmarks/test_demo_seeds.py"}
"""Modules whose tests share no module fixture: each test is a work unit of its own, so that each benchmark's slowest
demo seed (its inputs made, then one run) goes to whichever worker is free."""


def xdist_scope(nodeid: str) -> str:
    """The work unit of a test for ``make test``'s workers: its module (its module-scoped campaign runs once), its
    module's work group, or the test alone (:data:`ONE_UNIT_PER_TEST`)."""
    module = nodeid.split("::")[0]
    if module in ONE_UNIT_PER_TEST:
        return nodeid
    return WORK_GROUPS.get(module, module)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that starts a service outside a service group would run beside another worker's service."""
    in_service_groups = {module for module, group in WORK_GROUPS.items() if group in SERVICE_GROUPS}
    strays = sorted({item.nodeid.split("::")[0] for item in items if SERVICES & set(getattr(item, "fixturenames", ()))} - in_service_groups)
    if strays:
        raise pytest.UsageError(f"tests/conftest.py: {', '.join(strays)} start a machine-wide service: add them to a service group of WORK_GROUPS")


@pytest.hookimpl(optionalhook=True)  # xdist's hook: without xdist, tests run in one process
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Load scheduling by :func:`xdist_scope` (xdist's loadgroup marks do not reach its scheduler under pytest 9)."""
    from xdist.scheduler import LoadScopeScheduling

    class ServiceScopeScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return ServiceScopeScheduling(config, log)


def shell_values(path: Path) -> dict[str, str]:
    """``export NAME=value`` and ``: "${NAME:=value}"`` assignments of a shell file (quotes and comments removed)."""
    text = path.read_text()
    values = {name: value.strip('"') for name, value in re.findall(r"^export (\w+)=(\S*)", text, re.M)}
    defaults = {name: value.strip('"') for name, value in re.findall(r'^: "\$\{(\w+):=([^}]*)\}"', text, re.M)}
    return {**defaults, **values}


def parser_options(script: Path) -> set[str]:
    """Every ``--option`` the script's argparse parser declares."""
    options = set()
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            options |= {arg.value for arg in node.args if isinstance(arg, ast.Constant) and str(arg.value).startswith("--")}
    return options


def shared_folder(tmp_path_factory) -> Path:
    """A folder every xdist worker of this session sees (their base folders' common parent), for what is made once."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / SHARED


def made_once(folder: Path, name: str, make) -> Path:
    """``folder/name``, made by ``make(path)`` by the first worker that asks; the others wait for it (a file lock)."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    made = folder / name
    with (folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / f"{name}.done").exists():
            shutil.rmtree(made, ignore_errors=True)
            made.unlink(missing_ok=True)
            make(made)
            (folder / f"{name}.done").touch()
    return made


DOCKER_IMAGE = "mlperf-wf-tiny:bookworm"
"""A Debian userland (``debootstrap --variant=minbase`` + ``docker import``; no registry needed)."""

needs_docker = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("dockerd") or not shutil.which("debootstrap") or not shutil.which("docker"),
    reason="needs root, dockerd and debootstrap (bash .ci/run installs docker.io and debootstrap)",
)

# Stand-ins for what a GPU node has and this CI VM lacks, so the full-scale `docker run` line runs unchanged:
# - the NVIDIA Container Toolkit's hook: with it on dockerd's PATH, Docker accepts `--gpus all` (the hook is a
#   no-op here; the container sees no GPU);
# - CAP_SYS_RESOURCE: this VM drops it, so `--ulimit memlock=-1` cannot be granted; the sandbox runtime lowers
#   the container's memlock limit to what the VM allows, then runs runc with the unchanged OCI spec otherwise.
GPU_HOOK_STAND_IN = "#!/bin/sh\n# Stand-in for nvidia-container-runtime-hook (tests only): reads the OCI state, does nothing.\ncat > /dev/null\n"
SANDBOX_RUNTIME = '''#!{python}
"""Test-only OCI runtime: runc, with RLIMIT_MEMLOCK capped at what this VM allows."""
import json, os, resource, sys
args = sys.argv[1:]
for flag in ("--bundle", "-b"):
    if flag in args:
        path = os.path.join(args[args.index(flag) + 1], "config.json")
        spec = json.load(open(path))
        allowed = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
        for limit in spec.get("process", {{}}).get("rlimits", []):
            if limit["type"] == "RLIMIT_MEMLOCK" and allowed != resource.RLIM_INFINITY:
                limit["hard"], limit["soft"] = min(limit["hard"], allowed), min(limit["soft"], allowed)
        json.dump(spec, open(path, "w"))
os.execvp("runc", ["runc", *args])
'''


def _debootstrap(tarball: Path) -> None:
    """The Debian userland of :data:`DOCKER_IMAGE` as a tarball for ``docker import`` (made once per session: each
    service group's worker runs its own engine)."""
    rootfs = tarball.with_name("rootfs")
    shutil.rmtree(rootfs, ignore_errors=True)
    # The shared libraries this host's Python modules link against (ssl, ctypes, sqlite, ...).
    libraries = "libssl3,libffi8,libsqlite3-0,libbz2-1.0,libexpat1,libreadline8,libncursesw6,libtirpc3,libnsl2,libuuid1,libgdbm6,libgomp1"
    debootstrap = ["debootstrap", "--variant=minbase", f"--include={libraries}", "bookworm", str(rootfs), "http://deb.debian.org/debian"]
    built = subprocess.run(debootstrap, capture_output=True, text=True)
    if built.returncode != 0:
        pytest.fail(f"debootstrap failed: {built.stderr[-2000:]}")
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
    shutil.rmtree(rootfs)


@pytest.fixture(scope="session")
def docker_host(tmp_path_factory):
    """``dockerd`` on a private socket and data root, with the Debian userland image loaded; yields the environment
    (``DOCKER_HOST``) that reaches it, and stops the daemon by PID at the end."""
    if needs_docker.args[0]:
        pytest.skip(needs_docker.kwargs["reason"])
    base = tmp_path_factory.mktemp("docker")
    stand_ins = base / "stand-ins"
    stand_ins.mkdir()
    (stand_ins / "nvidia-container-runtime-hook").write_text(GPU_HOOK_STAND_IN)
    (stand_ins / "runc-sandbox").write_text(SANDBOX_RUNTIME.format(python=Path(sys.executable).resolve()))
    for tool in stand_ins.iterdir():
        tool.chmod(0o755)
    socket = base / "docker.sock"
    command = ["dockerd", "-H", f"unix://{socket}", "--data-root", str(base / "data"), "--exec-root", str(base / "exec")]
    command += ["--pidfile", str(base / "dockerd.pid"), "--bridge", "none", "--iptables=false"]
    command += ["--add-runtime", f"sandbox={stand_ins / 'runc-sandbox'}", "--default-runtime", "sandbox"]
    daemon_env = {**os.environ, "PATH": f"{stand_ins}{os.pathsep}{os.environ['PATH']}"}
    with (base / "dockerd.log").open("w") as log:  # the daemon holds its own copy of the descriptor
        daemon = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=daemon_env)
    env = {**os.environ, "DOCKER_HOST": f"unix://{socket}"}
    try:
        deadline = time.time() + 60
        while subprocess.run(["docker", "info"], env=env, capture_output=True).returncode != 0:
            if time.time() > deadline or daemon.poll() is not None:
                pytest.fail(f"dockerd did not start: {(base / 'dockerd.log').read_text()[-2000:]}")
            time.sleep(0.5)
        userland = made_once(shared_folder(tmp_path_factory), "rootfs.tar", _debootstrap)
        subprocess.run(["docker", "import", str(userland), DOCKER_IMAGE], env=env, check=True, capture_output=True)
        yield env
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
        _unmount_under(base)


SESSION_LOCK = ".session-running"
"""A file in a session's temporary folder that its first process holds locked (``flock``) while it runs."""
_SESSION_LOCKS: list = []


def _hold_session_lock(basetemp: Path) -> None:
    handle = (basetemp / SESSION_LOCK).open("w")
    fcntl.flock(handle, fcntl.LOCK_EX)
    _SESSION_LOCKS.append(handle)  # held until the process ends


def _running_sessions(sessions: Path) -> tuple[str, ...]:
    """The temporary folders in ``sessions`` of the sessions running now (their lock held; this one's too)."""
    running = []
    for lock in sessions.glob(f"*/{SESSION_LOCK}"):
        try:
            with lock.open() as handle:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            running.append(str(lock.parent))
        except OSError:
            pass
    return tuple(running)


def _unmount_under(folder: Path, keep: tuple[str, ...] = ()) -> None:
    """Unmount what a stopped daemon left mounted in ``folder`` (but under the folders ``keep``): dockerd leaves its
    default network namespace bound at ``<exec-root>/netns/default``, which no later pytest can remove from its old
    temporary folders (a PytestWarning in every run after)."""
    prefix = f"{folder.resolve()}/"
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    stale = (m for m in mounts if m.startswith(prefix) and not m.startswith(tuple(f"{k}/" for k in keep)))
    for point in sorted(stale, key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)


def _running_engine_folders() -> tuple[str, ...]:
    """The ``--exec-root`` folders of the Docker engines running now (other test sessions')."""
    folders = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # the process ended meanwhile
        if argv and argv[0].endswith(b"dockerd") and b"--exec-root" in argv[:-1]:
            folders.append(os.fsdecode(argv[argv.index(b"--exec-root") + 1]))
    return tuple(folders)


class TinyMirrors:
    """The generated tiny mirrors of a benchmark's datasets, made once for the whole test session by the workflow's own
    ``generate_tiny_mirror`` rule into a Snakemake output cache (:attr:`cache`), and copied into a workflow folder's
    ``resources/tiny/mirror``.

    llama2_70b_lora's mirror pretrains its base model (about 3 minutes on 2 cores): the tests whose subject comes
    after it (faults, launchers, SLURM, the reference in the loop) start from a copy (Snakemake takes an existing output
    without metadata as made); ``tiny_project``'s campaign runs with the same cache, so its ``generate_tiny_mirror`` job
    is Snakemake's cache lookup of this one. The demos generate their own."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.cache = folder / "output-cache"
        """The ``SNAKEMAKE_OUTPUT_CACHE`` the mirrors are stored in."""

    def make(self, benchmark: str) -> dict[str, Path]:
        """Dataset id -> the made mirror of each dataset ``benchmark`` reads."""
        workdir = made_once(self.folder, benchmark, lambda out: self._generate(benchmark, out))
        return {dataset_id: workdir / "resources" / "tiny" / "mirror" / dataset_id for dataset_id in self.datasets(benchmark)}

    @staticmethod
    def datasets(benchmark: str) -> list[str]:
        from mlperf_wf.config import registry

        return registry.load_benchmark(benchmark).datasets_read()

    def seed(self, workdir: Path, benchmark: str) -> Path:
        for dataset_id, made in self.make(benchmark).items():
            target = workdir / "resources" / "tiny" / "mirror" / dataset_id
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(made, target)  # a copy: a test that breaks its data must not break the others'
        return workdir

    def _generate(self, benchmark: str, workdir: Path) -> None:
        from tests.workflow.test_workflow import new_workdir, snakemake_argv, snakemake_env

        self.cache.mkdir(parents=True, exist_ok=True)
        targets = [f"resources/tiny/mirror/{dataset_id}" for dataset_id in self.datasets(benchmark)]
        # one core: Snakemake gives the one-thread job OMP_NUM_THREADS=1 ... (the same numerics as every campaign's),
        # and the tests beside it keep the other core
        argv = snakemake_argv(new_workdir(workdir), *targets, "--cores", "1", "--cache")
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=snakemake_env(self.cache))
        if proc.returncode != 0:
            logs = "\n".join(log.read_text()[-2000:] for log in sorted((workdir / "logs").rglob("*.log")))
            pytest.fail(f"the tiny mirrors of {benchmark} failed: {proc.stderr[-3000:]}\n{logs}")


@pytest.fixture(scope="session")
def tiny_mirrors(tmp_path_factory) -> TinyMirrors:
    """:class:`TinyMirrors` shared by the session's xdist workers."""
    return TinyMirrors(shared_folder(tmp_path_factory) / TINY_MIRRORS)


TINY_CAMPAIGN_STATUS: dict[Path, dict] = {}
"""What `mlperf-wf status` showed while ``tiny_project``'s campaign ran (tests/results/test_status.py watches it)."""
TINY_CAMPAIGN_RUNS = 3


@pytest.fixture(scope="session")
def tiny_project_cache(tiny_mirrors) -> Path:
    """The Snakemake output cache ``tiny_project`` fills (and a second workflow folder reuses): the tiny mirrors'."""
    return tiny_mirrors.cache


@pytest.fixture(scope="session")
def tiny_project(tmp_path_factory, tiny_mirrors, tiny_project_cache) -> Path:
    """llama2_70b_lora's tiny campaign of three runs through the whole workflow, watched by `mlperf-wf status` while it
    runs; its mirrors come from the output cache :class:`TinyMirrors` filled with the same rule; shared by
    tests/workflow/test_workflow.py and tests/benchmarks/llama2_70b_lora/ (one work group: :data:`WORK_GROUPS`)."""
    from tests.results.test_status import run_watched
    from tests.workflow.test_workflow import new_workdir, snakemake_argv, snakemake_env

    tiny_mirrors.make("llama2_70b_lora")  # in the cache before the campaign asks for it
    workdir = new_workdir(tmp_path_factory.mktemp("tiny"))
    config = [f"runs={TINY_CAMPAIGN_RUNS}"]
    argv = snakemake_argv(workdir, "--cores", "2", "--config", *config, "--cache")
    TINY_CAMPAIGN_STATUS[workdir] = run_watched(argv, workdir, config, snakemake_env(tiny_project_cache), workdir.parent / "snakemake.log")
    return workdir


@pytest.fixture(scope="session")
def rehearsal_box(tmp_path_factory):
    """The cluster in a box of the full-scale rehearsals (``tests/rehearsal/cluster.py``): a controller and four compute
    nodes, started once for the session and stopped at its end; skips where it cannot start."""
    from tests.rehearsal import cluster

    missing = cluster.missing_requirements()
    if missing:
        pytest.skip(missing)
    # four nodes: two two-node jobs at once, so that one job's scheduling and start-up overlap another's work
    nodes = ("n1", "n2", "n3", "n4")
    started = cluster.start_box(tmp_path_factory.mktemp("box"), nodes=nodes, cpus_per_node=512, memory_mb=2_100_000)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="session")
def rehearsal_campaign(rehearsal_box, tmp_path_factory):
    """The full-scale rehearsal of every benchmark (``tests/benchmarks/<name>/rehearsal.py``, or those of ``$MLPERF_WF_REHEARSE``)
    through the pyxis launcher on the box, in one Snakemake invocation with ``--profile slurm``: run 0 as planned, run 1
    with its last rank failing on purpose (``campaign.FAILING_RUN``), no retry. Shared by test_rehearsal.py and the
    benchmarks' own rehearsal tests, which read its records."""
    from tests.rehearsal import campaign, spec

    rehearsals = list(spec.rehearsals().values())
    workdir = tmp_path_factory.mktemp("rehearsal") / "project"
    configfile = campaign.prepare(workdir, rehearsals, "pyxis", runs=2, fail=campaign.failing_ranks(rehearsals))
    return campaign.run_on_box(rehearsal_box, workdir, configfile, rehearsals, "pyxis", runs=2, retries=0)
