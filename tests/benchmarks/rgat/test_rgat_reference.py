"""The rgat image's patches against the real reference module (mlcommons/training aa344c7).

The reference's ``mlperf_logging_utils.py`` is loaded, unmodified, from the shared reference source
(``../shared/reference-src`` beside the project, or ``$MLPERF_WF_REFERENCE_SRC``) in a subprocess with
the image's hooks on ``PYTHONPATH``, and used the way ``train_rgnn_multi_gpu.py`` uses it: the launcher
configures the logger with the script's folder and logs the submission keys, then a spawned GPU process
configures it again and logs an evaluation. The same script without the hooks shows the reference's
own behaviour, so these tests fail when the patches do nothing. No GPU or GLT is needed.
"""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import reference_source

ROOT = Path(__file__).resolve().parents[3]
CONTAINERS = ROOT / "containers"
HOOKS = CONTAINERS / "hooks"
PATCHES = ROOT / "src/mlperf_wf/benchmarks" / "rgat" / "container" / "patches"

SUBMISSION = {
    "MLPERF_SUBMISSION_BENCHMARK": "rgat",
    "MLPERF_SUBMISSION_ORG": "Example Org",
    "MLPERF_SUBMISSION_PLATFORM": "example-8xH100",
    "MLPERF_SUBMISSION_DIVISION": "closed",
    "MLPERF_SUBMISSION_STATUS": "onprem",
}

# What train_rgnn_multi_gpu.py does with the module: the logger is configured at import, with the script's
# folder, in the launcher and again in each process it spawns (they import the script again); the launcher
# logs the submission keys and run_start, rank 0 the evaluations and run_stop.
SCRIPT = """
import multiprocessing
import os.path as osp
import sys

from mlperf_logging.mllog import constants
from mlperf_logging_utils import get_mlperf_logger, submission_info

mllogger = get_mlperf_logger(path=osp.dirname(osp.abspath(__file__)))


def run_training_proc(rank):
    if rank == 0:
        mllogger.event(key=constants.EVAL_ACCURACY, value=0.73, metadata={constants.EPOCH_NUM: 0.05})
        mllogger.end(key=constants.RUN_STOP, metadata={constants.STATUS: constants.SUCCESS, constants.EPOCH_NUM: 0.05})


if __name__ == "__main__":
    mllogger.event(key=constants.CACHE_CLEAR, value=True)
    mllogger.start(key=constants.INIT_START)
    submission_info(mllogger, constants.GNN, "reference_implementation")
    mllogger.event(key=constants.GLOBAL_BATCH_SIZE, value=4096)
    mllogger.end(key=constants.INIT_STOP)
    mllogger.start(key=constants.RUN_START)
    spawn = multiprocessing.get_context("spawn")  # what torch.multiprocessing.spawn uses
    ranks = [spawn.Process(target=run_training_proc, args=(rank,)) for rank in range(2)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join()
    sys.exit(max(process.exitcode for process in ranks))
"""


def reference_dir() -> Path | None:
    """The reference's rgat folder, or None when the shared reference source is not on this machine."""
    return reference_source("retired_benchmarks/rgat")


needs_reference = pytest.mark.skipif(reference_dir() is None, reason="shared reference source (mlcommons/training aa344c7) not present")


def base_env() -> dict[str, str]:
    """This environment without any of the variables the tests set (so the host's cannot leak in)."""
    drop = {"PYTHONPATH", "MLPERF_WF_HOOKS", "COMPLIANCE_FILE", *SUBMISSION}
    env = {key: value for key, value in os.environ.items() if key not in drop}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # nothing may appear beside the reference's files either
    return env


