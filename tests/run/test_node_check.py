"""The node check before a full-scale run: two "nodes" on this machine (each its own hostname and mount namespace),
one made bad on purpose, and the verdict, exclusion and provenance that follow."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlperf_wf.acquire import prepare
from mlperf_wf.run import node_check
from tests import cpu_quota
from tests.conftest import ROOT

needs_namespaces = pytest.mark.skipif(
    not cpu_quota.available() or not shutil.which("unshare"),
    reason="needs root, unshare and the cgroup cpu controller",
)
PORT = 29611


@pytest.fixture
def data(tmp_path) -> dict:
    """A prepared tree with its stamps and one dataset with its verification record, as a train job reads them."""
    prepared = tmp_path / "prepared" / "dataset"
    (prepared / "shard").mkdir(parents=True)
    for index in range(3):
        (prepared / "shard" / f"part-{index}").write_bytes(b"x" * (100 + index))
    prepare.write_stamps(prepared)
    dataset = tmp_path / "datasets" / "tokenizer"
    dataset.mkdir(parents=True)
    (dataset / "tokenizer.json").write_text("{}")
    record = tmp_path / "verified" / "tokenizer.json"
    record.parent.mkdir()
    record.write_text(json.dumps({"files": [{"path": "tokenizer.json", "size": 2, "md5": "x", "rehashed": True}]}))
    return {"prepared": prepared, "input": f"tokenizer={dataset}:{record}", "attempt": tmp_path / "node-check" / "0" / "1001"}


THROTTLED = """import os, sys
import numpy  # what the probe measures with, and the CLI, imported at full speed: the node is slow at its work
from mlperf_wf.cli import main
with open(sys.argv[1], "w") as procs:
    procs.write(str(os.getpid()))
