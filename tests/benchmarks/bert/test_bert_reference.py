"""bert against the reference itself (mlcommons/training aa344c7, retired_benchmarks/bert).

The reference is TensorFlow 2.4 on GPUs and cannot run here, so: every script, flag and input path the
full-scale command names is checked against the reference tree, the catalog and the prepared layout;
and the image's round patch is run against the reference's unmodified ``mlp_logging.py`` (loaded from
the shared reference source), driven the way ``run_pretraining.py`` drives it in its training and its
evaluation process, through the 5.0.0 compliance checker, with and without the patch. Only ``absl.flags``
is stood in for (absl is not installed here): an object holding the flag values the command passes.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.benchmarks.bert import prepare as prep
from mlperf_wf.config.registry import load_benchmark, load_dataset
from mlperf_wf.plan import launch
from mlperf_wf.results import compliance
from mlperf_wf.run import mllog_parts
from tests.conftest import reference_source

ROOT = Path(__file__).resolve().parents[3]
CONTAINERS = ROOT / "containers"
CONTAINER = ROOT / "src/mlperf_wf/benchmarks/bert/container"
HOOKS = CONTAINERS / "hooks"
PATCHES = CONTAINER / "patches"
PATCH_BLOCK_MARKER = "# --- mlperf-workflow patches"


def reference_dir() -> Path | None:
    return reference_source("retired_benchmarks/bert")


needs_reference = pytest.mark.skipif(reference_dir() is None, reason="shared reference source (mlcommons/training aa344c7) not present")


def python_invocations() -> list[list[str]]:
    """The run_pretraining.py command lines inside the definition's ``bash -c`` script (without their environment
    prefix, e.g. the evaluation's ``CUDA_VISIBLE_DEVICES=...``)."""
    command = load_benchmark("bert").full.command
    assert command[:2] == ["bash", "-c"]
    invocations = []
    for segment in re.split(r"[;&]", command[2]):
        words = shlex.split(segment)
        if "run_pretraining.py" in words:
            invocations.append(words[words.index("python3") :])
    return invocations


def defined_flags(folder: Path) -> set[str]:
    """Every absl flag the reference's modules define (flags.DEFINE_*("name", ...))."""
    names = set()
    for path in folder.glob("*.py"):
        names.update(re.findall(r"DEFINE_\w+\(\s*\"(\w+)\"", path.read_text()))
    return names