def run_reference(script_dir: Path, env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, str(script_dir / "train.py")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def make_script_dir(tmp_path: Path, read_only: bool) -> Path:
    script_dir = tmp_path / "repository"
    script_dir.mkdir()
    (script_dir / "train.py").write_text(SCRIPT)
    if read_only:
        script_dir.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return script_dir


def hooked_env(result_file: Path, submission: dict[str, str]) -> dict[str, str]:
    env = base_env()
    env["PYTHONPATH"] = os.pathsep.join([str(HOOKS), str(PATCHES), str(reference_dir())])
    env["MLPERF_WF_HOOKS"] = "mlperf_wf_rgat"
    env["COMPLIANCE_FILE"] = str(result_file)
    env.update(submission)
    return env


def mllog_lines(path: Path) -> list[dict]:
    prefix = ":::MLLOG "
    return [json.loads(line[len(prefix) :]) for line in path.read_text().splitlines() if line.startswith(prefix)]


def values(lines: list[dict]) -> dict[str, object]:
    return {line["key"]: line["value"] for line in lines}


def run_hooked(tmp_path: Path, submission: dict[str, str]) -> tuple[Path, Path, list[str]]:
    """One hooked run; the result file, the script's folder and the reference folder's listing before it."""
    reference = reference_dir()
    before = sorted(os.listdir(reference))
    script_dir = make_script_dir(tmp_path, read_only=True)
    result_file = tmp_path / "results" / "result.txt"
    env = hooked_env(result_file, submission)
    try:
        run_reference(script_dir, env)
    finally:
        script_dir.chmod(0o755)
    return result_file, script_dir, before


@needs_reference
def test_hooked_reference_logs_rgat_and_the_config_to_the_result_file(tmp_path):
    result_file, script_dir, before = run_hooked(tmp_path, SUBMISSION)

    assert sorted(os.listdir(script_dir)) == ["train.py"], "the reference's log must not be written beside the script"
    assert sorted(os.listdir(reference_dir())) == before
    lines = mllog_lines(result_file)
    keys = [line["key"] for line in lines]
    # The launcher's lines, then rank 0's: the spawned processes append to the file the launcher wrote.
    assert keys[0] == "cache_clear" and keys[-2:] == ["eval_accuracy", "run_stop"]
    assert keys.count("submission_benchmark") == 1 and keys.count("run_start") == 1
    logged = values(lines)
    assert logged["submission_benchmark"] == "rgat"
    assert logged["submission_org"] == "Example Org"
    assert logged["submission_platform"] == "example-8xH100"
    assert logged["submission_division"] == "closed"
    assert logged["submission_status"] == "onprem"
    # The reference's own function still logs them: its file and line are in the metadata.
    submission_lines = [line for line in lines if line["key"].startswith("submission_")]
    assert len(submission_lines) == 5
    assert all(line["metadata"]["file"].endswith("mlperf_logging_utils.py") for line in submission_lines)


@needs_reference
def test_without_variables_the_reference_values_stay_but_gnn_becomes_rgat(tmp_path):
    result_file, _, _ = run_hooked(tmp_path, {})

    logged = values(mllog_lines(result_file))
    assert logged["submission_benchmark"] == "rgat"
    assert logged["submission_org"] == "reference_implementation"
    assert logged["submission_platform"] == "reference_implementation"
    assert logged["submission_division"] == "closed"


@needs_reference
def test_without_the_hooks_the_reference_logs_gnn_beside_the_script(tmp_path):
    script_dir = make_script_dir(tmp_path, read_only=False)
    result_file = tmp_path / "results" / "result.txt"
    env = base_env()
    env["PYTHONPATH"] = str(reference_dir())
    env["COMPLIANCE_FILE"] = str(result_file)
    env.update(SUBMISSION)
    run_reference(script_dir, env)

    assert not result_file.exists()
    logged = values(mllog_lines(script_dir / "mlperf_gnn.log"))
    assert logged["submission_benchmark"] == "gnn"
    assert logged["submission_org"] == "reference_implementation"
    assert logged["eval_accuracy"] == 0.73


def test_a_misspelled_hook_module_stops_python_with_one_clear_line():
    env = base_env()
    env["PYTHONPATH"] = os.pathsep.join([str(HOOKS), str(PATCHES)])
    env["MLPERF_WF_HOOKS"] = "mlperf_wf_rgta"
    done = subprocess.run([sys.executable, "-c", "print('trained')"], env=env, capture_output=True, text=True, timeout=60)

    assert done.returncode != 0
    assert "trained" not in done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "MLPERF_WF_HOOKS" in lines[0] and "mlperf_wf_rgta" in lines[0]


@pytest.mark.parametrize("source", [PATCHES / "mlperf_wf_rgat.py"], ids=lambda path: path.name)  # the hooks: tests/workflow/test_containers.py (3.6)
def test_image_python_files_parse_as_python_3_8(source):
    # nvcr.io/nvidia/pytorch:22.12-py3 (Dockerfile.h100) has Python 3.8; the A100 base has 3.9.
    ast.parse(source.read_text(), filename=str(source), feature_version=(3, 8))