sys.exit(main(sys.argv[2:]))
"""


def _node(
    host: str, rank: int, nodes: int, data: dict, setup: str = "", expect_tflops: float | None = None, cgroup: Path | None = None, timeout: int = 20
) -> subprocess.Popen:
    """``mlperf-wf node-check probe`` as node ``host`` would run it: its own hostname and mount namespace, after
    ``setup`` (shell run inside them first); ``cgroup``: a CPU cgroup it joins once numpy and the CLI are imported."""
    probe = ["node-check", "probe", "--nodes", str(nodes), "--master-addr", "127.0.0.1"]
    probe += ["--port", str(PORT), "--prepared", str(data["prepared"]), "--input", data["input"], "--out", str(data["attempt"]), "--timeout", str(timeout)]
    if expect_tflops is not None:
        probe += ["--matmul-tflops", str(expect_tflops)]
    python = [sys.executable, "-c", THROTTLED, str(cgroup / "cgroup.procs")] if cgroup else [sys.executable, "-m", "mlperf_wf"]
    script = f"hostname {host}; {setup} exec {shlex.join([*python, *probe])}"
    env = {**os.environ, "SLURM_NODEID": str(rank), "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", script], env=env, stderr=subprocess.PIPE, text=True)


def _verdict(data: dict, hosts: str, excluded: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "mlperf_wf", "node-check", "verdict", "--out", str(data["attempt"]), "--hosts", hosts, "--excluded", str(excluded)]
    return subprocess.run(argv, capture_output=True, text=True)


def _one_core_tflops() -> float:
    """The node check's CPU matrix multiply per second of this process's CPU time: what one core does, whatever else
    runs beside it (a wall-clock measure here would be the test suite's load)."""
    return node_check.cpu_matmul_tflops(node_check.CPU_MATRIX, 0.3, clock=time.process_time)


@needs_namespaces
def test_two_healthy_nodes_pass_with_their_collective_and_throughput_recorded(data, tmp_path):
    nodes = [_node("n1", 0, 2, data), _node("n2", 1, 2, data)]
    errors = [node.communicate(timeout=120)[1] for node in nodes]  # communicate: the pipes are read and closed
    assert [node.returncode for node in nodes] == [0, 0], errors
    done = _verdict(data, "n1,n2", tmp_path / "excluded-nodes.txt")
    assert done.returncode == 0 and done.stderr.strip() == "mlperf-wf: node check passed on n1, n2"
    for host in ("n1", "n2"):
        record = json.loads((data["attempt"] / f"{host}.json").read_text())
        assert record["problem"] is None
        assert record["checks"]["collective"]["backend"] == "tcp" and record["checks"]["collective"]["bus_gbps"] > 0
        assert record["checks"]["matmul"]["tflops"]["cpu"] > 0 and record["checks"]["data"]["files"] == 4
    assert not (tmp_path / "excluded-nodes.txt").exists()


WITHOUT_TORCH = """import sys
from mlperf_wf.cli import main
status = main(sys.argv[1:])
print("torch loaded" if "torch" in sys.modules else "torch not loaded")
sys.exit(status)
"""


def test_a_node_without_gpus_checks_itself_without_loading_torch(data, tmp_path):
    """Every node of every attempt runs the check: on a node where torch cannot use a GPU, loading it (two CPU seconds)
    would buy nothing."""
    probe = ["node-check", "probe", "--nodes", "1", "--master-addr", "127.0.0.1", "--port", str(PORT), "--prepared", str(data["prepared"])]
    probe += ["--input", data["input"], "--out", str(data["attempt"])]
    done = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torch not loaded"
    assert not node_check.torch_can_use_gpus()  # this machine: no GPU devices, a CPU build of torch
    assert json.loads((data["attempt"] / f"{os.uname().nodename}.json").read_text())["checks"]["matmul"]["tflops"]["cpu"] > 0


def test_torch_is_loaded_where_it_can_use_the_node_s_gpus(tmp_path, monkeypatch):
    built = tmp_path / "torch"
    built.mkdir()
    (built / "__init__.py").write_text("")
    real_exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda path: str(path) == "/dev/nvidiactl" or real_exists(path))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # an imported torch would be found first, whatever sys.path says
    for version, expected in (("cuda: Optional[str] = '12.8'\nhip = None\n", True), ("cuda: Optional[str] = None\nhip = None\n", False)):
        (built / "version.py").write_text(f"from typing import Optional\n{version}")
        assert node_check.torch_can_use_gpus() is expected, version


@needs_namespaces
def test_a_node_missing_a_mounted_file_and_slow_is_named_excluded_and_recorded(data, tmp_path):
    # n2 sees the prepared tree through a stale copy (a file missing) and runs under a CPU quota of 1 % (CFS's smallest,
    # 1 ms a 100 ms period: the check's 0.1 s matmul window must not fit a whole period's burst above its expectation)
    stale = tmp_path / "stale"
    shutil.copytree(data["prepared"], stale)
    (stale / "shard" / "part-2").unlink()
    with cpu_quota.cpu_quota(1) as cgroup:
        # a fifteenth of one core: n1, sharing this machine's two cores with whatever runs beside it, stays well above
        # it; n2's 1 % of a core as far below
        expect = _one_core_tflops() / 15
        stale_mount = f"mount --bind {stale} {data['prepared']};"
        nodes = [_node("n1", 0, 2, data, expect_tflops=expect), _node("n2", 1, 2, data, setup=stale_mount, expect_tflops=expect, cgroup=cgroup)]
        errors = [node.communicate(timeout=300)[1] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 1], errors
    excluded = tmp_path / "results" / node_check.EXCLUDED_FILE
    done = _verdict(data, "n1,n2", excluded)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"mlperf-wf: node check failed on n2 (n2: data: prepared data: {data['prepared']}/shard/part-2 is missing on this node)")
    assert line.endswith(f"the retry excludes it ({excluded})")
    n2 = json.loads((data["attempt"] / "n2.json").read_text())["checks"]
    assert n2["matmul"]["ok"] is False and "is below the expected" in n2["matmul"]["problem"]
    assert n2["collective"]["ok"] is True  # the network was fine: the node is bad for its own reasons
    assert json.loads((data["attempt"] / "n1.json").read_text())["problem"] is None
    assert node_check.excluded_nodes(excluded) == ["n2"]
    # the run's provenance lists the attempt, and a second (passing) one after it
    second = data["attempt"].with_name("1002")
    second.mkdir()
    (second / "n3.json").write_text(json.dumps({"host": "n3", "problem": None, "checks": {}}))
    node_check.verdict(second, ["n3"], excluded)
    attempts = node_check.attempts(data["attempt"].parent)
    assert [(a["attempt"], a["passed"], sorted(a["bad"])) for a in attempts] == [("1001", False, ["n2"]), ("1002", True, [])]
    assert set(attempts[0]["records"]) == {"n1", "n2"}