@needs_reference
def test_every_script_flag_and_input_the_full_command_names_exists():
    reference = reference_dir()
    flags = defined_flags(reference)
    invocations = python_invocations()
    assert [words[:2] for words in invocations] == [["python3", "run_pretraining.py"]] * 2  # training and evaluation processes
    assert (reference / "run_pretraining.py").is_file()
    inputs = {f.path for f in load_dataset("bert_wikipedia_input_files", ROOT).files}
    tree = prep.layout("full")
    for words in invocations:
        for word in words[2:]:
            name, _, value = word.removeprefix("--").partition("=")
            bare = name.removeprefix("no") if name.startswith("no") and name[2:] in flags else name
            assert bare in flags, f"--{name} is not a flag of the reference"
            if value.startswith("{checkpoint}/"):
                relative = value.removeprefix("{checkpoint}/")
                assert relative in inputs or f"{relative}.index" in inputs, f"{value}: not in bert_wikipedia_input_files"
            if value.startswith("{prepared}/"):
                pattern = value.removeprefix("{prepared}/")
                if name == "init_checkpoint":  # a checkpoint prefix: the reader opens <prefix>.index and its data file
                    assert {f"{pattern}.index", f"{pattern}.data-00000-of-00001"} <= set(tree), f"{value}: not a prepared checkpoint"
                    continue
                assert any(Path(path).match(pattern) for path in tree), f"{value}: nothing in the prepared layout matches"
    train, evaluate = ({w.partition("=")[0]: w.partition("=")[2] for w in words[2:]} for words in invocations)
    # the closed settings of the reference's commands (README.md:194-196, 218-222) and 10,000 eval records
    for options in (train, evaluate):
        assert options["--max_seq_length"] == "512" and options["--max_predictions_per_seq"] == "76" and options["--optimizer"] == "lamb"
    assert int(evaluate["--max_eval_steps"]) * int(evaluate["--eval_batch_size"]) == prep.EVAL_RECORDS["full"] == 10_000
    assert train["--save_checkpoints_steps"] == evaluate["--save_checkpoints_steps"]
    gbs = int(train["--train_batch_size"])
    every = (int(0.05 * (230.23 * gbs + 3_000_000) / 25_000)) * 25_000  # README.md:157
    assert int(train["--save_checkpoints_steps"]) == -(-every // gbs)


def test_dockerfile_ends_with_the_shared_patch_block():
    ours = (CONTAINER / "Dockerfile").read_text().split(PATCH_BLOCK_MARKER)[1].splitlines()[1:]
    rgat = (ROOT / "src/mlperf_wf/benchmarks" / "rgat" / "container" / "Dockerfile").read_text().split(PATCH_BLOCK_MARKER)[1].splitlines()[1:]
    assert [line.replace("rgat", "bert") for line in rgat] == ours
    assert "tensorflow/tensorflow:2.4.0-gpu" in (CONTAINER / "Dockerfile").read_text()
    assert "From: tensorflow/tensorflow:2.4.0-gpu" in (CONTAINER / "Apptainer.def").read_text()


def test_the_images_drop_the_base_images_cuda_apt_sources_before_apt_get_update():
    """tensorflow/tensorflow:2.4.0-gpu (nvidia/cuda 11.0 on Ubuntu 18.04) lists NVIDIA's CUDA repositories in
    cuda.list and nvidia-ml.list, signed with the key NVIDIA rotated in April 2022: apt-get update fails on them
    (NO_PUBKEY A4B469963BF863CC), so both files go before it (git comes from Ubuntu's archive)."""
    for definition in ("Dockerfile", "Apptainer.def"):
        text = "\n".join(line for line in (CONTAINER / definition).read_text().splitlines() if not line.lstrip().startswith("#"))
        update = text.index("apt-get update")
        for source in ("/etc/apt/sources.list.d/cuda.list", "/etc/apt/sources.list.d/nvidia-ml.list"):
            assert source in text[:update], f"src/mlperf_wf/benchmarks/bert/container/{definition}: {source} is not removed before apt-get update"


FLAG_VALUES = dict(
    train_batch_size=256,
    max_seq_length=512,
    max_predictions_per_seq=76,
    optimizer="lamb",
    learning_rate=0.00035,
    lamb_weight_decay_rate=0.01,
    lamb_beta_1=0.9,
    lamb_beta_2=0.999,
    poly_power=1.0,
    log_epsilon=-6,
    num_warmup_steps=0,
    start_warmup_step=0,
    num_train_steps=1758,
    steps_per_update=1,
    save_checkpoints_steps=586,
)

ABSL_STUB = """
import types
flags = types.SimpleNamespace(FLAGS=types.SimpleNamespace(**{values!r}))
"""

# What run_pretraining.py does with mlp_logging, in the order of its processes: the training process
# (main() lines 481-598 and CheckpointHook._save, lines 455-473) and the evaluation process (lines 481, 605-634).
DRIVER = """
import sys
import mlp_logging as mllog
from mlperf_logging.mllog import constants as c

mllog.get_mlperf_logger('', 'bert.log')
phase = sys.argv[1]
if phase == "train_start":
    mllog.mllog_start(key=c.INIT_START)
    mllog.mlperf_submission_log()
    mllog.mlperf_run_param_log()
    mllog.mllog_end(key=c.INIT_STOP)
    mllog.mllog_start(key=c.RUN_START)
    mllog.mllog_start(key="checkpoint_start", metadata={"step_num": 0})
    mllog.mllog_end(key="checkpoint_stop", metadata={"step_num": 0})
    mllog.mllog_start(key=c.BLOCK_START, metadata={"first_step_num": 1})
elif phase == "checkpoint":
    step = int(sys.argv[2])
    mllog.mllog_end(key=c.BLOCK_STOP, metadata={"first_step_num": step - 585, "step_count": 586})
    mllog.mllog_start(key="checkpoint_start", metadata={"step_num": step})
    mllog.mllog_end(key="checkpoint_stop", metadata={"step_num": step})
    if step < 1758:
        mllog.mllog_start(key=c.BLOCK_START, metadata={"first_step_num": step + 1})
elif phase == "train_end":
    mllog.mllog_end(key=c.RUN_STOP)
elif phase == "eval":
    step, accuracy = int(sys.argv[2]), float(sys.argv[3])
    mllog.mllog_start(key=c.EVAL_START)
    mllog.mllog_end(key=c.EVAL_STOP, value=step, metadata={"step_num": step})
    mllog.mllog_event(key=c.EVAL_ACCURACY, value=accuracy, metadata={"step_num": step})
"""

SUBMISSION = {
    "MLPERF_SUBMISSION_BENCHMARK": "bert",
    "MLPERF_SUBMISSION_ORG": "Example Org",
    "MLPERF_SUBMISSION_PLATFORM": "example-8xA100",
    "MLPERF_SUBMISSION_DIVISION": "closed",
    "MLPERF_SUBMISSION_STATUS": "onprem",
}


def simulate_run(tmp_path: Path, patched: bool, accuracies: list[float], parts: bool = False) -> Path:
    """Both processes of one run, interleaved as they are in time, appending to one result file (``parts``: each
    process to a file of its own, merged after the run, as a full-scale launch line makes them)."""
    stub = tmp_path / "stub"
    (stub / "absl").mkdir(parents=True)
    (stub / "absl" / "__init__.py").write_text(ABSL_STUB.format(values=FLAG_VALUES))
    (tmp_path / "driver.py").write_text(DRIVER)
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    result_file = tmp_path / "results" / "result.txt"
    drop = {"PYTHONPATH", "MLPERF_WF_HOOKS", "COMPLIANCE_FILE", "SEED", *SUBMISSION}
    env = {key: value for key, value in os.environ.items() if key not in drop}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    path = [str(stub), str(reference_dir())]
    if patched:
        path = [str(HOOKS), str(PATCHES), *path]
        env.update({"MLPERF_WF_HOOKS": "mlperf_wf_bert", "COMPLIANCE_FILE": str(result_file), "SEED": "4321", **SUBMISSION})
        if parts:
            env[launch.MLLOG_PARTS_VARIABLE] = str(mllog_parts.parts_folder(result_file))
    env["PYTHONPATH"] = os.pathsep.join(path)
    steps = [0, 586, 1172, 1758]
    calls = [["train_start"], ["eval", "0", str(accuracies[0])]]
    for step, accuracy in zip(steps[1:], accuracies[1:], strict=False):
        calls += [["checkpoint", str(step)], ["eval", str(step), str(accuracy)]]
    calls.append(["train_end"])
    for call in calls:
        done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), *call], cwd=workdir, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    if parts:
        mllog_parts.merge(result_file)
    return result_file if patched else workdir / "bert.log"


