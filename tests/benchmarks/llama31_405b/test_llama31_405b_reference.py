"""llama31_405b's full-scale definition and round patches against the reference itself (mlcommons/training aa344c7).

The NeMo reference cannot run on CPU here (NeMo 24.12, Transformer Engine, Megatron, 288 x 8 GPUs), so:
every path, script, config file and argument the full-scale command names is checked to exist in the
reference tree, each value the definition takes from config.sh/run_llama31.sh is compared with those files, and
the round patch is run on the reference's unmodified ``callbacks.py`` with stand-ins of the GPU-only packages it
imports (lightning, NeMo), so the log it writes is checked by the official checker.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.config.registry import load_benchmark
from mlperf_wf.plan.launch import Launch, quality_target_text
from tests.conftest import parser_options, reference_source, shell_values

ROOT = Path(__file__).resolve().parents[3]
CONTAINERS = ROOT / "containers"
CONTAINER = ROOT / "src/mlperf_wf/benchmarks/llama31_405b/container"
HOOKS = CONTAINERS / "hooks"
PATCHES = CONTAINER / "patches"
BENCH = load_benchmark("llama31_405b")
REFERENCE = reference_source(BENCH.reference.path)
needs_reference = pytest.mark.skipif(REFERENCE is None, reason="shared reference source (mlcommons/training aa344c7) not present")


def command_value(option: str) -> str:
    command = BENCH.full.command
    return command[command.index(option) + 1]


@needs_reference
def test_every_file_and_option_the_full_command_names_exists_in_the_reference():
    command = BENCH.full.command
    assert command[:3] == ["env", "python3", "pretrain_llama31.py"]  # env: the launcher word the multi-node values follow
    script = REFERENCE / command[2]
    assert script.is_file()
    for name in ("callbacks.py", "mcore.patch", "Dockerfile", "config.sh", "run_llama31.sh"):
        assert (REFERENCE / name).is_file(), name  # what the script imports and the image builds from
    options = parser_options(script)
    used = {part for part in command if part.startswith("--")}
    assert used <= options, sorted(used - options)
    run_script = (REFERENCE / "run_llama31.sh").read_text()
    for option in used - {"--max_steps", "--use_ckpt", "--resume_from_hf"}:  # those three run_llama31.sh adds conditionally
        assert f"{option} " in run_script, option
    for option in ("--max_steps", "--use_ckpt", "--resume_from_hf"):
        assert "CMD_SUFFIX} " + option in run_script, option


@needs_reference
def test_geometry_and_settings_follow_config_sh_and_run_llama31_sh():
    config = shell_values(REFERENCE / "config.sh")
    defaults = shell_values(REFERENCE / "run_llama31.sh")
    assert BENCH.full.geometry.nodes == int(config["NNODES"]) == int(defaults["NNODES"]) == 288
    assert BENCH.full.geometry.gpus_per_node == int(config["GPUS_PER_NODE"]) == 8
    assert command_value("--gbs") == config["GBS"] == "1152"
    assert command_value("--mbs") == config["MBS"] == "1"
    assert command_value("--eval_every") == config["EVAL_EVERY"] == "18432"
    assert command_value("--size") == config["SIZE"] == "405b"
    # the target is the rules' (mlperf-logging), the one source; the reference's run script agrees with it
    assert command_value("--target_log_ppl") == "{quality_target}" and quality_target_text(BENCH, Launch("pyxis")) == defaults["TARGET"] == "5.6"
    assert command_value("--step_time_atol") == defaults["STEP_TIME_ATOL"]
    assert command_value("--time") == config["TIME"]
    assert BENCH.full.geometry.walltime_minutes == 240
    assert command_value("--ckpt_start_step") == config["START_STEPS"]
    # The container paths run_llama31.sh passes; the dataset one is hard-coded in pretrain_llama31.py.
    assert "--initial_ckpt_path /checkpoint" in (REFERENCE / "run_llama31.sh").read_text() and BENCH.full.mounts["checkpoint"] == "/checkpoint"
    assert "--tokenizer_path /tokenizer" in (REFERENCE / "run_llama31.sh").read_text() and BENCH.full.mounts["tokenizer"] == "/tokenizer"
    assert '"/preproc_data/c4-validation-91205-samples.en_text_document"' in (REFERENCE / "pretrain_llama31.py").read_text()
    assert "WORKDIR /workspace/llama31" in (REFERENCE / "Dockerfile").read_text() and BENCH.full.workdir == "/workspace/llama31"


@needs_reference
def test_the_environment_is_the_one_the_reference_executor_sets():
    text = (REFERENCE / "pretrain_llama31.py").read_text()
    block = text[text.index("env_vars = {") : text.index("}", text.index("env_vars = {"))]
    reference_env = dict(re.findall(r'"(\w+)": "([^"]*)"', block))
    assert reference_env and all(BENCH.full.env[name] == value for name, value in reference_env.items())


@needs_reference
def test_the_dockerfile_is_the_references_plus_the_patch_block():
    ours = (CONTAINER / "Dockerfile").read_text()
    for line in (REFERENCE / "Dockerfile").read_text().splitlines():
        if line.startswith(("RUN pip", "RUN patch", "ARG NEMO_BASE_IMAGE")):
            assert line in ours, line
    assert BENCH.reference.commit in ours and BENCH.reference.commit in (CONTAINER / "Apptainer.def").read_text()
    block = ours[ours.index("# --- mlperf-workflow patches") :].splitlines()
    rgat = (ROOT / "src/mlperf_wf/benchmarks" / "llama2_70b_lora" / "container" / "Dockerfile").read_text()
    assert [line.replace("llama31_405b", "X") for line in block[1:]] == [
        line.replace("llama2_70b_lora", "X") for line in rgat[rgat.index("# --- mlperf-workflow patches") :].splitlines()[1:]
    ]


# ---- the round patch on the reference's own callbacks.py ----

STUBS = {
    "lightning/__init__.py": "",
    "lightning/pytorch/__init__.py": "class Callback:\n    pass\n",
    "pytorch_lightning/__init__.py": "",
    "pytorch_lightning/loggers/__init__.py": "class Logger:\n    def __init__(self, *a, **k):\n        pass\n",
    "pytorch_lightning/utilities/__init__.py": "def rank_zero_only(f):\n    return f\n",
    "nemo/__init__.py": "",
    "nemo/utils/__init__.py": "import logging\n",
    # NeMo-Run's shape as pretrain_llama31.py uses it (a dataclass executor, an experiment that runs its jobs).
    "nemo_run/__init__.py": (
        "import dataclasses\n"
        "@dataclasses.dataclass\nclass LocalExecutor:\n    ntasks_per_node: int = 1\n    launcher: object = None\n"
        "class SlurmExecutor:\n    def __init__(self, **k):\n        raise RuntimeError('would ssh to a login node')\n"
        "def SSHTunnel(**k):\n    raise RuntimeError('would ssh')\n"
        "class Experiment:\n    def run(self, sequential=False, detach=True):\n        return detach\n"
    ),
}

SCRIPT = """
import json, os, sys
import nemo_run as run
from mlperf_logging.mllog import constants
from callbacks import MLPerfCallback, mllogger
executor = run.SlurmExecutor(account="a", partition="p", tunnel=run.SSHTunnel(user="u", host="h", job_dir="/j"), nodes=2,
                             ntasks_per_node=8, gpus_per_node=8, mem="0", exclusive=True, gres="gpu:8")