@needs_namespaces
def test_a_node_that_never_reports_is_the_one_blamed(data, tmp_path):
    started = time.monotonic()
    lonely = _node("n1", 0, 2, data, timeout=5)
    lonely.communicate(timeout=120)
    assert lonely.returncode == 0  # its own checks pass; its collective waited in vain
    assert time.monotonic() - started < 60
    record = json.loads((data["attempt"] / "n1.json").read_text())
    assert record["checks"]["collective"]["ok"] is False and record["problem"] is None
    done = _verdict(data, "n1,n2", tmp_path / "excluded")
    assert done.returncode == 1 and "node check failed on n2 (n2: no record: its check did not start or did not end)" in done.stderr


def test_a_collective_problem_with_no_node_to_blame_excludes_no_one(tmp_path):
    for host in ("n1", "n2"):
        collective = {"ok": False, "backend": "gloo", "problem": "gloo all-reduce bus bandwidth 0.1 GB/s is below the expected 100"}
        (tmp_path / f"{host}.json").write_text(json.dumps({"host": host, "problem": None, "checks": {"collective": collective}}))
    passed, message, _ = node_check.verdict(tmp_path, ["n1", "n2"], tmp_path / "excluded")
    assert not passed and message.startswith("node check failed across n1, n2: gloo all-reduce bus bandwidth 0.1 GB/s")
    assert "none excluded" in message and not (tmp_path / "excluded").exists()


def test_known_accelerators_get_half_their_peak_as_expectation():
    from mlperf_wf.plan import published

    def expected(accelerator: str) -> float | None:  # as the plan asks: the peak of model_flops.yaml, the one table of them
        return node_check.default_matmul_expectation(published.peak_tflops(published.family_of(accelerator)))

    assert expected("NVIDIA H100-SXM5-80GB") == 494.5
    assert expected("NVIDIA GB200") == 1250.0
    assert expected("NVIDIA A100-SXM4-80GB") == 156.0
    assert expected("AMD Instinct MI300X") == 653.5
    assert expected("Intel Xeon (tiny tier)") is None


def test_an_accelerators_expectation_is_not_applied_to_a_cpu_measurement():
    # a workflow environment whose torch has no CUDA measures the CPU: an H100's 494 TFLOPS must not fail it
    measured = node_check._matmul(512, None, expect_gpu_tflops=494.5, seconds=0.05)
    assert measured["ok"] is True and set(measured["tflops"]) == {"cpu"}
    # an expectation the site set applies to whatever is measured
    assert node_check._matmul(512, 1e6, seconds=0.05)["ok"] is False


def test_every_later_train_job_excludes_the_named_nodes(tmp_path):
    from tests.plan.test_plan import make_plan

    plan = make_plan(tmp_path, scale="full")
    assert plan.of("llama2_70b_lora").train_slurm_extra() == "--exclusive"
    excluded = tmp_path / plan.excluded_nodes_file()
    node_check.verdict(tmp_path / "attempt", ["n2", "n3"], excluded)
    assert plan.of("llama2_70b_lora").train_slurm_extra() == "--exclusive --exclude=n2,n3"