@needs_reference
@pytest.mark.parametrize("parts", [False, True], ids=["one-file", "a-file-per-process"])
def test_the_patched_reference_log_passes_5_0_0_closed_and_stops_at_the_target(tmp_path, parts):
    # a file per process: each evaluation process is a new one, and it must still see the run_stop an earlier one logged
    result = simulate_run(tmp_path, patched=True, accuracies=[0.34085, 0.70, 0.7213, 0.73], parts=parts)
    verdict = compliance.check(result, "5.0.0")
    assert verdict.verdict == "passed", verdict.messages
    text = result.read_text()
    assert '"key": "run_stop"' in text and text.count('"key": "run_stop"') == 1 and '"status": "success"' in text
    assert '"value": "Example Org"' in text and '"key": "seed", "value": 4321' in text
    assert '"samples_count": 300032' in text  # step 1172 x GBS 256


@needs_reference
def test_a_patched_run_that_misses_the_target_ends_aborted(tmp_path):
    result = simulate_run(tmp_path, patched=True, accuracies=[0.34085, 0.60, 0.65, 0.70])
    verdict = compliance.check(result, "5.0.0")
    assert verdict.verdict == "non_converged", verdict.messages
    assert '"status": "aborted"' in result.read_text()


@needs_reference
def test_the_unpatched_reference_log_fails_5_0_0(tmp_path):
    log = simulate_run(tmp_path, patched=False, accuracies=[0.34085, 0.70, 0.7213, 0.73])
    verdict = compliance.check(log, "5.0.0")
    assert verdict.verdict == "failed"
    problems = " ".join(verdict.messages + verdict.problems)
    for key in ("opt_lamb_weight_decay_rate", "opt_learning_rate_training_steps", "num_warmup_steps"):
        assert key in problems


SUBMITTER_LOGS = Path(os.environ.get("MLPERF_WF_FIXTURES", ROOT.parent / "shared" / "fixtures")) / (
    "training_results_v4.0/NVIDIA/results/eos_n8_ngc23.04_pytorch/bert"
)
"""NVIDIA's ten bert result files of round 4.0 (mlcommons/training_results_v4.0 at 62f111b), where the fixtures hold them."""


def test_a_submitters_real_bert_logs_get_a_verdict_and_a_score():
    if not sorted(SUBMITTER_LOGS.glob("result_*.txt")):
        pytest.skip(f"submitter logs not present: {SUBMITTER_LOGS}")
    from mlperf_wf.results import scoring, verdict

    for log in sorted(SUBMITTER_LOGS.glob("result_*.txt")):
        assert compliance.check(log, "5.0.0").verdict in ("passed", "non_converged", "failed")
    (score,) = scoring.to_json(scoring.score_paths(SUBMITTER_LOGS, "5.0.0", verdict.judged_score, jobs=1))
    assert score["benchmark"] == "bert" and score["valid"], score["reasons"]
    assert sum(run["verdict"] == "passed" for run in score["runs"]) >= 9 and score["rcp"]["verdict"] == "Pass"
    assert all(run["progress_key"] == "epoch_num" for run in score["runs"] if run["status"] == "success")  # bert counts samples in epoch_num
