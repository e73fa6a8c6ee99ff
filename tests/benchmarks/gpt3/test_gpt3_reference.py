"""gpt3 against its reference tree (mlcommons/training retired_benchmarks/gpt3/megatron-lm at aa344c7).

The reference (Megatron-LM GPT-3 175B, TP 8 x PP 8, CUDA and apex) cannot run on this CPU, so conformance is
checked on what can be: every file the full-scale command names exists in the tree (and every flag is one
Megatron's arguments.py defines: tests/config/test_benchmarks.py), the container is the reference's Dockerfile plus
the same patch block as the other images, and the settings the plan uses are the run script's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mlperf_wf.config import registry
from tests.conftest import REFERENCE_COMMIT, reference_source

ROOT = Path(__file__).resolve().parents[3]
CONTAINERS = ROOT / "containers"


@pytest.fixture(scope="module")
def reference() -> Path:
    bench = registry.load_benchmark("gpt3")
    folder = reference_source(bench.reference.path)
    if folder is None or not bench.reference.commit.startswith(REFERENCE_COMMIT):
        pytest.skip("the gpt3 reference source at aa344c7 is not on this machine")
    return folder


def test_every_file_the_full_command_names_exists_in_the_reference(reference):
    command = registry.load_benchmark("gpt3").full.command
    script = next(word for word in command if word.endswith(".py"))
    assert (reference / script).is_file()
    assert (reference / "megatron" / "arguments.py").is_file() and (reference / "megatron" / "training.py").is_file()
    data = [word.removeprefix("{prepared}/") for word in command if word.startswith("{prepared}/") and word != "{prepared}/ckpt4000_fp32"]
    assert command[command.index("--load") + 1] == "{prepared}/ckpt4000_fp32" and "`ckpt4000_fp32` directory" in (reference / "README.md").read_text()
    run_script = (reference / "run_gpt3.sh").read_text()
    for prefix in data:
        assert prefix in run_script, f"{prefix} is not a data path of run_gpt3.sh"
        assert f"{prefix}.bin" in (reference / "checksums" / "dataset_checksum.log").read_text()
    for name in ("vocab.json", "merges.txt"):
        assert f"{{tokenizer}}/{name}" in command and f"${{BPE_DIR}}/{name}" in run_script


def test_the_commands_settings_are_the_run_scripts(reference):
    """Each `--flag value` of run_gpt3.sh's options with a literal value is the plan's (variables resolved to their defaults)."""
    command = registry.load_benchmark("gpt3").full.command
    script = (reference / "run_gpt3.sh").read_text()
    defaults = dict(re.findall(r': "\$\{(\w+):=([^}]*)\}"', script))
    defaults["EVAL_INTERVAL"] = str(-(-24576 // int(defaults["GBS"])))
    options = script.split('options=" \\')[1].split('"')[0]
    words = [word for word in options.split() if word != "\\"]
    pairs = [(word, after) for word, after in zip(words, [*words[1:], ""], strict=True) if word.startswith("--") and not after.startswith("--")]
    assert len(pairs) > 30
    assert {word for word in words if word.startswith("--")} <= set(command), "every flag of run_gpt3.sh's options is in the plan"
    for flag, value in pairs:
        value = re.sub(r"\$\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), value)
        if "$" in value or flag in ("--train-data-path", "--valid-data-path", "--vocab-file", "--merge-file", "--save", "--tensorboard-dir", "--seed"):
            continue
        assert flag in command, f"{flag} of run_gpt3.sh is not in the plan"
        assert command[command.index(flag) + 1] == value, f"{flag}: plan {command[command.index(flag) + 1]!r}, run_gpt3.sh {value!r}"
    external = dict(zip(*[iter(["--ext-iterations", "4000", "--ext-lr-steps", str(4000 * 1536)])] * 2, strict=True))
    for flag, value in external.items():
        assert command[command.index(flag) + 1] == value


def test_container_is_built_from_the_references_dockerfile_at_the_pinned_commit(reference):
    theirs = (reference / "Dockerfile").read_text()
    ours = (ROOT / "src/mlperf_wf/benchmarks" / "gpt3" / "container" / "Dockerfile").read_text()
    base = re.search(r"ARG FROM_IMAGE_NAME=(\S+)", theirs).group(1)
    assert f"ARG FROM_IMAGE_NAME={base}" in ours and base in (ROOT / "src/mlperf_wf/benchmarks" / "gpt3" / "container" / "Apptainer.def").read_text()
    assert "WORKDIR /workspace/llm" in ours and "pip install -r requirements.txt" in ours
    assert "aa344c7fb900e82ed19fb94aebfed50c63ab2204" in ours
    # the patch block itself: tests/workflow/test_containers.py


def test_the_round_patch_wraps_the_logger_the_reference_builds(reference):
    """The patch wraps ``megatron.mllogger`` (megatron/__init__.py), which training.py imports by name, and
    adds the keys the reference does not log."""
    init = (reference / "megatron" / "__init__.py").read_text()
    training = (reference / "megatron" / "training.py").read_text()
    assert re.search(r"^mllogger = MLLoggerWrapper\(", init, re.M) and "from megatron import mllogger" in training
    assert "EVAL_SAMPLES" in training and "'train_samples'" not in training and '"train_samples"' not in training
    assert "cache_clear" not in training.lower()
