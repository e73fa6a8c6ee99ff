"""Node readiness: a short check of every node of a full-scale run, on the run's own allocation, before the run starts.

A bad node burns a whole multi-node run: NVIDIA's run.sub runs an all-reduce test and checks the container's mounts
before its trials. Here each node of the job (pyxis: one ``srun`` task per node on the host, beside the job's steps;
the one-node launchers: this host) runs :func:`probe`, which records into the attempt's folder:

- ``collective``: an all-reduce across every node of the run, its bus bandwidth against ``node_check.allreduce_gbps``:
  NCCL where the node has GPUs and the workflow's torch is built for them; elsewhere a sum over TCP between the nodes'
  check processes (the node's network at the run's rendezvous address, as gloo would use it);
- ``matmul``: dense matrix-multiply throughput of each device (bf16 on each GPU with torch; float32 on one CPU core
  with numpy where torch cannot use a GPU) against ``node_check.matmul_tflops_per_device``; unset, GPUs are held to half
  the dense BF16 peak of the system description's ``accelerator_model_name`` where ``plan/model_flops.yaml`` knows it
  (a CPU measurement, from a workflow environment whose torch has no CUDA, is recorded only);
- ``data``: the prepared tree and every dataset the run reads, as this node sees them, against their records (names
  and sizes: a stat per file, no reading);
- ``gpus``: uncorrectable ECC errors, hardware or thermal slowdown, and an application clock set below the node's other
  GPUs', where ``nvidia-smi`` exists.

Torch is loaded only where it can use a GPU (:func:`torch_can_use_gpus`): importing it costs about two CPU seconds,
paid by every node of every attempt of every run.

Then :func:`verdict` reads every node's record: a node that wrote none, or whose own checks failed, is bad. The job
fails with the bad nodes named, and they go to ``excluded-nodes.txt`` of the scale's results, which the train rule's
``slurm_extra`` reads when it submits (or resubmits) a run: ``--exclude`` keeps the retry off them. A collective that
failed or was slow with no node to blame fails the job without excluding anyone. The check runs before the reference
starts: the rules' timed region (and its init window) is not touched. Every attempt's records stay (outside the run
folder, which each attempt empties); the run's provenance lists them, and ``mlperf-wf status`` shows the excluded
nodes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from mlperf_wf.errors import UserError

HEALTHY_FRACTION = 0.5
"""A healthy device multiplies large matrices at well over this fraction of its dense BF16 peak."""
CPU_MATRIX = 512
"""n of the CPU's n x n float32 matmul (a node without GPUs: the cluster in a box, a CPU-only site)."""
MATMUL_SECONDS = {"gpu": 0.3, "cpu": 0.1}
"""How long each device's matrix multiply is timed (the CPU's: about fifty 512 x 512 products on one core)."""
EXCLUDED_FILE = "excluded-nodes.txt"
"""Beside the scale's results: one node name per line (with why, after a tab); the train rule excludes them."""
PORT_OFFSET = 1
"""The check's rendezvous port is the run's MASTER_PORT + this (never the port the reference binds next)."""


def default_matmul_expectation(peak_bf16_tflops: float | None) -> float | None:
    """What a device of this dense BF16 peak (TFLOPS, None where unknown) is held to, per device."""
    return None if peak_bf16_tflops is None else peak_bf16_tflops * HEALTHY_FRACTION


def _problem(checks: dict) -> str | None:
    for name, check in checks.items():
        if check.get("ok") is False:
            return f"{name}: {check['problem']}"
    return None


