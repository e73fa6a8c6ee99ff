"""A SLURM cluster in a box: a controller and compute nodes, each in its own network, mount, UTS and PID namespace.

Each node is a Linux network namespace on a private bridge the box creates (its own address and hostname, as on a
real cluster: ``hostname`` says ``n1``, a rank on ``n2`` reaches ``MASTER_ADDR=n1`` over the bridge), with its own
``slurmd`` (Debian's slurm 22.05). The controller (``slurmctld``) has a namespace of its own too. Every daemon
sees the box's ``slurm.conf`` at ``/etc/slurm/slurm.conf`` and the box's ``/etc/hosts`` through bind mounts in its
private mount namespace, so nothing of this machine's ``/etc`` changes and several boxes can run at once. One
``munged`` with a private socket serves the whole box (one munge key: the machine's). Clients on this host (the
Snakemake SLURM executor plugin's ``sbatch``/``squeue``) find the box through ``SLURM_CONF``.

Nodes declare GPUs as a count-only generic resource (no device files), so a job asks for ``--gres=gpu:N`` as on a
GPU cluster; the first node carries the ``docker`` feature (the Docker engine runs there). The filesystem is
shared, as a cluster's parallel filesystem is.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SLURM_DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch", "/usr/sbin/ip", "/usr/bin/unshare")


def missing_requirements() -> str | None:
    """Why a box cannot start here (None when it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, bind mounts)"
    absent = [path for path in SLURM_DAEMONS if not Path(path).exists()]
    if absent:
        return f"needs Debian's slurmctld slurmd slurm-client munge and iproute2 (bash .ci/run installs them); missing {', '.join(absent)}"
    return None


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()}")


