"""A tiny train job through the docker backend on a real Docker engine.

The test starts ``dockerd`` on a private socket and data root and stops it by PID.
The image is a Debian userland made with ``debootstrap --variant=minbase`` and
``docker import`` (no registry needed); the host's Python, venv and project are
bind-mounted read-only by the tiny docker launcher. Needs root and Debian's
``docker.io`` and ``debootstrap`` (``.ci/run`` installs them).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import time

import pytest

from tests.test_workflow import new_workdir, snakemake

IMAGE = "mlperf-wf-tiny:bookworm"
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("dockerd") or not shutil.which("debootstrap") or not shutil.which("docker"),
    reason="needs root, dockerd and debootstrap (bash .ci/run installs docker.io and debootstrap)",
)


@pytest.fixture(scope="module")
def docker_host(tmp_path_factory):
    base = tmp_path_factory.mktemp("docker")
    socket = base / "docker.sock"
    command = ["dockerd", "-H", f"unix://{socket}", "--data-root", str(base / "data"), "--exec-root", str(base / "exec")]
    command += ["--pidfile", str(base / "dockerd.pid"), "--bridge", "none", "--iptables=false"]
    daemon = subprocess.Popen(command, stdout=(base / "dockerd.log").open("w"), stderr=subprocess.STDOUT)
    env = {**os.environ, "DOCKER_HOST": f"unix://{socket}"}
    try:
        deadline = time.time() + 60
        while subprocess.run(["docker", "info"], env=env, capture_output=True).returncode != 0:
            if time.time() > deadline or daemon.poll() is not None:
                pytest.fail(f"dockerd did not start: {(base / 'dockerd.log').read_text()[-2000:]}")
            time.sleep(0.5)
        rootfs = base / "rootfs"
        # The shared libraries this host's Python modules link against (ssl, ctypes, sqlite, ...).
        libraries = "libssl3,libffi8,libsqlite3-0,libbz2-1.0,libexpat1,libreadline8,libncursesw6,libtirpc3,libnsl2,libuuid1,libgdbm6,libgomp1"
        debootstrap = ["debootstrap", "--variant=minbase", f"--include={libraries}", "bookworm", str(rootfs), "http://deb.debian.org/debian"]
        built = subprocess.run(debootstrap, capture_output=True, text=True)
        if built.returncode != 0:
            pytest.fail(f"debootstrap failed: {built.stderr[-2000:]}")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(["docker", "import", "-", IMAGE], stdin=tar.stdout, env=env, check=True, capture_output=True)
        tar.wait()
        yield env
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()


def test_tiny_train_job_runs_in_a_container_through_the_docker_backend(docker_host, tmp_path, monkeypatch):
    for key, value in docker_host.items():
        monkeypatch.setenv(key, value)
    workdir = new_workdir(tmp_path / "docker_checkout")
    proc = snakemake(workdir, "--cores", "2", "results/tiny/llama2_70b_lora/report.json", "--config", "runs=1", "launcher=docker")
    assert "docker run --rm --network none -v " in proc.stdout + proc.stderr
    record = json.loads((workdir / "results/tiny/llama2_70b_lora/runs/0/provenance.json").read_text())
    assert record["launcher"] == "docker" and record["image"] == IMAGE
    report = json.loads((workdir / "results/tiny/llama2_70b_lora/report.json").read_text())
    assert report["runs"][0]["compliance"] == "passed"
    # the run really happened inside the container: it reports the container's hostname, not this host's
    log = (workdir / "logs/tiny/train/llama2_70b_lora/0.log").read_text()
    ran_on = next(line.split(" on host ")[1].strip() for line in log.splitlines() if " on host " in line)
    assert ran_on != platform.node() and ran_on != record["host"]
