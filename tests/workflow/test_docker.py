"""A tiny train job through the docker backend on a real Docker engine (``docker_host`` in conftest.py).

The image is a Debian userland; the host's Python, venv and project are bind-mounted read-only by
the tiny docker launcher.
"""

from __future__ import annotations

import json
import platform

from tests.conftest import DOCKER_IMAGE as IMAGE
from tests.conftest import needs_docker
from tests.workflow.test_workflow import new_workdir, snakemake

pytestmark = needs_docker


def test_tiny_train_job_runs_in_a_container_through_the_docker_backend(docker_host, tmp_path, monkeypatch, tiny_mirrors):
    for key, value in docker_host.items():
        monkeypatch.setenv(key, value)
    workdir = tiny_mirrors.seed(new_workdir(tmp_path / "docker_checkout"), "llama2_70b_lora")
    # -p: a tiny run prints its jobs' commands only when asked
    proc = snakemake(workdir, "--cores", "2", "-p", "results/tiny/llama2_70b_lora/report.json", "--config", "runs=1", "launcher=docker")
    assert "docker run --rm --network none -v " in proc.stdout + proc.stderr
    record = json.loads((workdir / "results/tiny/llama2_70b_lora/runs/0/provenance.json").read_text())
    assert record["launcher"] == "docker" and record["image"] == IMAGE
    report = json.loads((workdir / "results/tiny/llama2_70b_lora/report.json").read_text())
    assert report["runs"][0]["compliance"] == "passed"
    # the run really happened inside the container: it reports the container's hostname, not this host's
    log = (workdir / "logs/tiny/train/llama2_70b_lora/0.log").read_text()
    ran_on = next(line.split(" on host ")[1].strip() for line in log.splitlines() if " on host " in line)
    assert ran_on != platform.node() and ran_on != record["host"]