executor.launcher = None  # pretrain_llama31.py:81
clone = type(executor)(ntasks_per_node=1); clone.launcher = None
callback = MLPerfCallback(global_batch_size=16, micro_batch_size=1, sequence_length=128, init_global_step=0, eval_every=4,
                          configs={constants.SEED: 7, constants.EVAL_SAMPLES: 64})
mllogger.submission_info()
print(json.dumps({"launcher": executor.launcher, "tasks": executor.ntasks_per_node, "clone": clone.launcher,
                  "detach": run.Experiment().run(sequential=True, detach=True)}))
"""


def run_callbacks(tmp_path: Path, hooked: bool, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    stubs = tmp_path / "stubs"
    for name, text in STUBS.items():
        (stubs / name).parent.mkdir(parents=True, exist_ok=True)
        (stubs / name).write_text(text)
    drop = {"PYTHONPATH", "MLPERF_WF_HOOKS", "COMPLIANCE_FILE"}
    env = {key: value for key, value in os.environ.items() if key not in drop and not key.startswith("MLPERF_SUBMISSION_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    paths = [str(HOOKS), str(PATCHES)] if hooked else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(stubs), str(REFERENCE)])
    if hooked:
        env["MLPERF_WF_HOOKS"] = "mlperf_wf_llama31_405b"
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)


@needs_reference
def test_hooked_reference_callbacks_log_to_the_result_file_with_the_configured_values_and_run_locally(tmp_path):
    result_file = tmp_path / "results" / "result.txt"
    submission = {"MLPERF_SUBMISSION_ORG": "Example Org", "MLPERF_SUBMISSION_PLATFORM": "example-288xH100", "MLPERF_SUBMISSION_DIVISION": "closed"}
    done = run_callbacks(tmp_path, True, {"COMPLIANCE_FILE": str(result_file), **submission})
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in result_file.read_text().splitlines() if ":::MLLOG " in line]
    values = {line["key"]: line["value"] for line in lines}
    assert values["submission_org"] == "Example Org" and values["submission_platform"] == "example-288xH100"
    assert values["submission_benchmark"] == "llama31_405b"  # the reference's own, kept
    assert {"cache_clear", "init_start"} <= set(values)
    assert all(line["metadata"]["file"].endswith("callbacks.py") for line in lines)  # the reference's file and line stay
    executor = json.loads(done.stdout.strip().splitlines()[-1])
    assert executor == {"launcher": "torchrun", "tasks": 8, "clone": "torchrun", "detach": False}


@needs_reference
def test_without_the_hooks_the_reference_logs_to_its_hard_coded_folder(tmp_path):
    done = run_callbacks(tmp_path, False, {})
    assert done.returncode != 0 and "/mlperf-outputs" in done.stderr  # the folder run_llama31.sh creates (line 118)


def test_the_hard_coded_paths_move_only_when_their_variable_is_set(monkeypatch):
    sys.path.insert(0, str(HOOKS))
    sys.path.insert(0, str(PATCHES))
    try:
        import mlperf_wf_llama31_405b as patch
    finally:
        sys.path.remove(str(HOOKS))
        sys.path.remove(str(PATCHES))
    monkeypatch.setenv("MLPERF_WF_PREPROC_DATA", "/preproc/dataset")
    monkeypatch.delenv("MLPERF_WF_NPY_INDEX", raising=False)
    paths = {"train": ["50", "/preproc_data/c4-train.en_6_text_document"], "validation": ["/preproc_data/c4-validation-91205-samples.en_text_document"]}
    assert patch.moved_all(paths) == {
        "train": ["50", "/preproc/dataset/c4-train.en_6_text_document"],
        "validation": ["/preproc/dataset/c4-validation-91205-samples.en_text_document"],
    }
    assert patch.moved("/npy_index") == "/npy_index"
    assert patch.moved("/preproc_data_other") == "/preproc_data_other"
    monkeypatch.setenv("MLPERF_WF_NPY_INDEX", "/results/npy_index")
    assert patch.moved("/npy_index") == "/results/npy_index"
    assert BENCH.full.env["MLPERF_WF_PREPROC_DATA"] == f"{BENCH.full.mounts['prepared']}/dataset"
    assert BENCH.full.env["MLPERF_WF_NPY_INDEX"].startswith(BENCH.full.mounts["results"] + "/")