def test_the_run_line_holds_a_gpu_to_its_system_descriptions_accelerator_unless_the_site_says_otherwise(tmp_path):
    from tests.plan.test_plan import make_plan

    systems = tmp_path / "config" / "systems"
    systems.mkdir(parents=True)
    described = (ROOT / "config/systems/cpu-tiny.yaml").read_text()
    described = described.replace("accelerator_model_name: none (CPU only)", "accelerator_model_name: NVIDIA H100-SXM5-80GB")
    (systems / "cpu-tiny.yaml").write_text(described)  # a whole description, as the plan validates it
    line = make_plan(tmp_path, scale="full").of("rgat").node_check_line(0)
    assert " --gpu-matmul-tflops 494.5 " in line and "--matmul-tflops" not in line.replace("--gpu-matmul-tflops", "")
    line = make_plan(tmp_path, scale="full", node_check={"matmul_tflops_per_device": 300}).of("rgat").node_check_line(0)
    assert " --matmul-tflops 300 " in line and "--gpu-matmul-tflops" not in line
    assert make_plan(tmp_path, scale="full", node_check={"enabled": False}).of("rgat").node_check_line(0) == ""


def test_in_the_jobs_strict_shell_a_failing_probe_still_reaches_the_verdict(tmp_path):
    """Snakemake runs a job's shell with `set -euo pipefail`: a probe that fails (here: no prepared data at all on this
    host) must not end the line before the verdict, which names the node and excludes it."""
    import socket

    from tests.plan.test_plan import make_plan

    line = make_plan(tmp_path, scale="full", launcher="local").of("rgat").node_check_line(0)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", "-c", f"set -euo pipefail; {line}; echo launched"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert done.returncode == 1 and "launched" not in done.stdout, done.stderr
    host = socket.gethostname()
    assert f"mlperf-wf: node check failed on {host} ({host}: data: prepared data: its record " in done.stderr
    assert node_check.excluded_nodes(tmp_path / "results" / node_check.EXCLUDED_FILE) == [host]


NVIDIA_SMI = """#!/bin/sh
# nvidia-smi stand-in (tests only): the query's CSV as a node with these GPUs would print it
[ "$1" = "--query-gpu={fields}" ] && [ "$2" = "--format=csv,noheader,nounits" ] || {{ echo "unexpected query: $*" >&2; exit 2; }}
cat <<'CSV'
{lines}
CSV
"""


@pytest.mark.parametrize(
    ("gpu_lines", "problem"),
    [
        (["0, 0, Not Active, Not Active, 1755, 1980", "1, 0, Not Active, Not Active, 1755, 1980"], None),
        (["0, 0, Not Active, Not Active, [N/A], 1980"], None),
        (["0, 0, Not Active, Not Active, 1755, 1980", "1, 2, Not Active, Not Active, 1755, 1980"], "GPU 1: 2 uncorrectable ECC errors"),
        (["0, 0, Not Active, Active, 1755, 1980"], "GPU 0: thermal slowdown active"),
        (["0, 0, Active, Not Active, 1755, 1980"], "GPU 0: hardware slowdown active"),
        (
            ["0, 0, Not Active, Not Active, 1755, 1980", "1, 0, Not Active, Not Active, 1200, 1980"],
            "GPU 1: application clock 1200 MHz, below the node's 1755 MHz",
        ),
    ],
)
def test_the_gpus_state_is_read_from_nvidia_smi_and_a_faulty_or_set_apart_gpu_named(tmp_path, monkeypatch, gpu_lines, problem):
    stand_in = tmp_path / "bin" / "nvidia-smi"
    stand_in.parent.mkdir()
    stand_in.write_text(NVIDIA_SMI.format(fields=",".join(node_check.GPU_FIELDS), lines="\n".join(gpu_lines)))
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}")
    checked = node_check._gpus()
    assert checked["ok"] is (problem is None) and checked.get("problem") == problem, checked
    assert [gpu["index"] for gpu in checked["gpus"]] == [line.split(",")[0] for line in gpu_lines]


def test_without_nvidia_smi_the_gpus_are_not_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert node_check._gpus() is None
