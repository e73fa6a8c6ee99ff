"""``uv run``, the real one and the qwen35_397b_grpo rehearsal's stand-in (``tests/benchmarks/qwen35_397b_grpo/rehearsal_image/bin/uv``): the same
exit status and output when the driver exits 0, exits non-zero, is killed by a signal, when the launcher is sent
SIGTERM or SIGINT (forwarded to the driver), and when it is killed at a timeout.

The reference's ``run_and_time.sh`` starts the GRPO driver as ``uv run DRIVER --config ...`` in the image's synced
project (``UV_PROJECT_ENVIRONMENT=/opt/nemo_rl_venv``, on ``PATH``) and exits with its status, which SLURM then reports
for the job. The real uv here is uv 0.11.18 (the reference Dockerfile's ``UV_VERSION``) in ``.venv-reference``, run
offline in a project of the same shape (no dependencies, already locked and synced), as in the image.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reference_venv import REFERENCE_PYTHON, reference_python_with

ROOT = Path(__file__).resolve().parents[2]
STAND_IN = ROOT / "tests" / "benchmarks" / "qwen35_397b_grpo" / "rehearsal_image" / "bin" / "uv"

DRIVER = """
import os, signal, sys, time
print("driver", sys.argv[1:], flush=True)
print("driver's stderr", file=sys.stderr, flush=True)
mode = sys.argv[1]
if mode == "exit":
    sys.exit(int(sys.argv[2]))
if mode == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
def stop(signum, frame):
    print("driver got", signal.Signals(signum).name, flush=True)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
open(sys.argv[2], "w").write(str(os.getpid()))
print("ready", flush=True)
time.sleep(60)
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A locked, synced uv project like the image's ``/opt/nemo-rl``: its environment on ``PATH`` and named by
    ``UV_PROJECT_ENVIRONMENT``; uv offline, with no Python downloads."""
    reference_python_with("uv", "uv")
    uv = REFERENCE_PYTHON.parent / "uv"
    root = tmp_path_factory.mktemp("uv_project")
    project = root / "project"
    project.mkdir()
    pyproject = '[project]\nname = "driver"\nversion = "0"\nrequires-python = ">=3.10"\ndependencies = []\n\n[tool.uv]\npackage = false\n'
    (project / "pyproject.toml").write_text(pyproject)
    (project / "driver.py").write_text(DRIVER)
    environment = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    environment.update(
        UV_PROJECT_ENVIRONMENT=str(root / "venv"),
        UV_OFFLINE="1",
        UV_PYTHON_DOWNLOADS="never",
        UV_CACHE_DIR=str(root / "cache"),
        UV_NO_CONFIG="1",
        PATH=f"{root / 'venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        REAL_UV=str(uv),
    )
    for step in (["venv", "--quiet", "--python", sys.executable, str(root / "venv")], ["sync", "--quiet"]):
        done = subprocess.run([str(uv), *step], cwd=project, env=environment, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    return project, environment


def _launchers(environment: dict[str, str]) -> dict[str, list[str]]:
    return {"uv": [environment["REAL_UV"], "run"], "stand-in": [str(STAND_IN), "run"]}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _finished(project: tuple[Path, dict[str, str]], *arguments: str) -> dict[str, tuple[int, str, str]]:
    cwd, environment = project
    outcomes = {}
    for name, launcher in _launchers(environment).items():
        done = subprocess.run([*launcher, "driver.py", *arguments], cwd=cwd, env=environment, capture_output=True, text=True, timeout=60)
        outcomes[name] = (done.returncode, done.stdout, done.stderr)
    return outcomes


@pytest.mark.parametrize(("arguments", "status"), [(["exit", "0"], 0), (["exit", "3"], 3), (["killed"], 128 + signal.SIGKILL)])
def test_a_driver_that_ends_gives_the_same_status_and_output(project, arguments, status):
    outcomes = _finished(project, *arguments)
    assert outcomes["stand-in"] == outcomes["uv"]
    assert outcomes["uv"][0] == status and f"driver {arguments}" in outcomes["uv"][1], outcomes["uv"]


def _started(launcher: list[str], project: tuple[Path, dict[str, str]], pid_file: Path) -> subprocess.Popen:
    """The launcher with a driver that has started and waits (its pid in ``pid_file``)."""
    cwd, environment = project
    command = [*launcher, "driver.py", "wait", str(pid_file)]
    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline().startswith("driver") and process.stdout.readline() == "ready\n"
    return process


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_launcher_reaches_the_driver_and_gives_the_same_status(project, tmp_path, sent):
    outcomes = {}
    for name, launcher in _launchers(project[1]).items():
        pid_file = tmp_path / f"{name}.pid"
        process = _started(launcher, project, pid_file)
        process.send_signal(sent)
        stdout, stderr = process.communicate(timeout=30)
        outcomes[name] = (process.returncode, stdout, stderr, _pid_alive(int(pid_file.read_text())))
    assert outcomes["stand-in"] == outcomes["uv"]
    assert outcomes["uv"] == (128 + sent, f"driver got {sent.name}\n", "driver's stderr\n", False), outcomes["uv"]


def test_a_launcher_killed_at_a_timeout_gives_the_same_status(project, tmp_path):
    outcomes = {}
    for name, launcher in _launchers(project[1]).items():
        pid_file = tmp_path / f"{name}.pid"
        process = _started(launcher, project, pid_file)
        process.kill()  # what subprocess.run(timeout=...) and timeout -s KILL do at the timeout
        process.wait(timeout=30)
        driver = int(pid_file.read_text())
        # SIGKILL cannot be forwarded: the driver outlives the launcher under either (SLURM's step cleanup ends it)
        outlived = _pid_alive(driver)
        if outlived:
            os.kill(driver, signal.SIGKILL)  # it holds the pipes open
        stdout, stderr = process.communicate(timeout=30)
        outcomes[name] = (process.returncode, stdout, stderr, outlived)
    assert outcomes["stand-in"] == outcomes["uv"]
    assert outcomes["uv"] == (-signal.SIGKILL, "", "driver's stderr\n", True), outcomes["uv"]