def _free_subnet() -> int:
    """A third octet of 10.231.X.0/24 that no interface of this machine uses."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for octet in range(1 + secrets.randbelow(200), 255):
        if f"10.231.{octet}." not in used:
            return octet
    raise RuntimeError("no free 10.231.X.0/24 subnet for the cluster box")


@dataclass
class ClusterBox:
    """A running box (see the module docstring); stop it with :meth:`stop`."""

    folder: Path
    """Its configuration, state, spools and logs."""
    nodes: tuple[str, ...] = ("n1", "n2")
    """Compute node names (each its own namespace and hostname)."""
    gpus_per_node: int = 8
    """GPUs each node declares (a count: this machine has none)."""
    cpus_per_node: int = 16
    """Cores each node declares (more than the machine has, so whole-node requests schedule)."""
    memory_mb: int = 256000
    """Memory each node declares."""
    ident: str = field(default_factory=lambda: secrets.token_hex(2))
    """Short name part of its interfaces and namespaces (unique per box)."""
    octet: int = 0
    addresses: dict[str, str] = field(default_factory=dict)
    _daemons: list[subprocess.Popen] = field(default_factory=list)
    _namespaces: list[str] = field(default_factory=list)
    _links: list[str] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"mlwf{self.ident}b"

    @property
    def controller(self) -> str:
        return "ctl"

    @property
    def conf(self) -> Path:
        return self.folder / "etc-slurm" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a client on this host needs to reach the box (``sbatch``, ``squeue``, ``scontrol``)."""
        return {"SLURM_CONF": str(self.conf)}

    def namespace(self, host: str) -> str:
        return f"mlwf{self.ident}{host}"

    # ---- start ----

    def start(self, timeout: float = 60.0) -> ClusterBox:
        for sub in ("etc-slurm", "state", "log", "spool"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        self.octet = _free_subnet()
        self.addresses = {self.controller: f"10.231.{self.octet}.2"}
        self.addresses.update({node: f"10.231.{self.octet}.{11 + i}" for i, node in enumerate(self.nodes)})
        try:
            self._network()
            self._write_files()
            self._start_munge()
            self._start(self.controller, ["/usr/sbin/slurmctld", "-D", "-i"])
            for node in self.nodes:
                self._start(node, ["/usr/sbin/slurmd", "-D", "-N", node])
            self._wait_idle(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _network(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._links.append(self.bridge)
        _run("ip", "addr", "add", f"10.231.{self.octet}.1/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for host, address in self.addresses.items():
            namespace, veth = self.namespace(host), f"mlwf{self.ident}{host}v"
            _run("ip", "netns", "add", namespace)
            self._namespaces.append(namespace)
            _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)
            self._links.append(veth)
            _run("ip", "link", "set", veth, "master", self.bridge, "up")
            _run("ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
            _run("ip", "-n", namespace, "link", "set", "eth0", "up")
            _run("ip", "-n", namespace, "link", "set", "lo", "up")

    def _write_files(self) -> None:
        box = self.folder
        hosts = ["127.0.0.1 localhost", *(f"{address} {host}" for host, address in self.addresses.items())]
        (box / "hosts").write_text("\n".join(hosts) + "\n")
        nodes = ",".join(self.nodes)
        lines = [
            "# mlperf-workflow's cluster in a box (tests/rehearsal/cluster.py)",
            "ClusterName=mlwfbox",
            f"SlurmctldHost={self.controller}({self.addresses[self.controller]})",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={box / 'munge.sock'}",
            f"StateSaveLocation={box / 'state'}",
            f"SlurmdSpoolDir={box / 'spool'}/%n",
            # the nodes share one /tmp: PMIx's per-step folders would collide there
            f"TmpFS={box / 'tmp'}/%n",
            f"SlurmctldPidFile={box / 'slurmctld.pid'}",
            f"SlurmdPidFile={box / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={box / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={box / 'log' / 'slurmd-%n.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "ReturnToService=2",
            # squeue must still see a finished job when the executor plugin polls (no slurmdbd here)
            "MinJobAge=600",
            "SlurmdParameters=config_overrides",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "GresTypes=gpu",
            "KillWait=5",
        ]
        for i, node in enumerate(self.nodes):
            features = " Feature=docker" if i == 0 else ""
            lines.append(
                f"NodeName={node} NodeHostname={node} NodeAddr={self.addresses[node]} CPUs={self.cpus_per_node} "
                f"RealMemory={self.memory_mb} Gres=gpu:{self.gpus_per_node}{features} State=UNKNOWN"
            )
        lines.append(f"PartitionName=debug Nodes={nodes} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO")
        self.conf.write_text("\n".join(lines) + "\n")
        # slurmd drops a GPU without a device file: one character device per GPU (/dev/null's numbers) stands in
        devices = box / "dev"
        devices.mkdir(exist_ok=True)
        for index in range(self.gpus_per_node):
            device = devices / f"gpu{index}"
            if not device.exists():
                os.mknod(device, 0o644 | stat.S_IFCHR, os.makedev(1, 3))
        gres = "".join(f"NodeName={node} Name=gpu File={devices}/gpu[0-{self.gpus_per_node - 1}]\n" for node in self.nodes)
        (self.conf.parent / "gres.conf").write_text(gres)
        (self.conf.parent / "plugstack.conf").write_text("")
        for node in self.nodes:
            (box / "spool" / node).mkdir(parents=True, exist_ok=True)
            (box / "tmp" / node).mkdir(parents=True, exist_ok=True)

    def _start_munge(self) -> None:
        box = self.folder
        argv = ["/usr/sbin/munged", "-F", f"--socket={box / 'munge.sock'}", f"--pid-file={box / 'munged.pid'}"]
        argv += [f"--seed-file={box / 'munge.seed'}", f"--log-file={box / 'log' / 'munged.log'}", "--force"]
        self._daemons.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.time() + 20
        while not (box / "munge.sock").exists():
            if time.time() > deadline:
                raise RuntimeError(f"munged did not start: {self._log('munged.log')}")
            time.sleep(0.1)

    def on_network_of(self, host: str, argv: list[str]) -> list[str]:
        """``argv`` run in ``host``'s network only (the box's bridge, no route out), as on a login node of a cluster
        without internet; this machine's files and processes as they are."""
        return ["nsenter", f"--net=/run/netns/{self.namespace(host)}", *argv]

    def in_namespace(self, host: str, argv: list[str]) -> list[str]:
        """``argv`` run as on ``host``: its network, its hostname, its processes, the box's /etc/hosts and /etc/slurm."""
        etc = self.conf.parent
        setup = f'hostname {host} && mount --bind {self.folder / "hosts"} /etc/hosts && mkdir -p /etc/slurm && mount --bind {etc} /etc/slurm && exec "$@"'
        # its own process table too (--pid --mount-proc): a job's `ray stop` or `pkill` on one node, which on a real cluster
        # sees that machine's processes only, must not reach another node's or another job's
        unshare = [
            "unshare",
            "--mount",
            "--uts",
            "--pid",
            "--fork",
            "--kill-child=SIGTERM",
            "--mount-proc",
            "--propagation",
            "private",
            "sh",
            "-c",
            setup,
            "sh",
            *argv,
        ]
        # nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup tree slurmd reads
        return ["nsenter", f"--net=/run/netns/{self.namespace(host)}", *unshare]

    def _start(self, host: str, argv: list[str]) -> None:
        log = (self.folder / "log" / f"{host}.out").open("w")
        self._daemons.append(subprocess.Popen(self.in_namespace(host, argv), stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **self.env}))

    def _log(self, name: str) -> str:
        path = self.folder / "log" / name
        return path.read_text()[-3000:] if path.exists() else f"({name} not written)"

    def sinfo(self) -> list[str]:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, env={**os.environ, **self.env}, timeout=30)
        return proc.stdout.split("\n")

    def _wait_idle(self, timeout: float) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            states = dict(line.split() for line in self.sinfo() if line.strip())
            if set(states) == set(self.nodes) and all(state in ("idle", "mixed") for state in states.values()):
                return
            for proc in self._daemons:
                if proc.poll() is not None:
                    raise RuntimeError(f"a box daemon exited ({proc.args}): {self._log('slurmctld.log')} {self._log('slurmd-n1.log')}")
            time.sleep(0.5)
        raise RuntimeError(f"the box's nodes did not come up: {self.sinfo()}\n{self._log('slurmctld.log')}\n{self._log('slurmd-n1.log')}")

    # ---- stop ----

    def _slurmd(self, host: str) -> str:
        for pid in self._pids(self.namespace(host)):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "slurmd":
                    return pid
            except OSError:
                continue
        raise RuntimeError(f"no slurmd runs on {host}")

    def bind_on(self, host: str, source: Path, target: Path) -> None:
        """Show ``source`` at ``target`` on ``host`` only (its mount namespace: what its jobs see), as a stale or wrong
        mount on one node of a real cluster would."""
        _run("nsenter", f"--target={self._slurmd(host)}", "--mount", "mount", "--bind", str(source), str(target))

    def unbind_on(self, host: str, target: Path) -> None:
        # and its PID namespace: umount reads /proc/self/mountinfo, and the node's /proc has no "self" for a process
        # outside it (a file's unmount fails there)
        _run("nsenter", f"--target={self._slurmd(host)}", "--mount", "--pid", "umount", str(target))

    @contextlib.contextmanager
    def slow_on(self, host: str, subcommand: tuple[str, ...], cgroup: Path) -> Iterator[list[str]]:
        """While inside, every ``mlperf-wf <subcommand>`` on ``host`` (e.g. a node-check probe, not the srun that
        started it) runs in the CPU cgroup ``cgroup`` from its first instruction; yields a list that holds, once the block ends,
        the PIDs that joined.

        On ``host`` only (its mount namespace), the venv's ``mlperf-wf`` is a shell that writes its own PID into the
        cgroup and then becomes the real one (``exec`` keeps the PID). A watcher polling ``/proc`` instead missed the
        probe in a loaded ``make test``: without torch it lives about half a second."""
        command = Path(sys.executable).with_name("mlperf-wf")  # first on the PATH the box's jobs get (snakemake_env)
        folder = Path(tempfile.mkdtemp(prefix="slow-on-", dir=self.folder))
        real, joined, wrapper = folder / "mlperf-wf.real", folder / "joined", folder / "mlperf-wf"
        shutil.copy2(command, real)
        joined.touch()
        matches = " && ".join(f'[ "${position}" = {shlex.quote(word)} ]' for position, word in enumerate(subcommand, 1))
        wrapper.write_text(
            "#!/bin/sh\n"
            f"if {matches}; then\n"
            f"  echo $$ > {shlex.quote(str(cgroup / 'cgroup.procs'))} && echo $$ >> {shlex.quote(str(joined))}\n"
            "fi\n"
            f'exec {shlex.quote(sys.executable)} {shlex.quote(str(real))} "$@"\n'
        )
        wrapper.chmod(0o755)
        self.bind_on(host, wrapper, command)
        moved: list[str] = []
        try:
            yield moved
        finally:
            self.unbind_on(host, command)
            moved.extend(joined.read_text().split())
            shutil.rmtree(folder, ignore_errors=True)

    @staticmethod
    def _pids(namespace: str) -> list[str]:
        return subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split()

    def stop(self) -> None:
        """Stop every daemon (by process, never by name), then remove the namespaces and links."""
        for proc in reversed(self._daemons):
            if proc.poll() is None:
                # a node's `unshare --fork` ignores SIGTERM while it waits: SIGKILL it, and --kill-child hands its daemon
                # (the namespace's first process) SIGTERM
                proc.send_signal(signal.SIGKILL if proc.args[0] == "nsenter" else signal.SIGTERM)
        for proc in reversed(self._daemons):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._daemons.clear()
        deadline = time.time() + 10  # the daemons' own shutdown
        while time.time() < deadline and any(self._pids(namespace) for namespace in self._namespaces):
            time.sleep(0.2)
        for namespace in self._namespaces:
            # job processes left in a namespace (a killed job's ranks) go with it
            pids = self._pids(namespace)
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        self._namespaces.clear()
        for link in reversed(self._links):
            subprocess.run(["ip", "link", "del", link], capture_output=True)
        self._links.clear()


def start_box(folder: Path, **settings: object) -> ClusterBox:
    """A started box in ``folder`` (emptied first)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return ClusterBox(folder, **settings).start()  # type: ignore[arg-type]