def torch_can_use_gpus() -> bool:
    """Whether this node has NVIDIA or AMD GPU devices and the workflow's torch is built for them, read from the
    device files and torch's ``version.py`` without importing torch."""
    import ast
    import importlib.util

    if not (Path("/dev/nvidiactl").exists() or Path("/dev/kfd").exists()):
        return False
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    try:
        tree = ast.parse((Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text())
    except (OSError, SyntaxError):
        return True  # an unreadable build description: let torch itself say
    built_for = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(target, ast.Name) and target.id in ("cuda", "hip") and isinstance(node.value, ast.Constant):
            built_for[target.id] = node.value.value
    return any(built_for.values())


def _collective(nodes: int, rank: int, master_addr: str, port: int, timeout_s: float, expect_gbps: float | None, gpus: bool) -> dict:
    backend = "nccl" if gpus else "tcp"
    try:
        bytes_reduced, seconds = (_nccl_all_reduce if gpus else _tcp_all_reduce)(nodes, rank, master_addr, port, timeout_s)
    except Exception as err:  # a peer that never came, a network that refuses: recorded, the verdict decides
        return {"ok": False, "backend": backend, "problem": f"{backend} all-reduce across {nodes} nodes failed: {str(err).splitlines()[0][:200]}"}
    bus_gbps = 2 * (nodes - 1) / nodes * bytes_reduced / seconds / 1e9
    result = {"backend": backend, "bus_gbps": round(bus_gbps, 3), "expected_gbps": expect_gbps}
    if expect_gbps is not None and bus_gbps < expect_gbps:
        return {**result, "ok": False, "problem": f"{backend} all-reduce bus bandwidth {bus_gbps:.3g} GB/s is below the expected {expect_gbps:g}"}
    return {**result, "ok": True}


ALL_REDUCE_ITERATIONS = 5
"""Timed all-reduces after one warm-up (which makes the connections)."""


def _nccl_all_reduce(nodes: int, rank: int, master_addr: str, port: int, timeout_s: float) -> tuple[int, float]:
    """(bytes reduced, seconds per all-reduce) of a 64 MiB buffer on GPU 0 with NCCL."""
    import datetime

    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl", init_method=f"tcp://{master_addr}:{port}", world_size=nodes, rank=rank, timeout=datetime.timedelta(seconds=timeout_s))
    buffer = torch.ones((64 << 20) // 4, dtype=torch.float32, device=torch.device("cuda", 0))
    dist.all_reduce(buffer)
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(ALL_REDUCE_ITERATIONS):
        dist.all_reduce(buffer)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / ALL_REDUCE_ITERATIONS
    dist.destroy_process_group()
    return buffer.numel() * 4, seconds


TCP_BUFFER = 4 << 20
"""Bytes of float32 each node contributes to the TCP all-reduce."""


def _tcp_all_reduce(nodes: int, rank: int, master_addr: str, port: int, timeout_s: float) -> tuple[int, float]:
    """(bytes reduced, seconds per all-reduce) of a float32 buffer of ones summed over TCP: node 0 listens on ``port``,
    receives every other node's buffer, and sends each the sum, which every node checks (``nodes`` everywhere)."""
    import socket as sockets

    import numpy as np

    deadline = time.monotonic() + timeout_s
    buffer = np.ones(TCP_BUFFER // 4, dtype=np.float32)

    def receive(peer: sockets.socket) -> np.ndarray:
        data = bytearray(TCP_BUFFER)
        view, got = memoryview(data), 0
        while got < TCP_BUFFER:
            count = peer.recv_into(view[got:])
            if count == 0:
                raise ConnectionError("a peer closed its connection mid-exchange")
            got += count
        return np.frombuffer(data, dtype=np.float32)

    if rank == 0:
        with sockets.create_server(("", port), reuse_port=False) as server:
            server.settimeout(max(0.1, deadline - time.monotonic()))
            peers = []
            try:
                while len(peers) < nodes - 1:
                    peer, _ = server.accept()
                    peer.settimeout(timeout_s)
                    peers.append(peer)
            except TimeoutError:
                raise TimeoutError(f"{len(peers) + 1} of {nodes} nodes joined within {timeout_s:g} s") from None

            def exchange() -> np.ndarray:
                total = buffer.copy()
                for peer in peers:
                    total += receive(peer)
                for peer in peers:
                    peer.sendall(total.tobytes())
                return total

            return _timed_exchange(exchange, nodes, peers)
    while True:
        try:
            peer = sockets.create_connection((master_addr, port), timeout=max(0.1, deadline - time.monotonic()))
            peer.settimeout(timeout_s)
            break
        except OSError as err:  # node 0 not listening yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"node 0 at {master_addr}:{port} did not answer within {timeout_s:g} s ({err})") from None
            time.sleep(0.1)
    with peer:

        def exchange() -> np.ndarray:
            peer.sendall(buffer.tobytes())
            return receive(peer)

        return _timed_exchange(exchange, nodes, [peer])


def _timed_exchange(exchange, nodes: int, peers: list) -> tuple[int, float]:
    if not (exchange() == nodes).all():  # the warm-up, checked
        raise ValueError(f"the sum over {nodes} nodes is wrong")
    started = time.perf_counter()
    for _ in range(ALL_REDUCE_ITERATIONS):
        exchange()
    seconds = (time.perf_counter() - started) / ALL_REDUCE_ITERATIONS
    for peer in peers:
        peer.close()
    return TCP_BUFFER, seconds


def cpu_matmul_tflops(n: int, seconds: float, clock=time.perf_counter) -> float:
    """Throughput (TFLOPS) of numpy's float32 ``n`` x ``n`` matrix multiply on one core (one BLAS thread: several would
    spin-wait on a busy node and measure the waiting) over at least ``seconds`` of ``clock`` (``time.process_time``:
    what the core does per second it runs, whatever runs beside it)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    with threadpool_limits(limits=1):
        a @ b  # warm-up
        count, started = 0, clock()
        while count == 0 or clock() - started < seconds:
            a @ b
            count += 1
        return 2 * n**3 * count / (clock() - started) / 1e12


def _gpu_matmul_tflops(n: int, seconds: float) -> dict[str, float]:
    """Each GPU's bf16 ``n`` x ``n`` matrix-multiply throughput with torch."""
    import torch

    def throughput(device: torch.device) -> float:
        a, b = torch.randn(n, n, device=device, dtype=torch.bfloat16), torch.randn(n, n, device=device, dtype=torch.bfloat16)
        torch.matmul(a, b)  # warm-up
        torch.cuda.synchronize()
        count, started = 0, time.perf_counter()
        while count == 0 or time.perf_counter() - started < seconds:
            torch.matmul(a, b)
            count += 1
            torch.cuda.synchronize()
        return 2 * n**3 * count / (time.perf_counter() - started) / 1e12

    return {f"cuda:{i}": throughput(torch.device("cuda", i)) for i in range(torch.cuda.device_count())}


def _matmul(matrix_size: int, expect_tflops: float | None, expect_gpu_tflops: float | None = None, seconds: float | None = None, gpus: bool = False) -> dict:
    if gpus:
        devices = _gpu_matmul_tflops(matrix_size, seconds or MATMUL_SECONDS["gpu"])
        expect_tflops = expect_tflops or expect_gpu_tflops
    else:
        # the CPU's measurement: the accelerator's expectation does not apply to it
        devices = {"cpu": cpu_matmul_tflops(CPU_MATRIX, seconds or MATMUL_SECONDS["cpu"])}
    result = {"tflops": {name: round(value, 6) for name, value in devices.items()}, "expected_tflops": expect_tflops}
    slow = {name: value for name, value in devices.items() if expect_tflops is not None and value < expect_tflops}
    if slow:
        listed = ", ".join(f"{name} {value:.3g}" for name, value in slow.items())
        return {**result, "ok": False, "problem": f"matrix-multiply throughput {listed} TFLOPS is below the expected {expect_tflops:g}"}
    return {**result, "ok": True}


def _sizes_problem(folder: Path, expected: dict[str, int], what: str) -> str | None:
    for name, size in sorted(expected.items()):
        path = folder / name
        try:
            actual = path.stat().st_size
        except OSError:
            return f"{what}: {path} is missing on this node"
        if actual != size:
            return f"{what}: {path} is {actual} bytes on this node, {size} when it was checked"
    return None


def _data(prepared: Path | None, inputs: dict[str, tuple[Path, Path]]) -> dict:
    """Names and sizes of the run's data as this node sees them, against the prepared tree's stamps and each dataset's
    verification record."""
    import gzip

    from mlperf_wf.acquire import prepare

    files = 0
    if prepared is not None:
        stamps = prepare.stamps_file(prepared)
        try:
            with gzip.open(stamps, "rt") as handle:
                expected = {path: stamp[0] for path, stamp in json.load(handle).items()}
        except (OSError, ValueError) as err:
            return {"ok": False, "problem": f"prepared data: its record {stamps} cannot be read on this node ({err})", "files": files}
        files += len(expected)
        problem = _sizes_problem(prepared, expected, "prepared data")
        if problem:
            return {"ok": False, "problem": problem, "files": files}
    for role, (folder, record) in sorted(inputs.items()):
        try:
            expected = {item["path"]: item["size"] for item in json.loads(record.read_text())["files"]}
        except (OSError, ValueError, KeyError, TypeError) as err:
            return {"ok": False, "problem": f"input {role}: its verification record {record} cannot be read on this node ({err})", "files": files}
        files += len(expected)
        problem = _sizes_problem(folder, expected, f"input {role}")
        if problem:
            return {"ok": False, "problem": problem, "files": files}
    return {"ok": True, "files": files}


GPU_FIELDS = (
    "index",
    "ecc.errors.uncorrected.volatile.total",
    "clocks_throttle_reasons.hw_slowdown",
    "clocks_throttle_reasons.sw_thermal_slowdown",
    "clocks.applications.graphics",
    "clocks.max.graphics",
)
"""What ``nvidia-smi --query-gpu`` reports of each GPU (one CSV line per GPU, in this order)."""
CLOCK_SPREAD = 0.05
"""A GPU whose application clock is this fraction below its node's highest was set apart (``nvidia-smi -ac``): the
run would go at its pace."""


def _gpus() -> dict | None:
    """ECC, slowdown and application-clock state of every GPU, where ``nvidia-smi`` exists (None elsewhere)."""
    if shutil.which("nvidia-smi") is None:
        return None
    query = ["nvidia-smi", f"--query-gpu={','.join(GPU_FIELDS)}", "--format=csv,noheader,nounits"]
    done = subprocess.run(query, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return {"ok": False, "problem": f"nvidia-smi failed: {(done.stderr.strip().splitlines() or ['no message'])[-1]}"}
    gpus = []
    for line in done.stdout.strip().splitlines():
        index, ecc, hw, thermal, clock, max_clock = (part.strip() for part in line.split(","))
        gpus.append({"index": index, "uncorrected_ecc": ecc, "hw_slowdown": hw, "thermal_slowdown": thermal, "clock_mhz": clock, "max_clock_mhz": max_clock})
    for gpu in gpus:
        if gpu["uncorrected_ecc"].isdigit() and int(gpu["uncorrected_ecc"]) > 0:
            return {"ok": False, "problem": f"GPU {gpu['index']}: {gpu['uncorrected_ecc']} uncorrectable ECC errors", "gpus": gpus}
        if "Active" in (gpu["hw_slowdown"], gpu["thermal_slowdown"]):
            kind = "hardware" if gpu["hw_slowdown"] == "Active" else "thermal"
            return {"ok": False, "problem": f"GPU {gpu['index']}: {kind} slowdown active", "gpus": gpus}
    clocks = {gpu["index"]: int(gpu["clock_mhz"]) for gpu in gpus if gpu["clock_mhz"].isdigit()}  # "[N/A]" on some GPUs
    if clocks:
        slowest = min(clocks, key=clocks.get)
        if clocks[slowest] < (1 - CLOCK_SPREAD) * max(clocks.values()):
            problem = f"GPU {slowest}: application clock {clocks[slowest]} MHz, below the node's {max(clocks.values())} MHz"
            return {"ok": False, "problem": problem, "gpus": gpus}
    return {"ok": True, "gpus": gpus}


def probe(
    out: Path,
    nodes: int,
    node_rank: int,
    master_addr: str,
    port: int,
    prepared: Path | None,
    inputs: dict[str, tuple[Path, Path]],
    matrix_size: int,
    expect_tflops: float | None,
    expect_gbps: float | None,
    timeout_s: float,
    expect_gpu_tflops: float | None = None,
) -> dict:
    """Check this node (see the module docstring) and write ``out/<hostname>.json``. The collective comes first: a node
    whose own checks fail still joins it, so the others' records say what the network did."""
    host = socket.gethostname()
    started = time.time()
    checks: dict[str, dict] = {}
    gpus = torch_can_use_gpus()
    if nodes > 1:
        checks["collective"] = _collective(nodes, node_rank, master_addr, port, timeout_s, expect_gbps, gpus)
    checks["data"] = _data(prepared, inputs)
    checks["matmul"] = _matmul(matrix_size, expect_tflops, expect_gpu_tflops, gpus=gpus)
    gpu_state = _gpus()
    if gpu_state is not None:
        checks["gpus"] = gpu_state
    local = {name: check for name, check in checks.items() if name != "collective"}
    record = {"host": host, "node_rank": node_rank, "seconds": round(time.time() - started, 3), "checks": checks, "problem": _problem(local)}
    out.mkdir(parents=True, exist_ok=True)
    partial = out / f".{host}.json.partial"
    partial.write_text(json.dumps(record, indent=1))
    partial.replace(out / f"{host}.json")
    return record


def verdict(out: Path, hosts: list[str], excluded: Path) -> tuple[bool, str, dict]:
    """Every node's record in ``out`` for the allocation's ``hosts``: (passed, one line, the verdict written to
    ``out/verdict.json``). Bad nodes are appended to ``excluded``."""
    records = {}
    for host in hosts:
        path = out / f"{host}.json"
        records[host] = json.loads(path.read_text()) if path.is_file() else None
    silent = "no record: its check did not start or did not end"
    bad = {host: record["problem"] if record else silent for host, record in records.items() if not record or record["problem"]}
    collective = [record["checks"]["collective"] for record in records.values() if record and "collective" in record["checks"]]
    collective_problem = next((check["problem"] for check in collective if not check["ok"]), None)
    if bad:
        line = "; ".join(f"{host}: {problem}" for host, problem in bad.items())
        message = f"node check failed on {', '.join(bad)} ({line}); the retry excludes {'it' if len(bad) == 1 else 'them'} ({excluded})"
    elif collective_problem:
        message = f"node check failed across {', '.join(hosts)}: {collective_problem}; no node to blame, none excluded"
    else:
        message = f"node check passed on {', '.join(hosts)}"
    described = {"hosts": hosts, "passed": not bad and not collective_problem, "bad": bad, "message": message, "time": time.time()}
    out.mkdir(parents=True, exist_ok=True)
    (out / "verdict.json").write_text(json.dumps(described, indent=1))
    if bad:
        excluded.parent.mkdir(parents=True, exist_ok=True)
        with excluded.open("a") as handle:
            for host, problem in bad.items():
                handle.write(f"{host}\t{problem}\n")
    return described["passed"], message, described


def excluded_with_why(excluded: Path) -> dict[str, str]:
    """Node -> why (its first line) of ``excluded``."""
    found: dict[str, str] = {}
    for line in (excluded.read_text() if excluded.is_file() else "").splitlines():
        node, _, why = line.partition("\t")
        if node.strip() and not node.startswith("#"):
            found.setdefault(node.strip(), why.strip())
    return found


def excluded_nodes(excluded: Path) -> list[str]:
    """The node names of ``excluded`` (first column), each once."""
    return sorted(excluded_with_why(excluded))


def attempts(folder: Path) -> list[dict]:
    """Every attempt's verdict of one run (oldest first), with its nodes' records, for the run's provenance."""
    found = []
    for verdict_file in sorted(folder.glob("*/verdict.json")):
        described = json.loads(verdict_file.read_text())
        described["attempt"] = verdict_file.parent.name
        described["records"] = {p.stem: json.loads(p.read_text()) for p in sorted(verdict_file.parent.glob("*.json")) if p.name != "verdict.json"}
        found.append(described)
    return sorted(found, key=lambda described: described["time"])


def environment_rank() -> int:
    """This task's node index in the job (``SLURM_NODEID``; 0 outside SLURM)."""
    return int(os.environ.get("SLURM_NODEID", "0"))


def role_paths(items: list[str]) -> dict[str, tuple[Path, Path]]:
    """``ROLE=FOLDER:VERIFICATION_RECORD`` arguments (``--input``) as role -> (folder, record)."""
    found = {}
    for item in items:
        role, sep, paths = item.partition("=")
        folder, colon, record = paths.partition(":")
        if not (sep and colon and role and folder and record):
            raise UserError(f"--input {item!r}: expected ROLE=FOLDER:VERIFICATION_RECORD")
        found[role] = (Path(folder), Path(record))
    return found
