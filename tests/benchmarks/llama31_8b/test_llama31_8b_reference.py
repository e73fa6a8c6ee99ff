"""The llama31_8b image's patches against the reference's own MLPerf logging (mlcommons/training aa344c7).

The reference trains with NeMo 2 (GPU only), but all it logs comes from one module,
``small_llm_pretraining/nemo/callbacks.py``: its ``MLLogger`` (configured at import with a hard-coded
``/mlperf-outputs`` file), ``MLPerfCallback`` and ``MetricsLogger``. That module is loaded here unmodified,
in the reference venv (with real Lightning), and driven through the hooks Lightning calls in a run that
evaluates every 12,288 samples and meets the target at its third evaluation, with a trainer that carries
the reference's own settings (pretrain_llama31.py:148-174: TP=PP=CP=1, fp8 "hybrid" with fp8 parameters,
bf16 attention, no fp32 gradient reduction) and the ``configs`` dict pretrain_llama31.py:402-423 builds for
the H200 config. NeMo is not installable here: ``nemo.utils.logging`` (a plain logger in callbacks.py) is a
named stand-in. With the hooks, the log lands in ``COMPLIANCE_FILE`` and passes the official checker of
every round the benchmark is in; the same log without the lines the patch adds fails on exactly those keys,
and without the hooks the module cannot even be imported where ``/mlperf-outputs`` does not exist.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mlperf_wf.results import compliance
from tests.conftest import reference_source

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = reference_source("small_llm_pretraining/nemo")
REFERENCE_PYTHON = ROOT / ".venv-reference" / "bin" / "python"
HOOKS = ROOT / "containers" / "hooks"
PATCHES = ROOT / "src/mlperf_wf/benchmarks" / "llama31_8b" / "container" / "patches"
SUBMISSION = {
    "MLPERF_SUBMISSION_BENCHMARK": "llama31_8b",
    "MLPERF_SUBMISSION_ORG": "Example Org",
    "MLPERF_SUBMISSION_PLATFORM": "example-8xH200",
    "MLPERF_SUBMISSION_DIVISION": "closed",
    "MLPERF_SUBMISSION_STATUS": "onprem",
}
ADDED_KEYS = [
    "max_steps",
    "lowest_numerical_precision_in_linear",
    "lowest_numerical_precision_in_attn",
    "lowest_numerical_precision_in_comm",
    "tensor_parallelism",
    "pipeline_parallelism",
    "context_parallelism",
    "expert_parallelism",
    "micro_batch_size",
    "config_filename",
]

# A stand-in for the one NeMo name callbacks.py imports (nemo.utils.logging, a logger).
NEMO_STAND_IN = "import logging as _logging\n\nlogging = _logging.getLogger('nemo-stand-in')\n"

# How Lightning drives the callbacks in a run of the reference (GBS 32, MBS 2, eval every 384 steps):
# the values are the reference's (pretrain_llama31.py:148-174, 402-423; config_H200_1x8x1_8b.sh).
DRIVER = """
import sys
from types import SimpleNamespace

import callbacks
from mlperf_logging.mllog import constants

GBS, MBS, EVAL_EVERY, MAX_STEPS, WARMUP = 32, 2, 384, 1_200_000, 512
configs = {
    constants.GLOBAL_BATCH_SIZE: GBS, constants.GRADIENT_ACCUMULATION_STEPS: 2, constants.MAX_SEQUENCE_LENGTH: 8192,
    constants.EVAL_SAMPLES: 1024, constants.OPT_NAME: "adamw", constants.OPT_BASE_LR: 1e-4,
    constants.OPT_ADAMW_BETA_1: 0.9, constants.OPT_ADAMW_BETA_2: 0.95, constants.OPT_ADAMW_EPSILON: 1e-5,
    constants.OPT_ADAMW_WEIGHT_DECAY: 0.1, constants.OPT_GRADIENT_CLIP_NORM: 1.0, constants.OPT_END_LR: 1e-5,
    constants.OPT_LR_WARMUP_STEPS: WARMUP, constants.OPT_LR_DECAY_STEPS: MAX_STEPS - WARMUP,
    constants.OPT_LR_DECAY_SCHEDULE: "cosine with linear warmup", constants.SEED: 1234, constants.INIT_CHECKPOINT_STEP: 0,
}
precision = SimpleNamespace(dtype_config=SimpleNamespace(
    bf16=True, fp16=False, fp8="hybrid", fp8_dot_product_attention=False, fp8_param_gather=True, grad_reduce_in_fp32=False))
strategy = SimpleNamespace(tensor_model_parallel_size=1, pipeline_model_parallel_size=1, context_parallel_size=1,
                           expert_model_parallel_size=1, precision_plugin=precision)
metrics = callbacks.MetricsLogger(init_global_step=0, global_batch_size=GBS, seq_length=8192, target_log_ppl=3.3)
callback = callbacks.MLPerfCallback(global_batch_size=GBS, micro_batch_size=MBS, sequence_length=8192,
                                    init_global_step=0, eval_every=EVAL_EVERY, configs=configs)
trainer = SimpleNamespace(global_step=0, max_steps=MAX_STEPS, strategy=strategy, loggers=[metrics], should_stop=False)
callback.on_train_start(trainer, None)
callback.on_train_epoch_start(trainer, None)
for loss in (3.9, 3.45, 3.28):
    trainer.global_step += EVAL_EVERY
    callback.on_validation_start(trainer, None)
    metrics.log_metrics({"val_loss": loss}, trainer.global_step)
    callback.on_validation_end(trainer, None)
    if trainer.should_stop:
        break
callback.on_train_end(trainer, None)
"""


def _require() -> None:
    if REFERENCE is None:
        pytest.skip("shared reference source (mlcommons/training aa344c7) not present")
    ready = (
        REFERENCE_PYTHON.exists() and subprocess.run([str(REFERENCE_PYTHON), "-c", "import lightning.pytorch, pytorch_lightning"], check=False).returncode == 0
    )
    if not ready:
        message = f"Lightning is not in the reference venv {REFERENCE_PYTHON.parent.parent}: make .venv-reference/bin/activate"
        if os.environ.get("MLPERF_WF_REQUIRE_REFERENCE"):
            pytest.fail(message)
        pytest.skip(message)


def drive(tmp_path: Path, hooked: bool) -> tuple[subprocess.CompletedProcess, Path]:
    """Run the driver against the reference's callbacks.py; returns the process and COMPLIANCE_FILE."""
    stand_in = tmp_path / "stand_in"
    (stand_in / "nemo" / "utils").mkdir(parents=True)
    (stand_in / "nemo" / "__init__.py").write_text("")
    (stand_in / "nemo" / "utils" / "__init__.py").write_text(NEMO_STAND_IN)
    (tmp_path / "driver.py").write_text(DRIVER)
    result = tmp_path / "results" / "result.txt"
    path = [str(REFERENCE), str(stand_in)]
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MLPERF_", "PYTHONPATH", "COMPLIANCE_FILE"))}
    env["COMPLIANCE_FILE"] = str(result)
    if hooked:
        path = [str(HOOKS), str(PATCHES), *path]
        env.update(SUBMISSION, MLPERF_WF_HOOKS="mlperf_wf_llama31_8b", MLPERF_CONFIG_FILENAME="config_H200_1x8x1_8b.sh")
    env["PYTHONPATH"] = os.pathsep.join(path)
    proc = subprocess.run([str(REFERENCE_PYTHON), str(tmp_path / "driver.py")], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    return proc, result


def logged(path: Path) -> list[dict]:
    return [record for line in path.read_text().splitlines() if (record := compliance.mllog_record(line)) is not None]


@pytest.fixture(scope="module")
def hooked_log(tmp_path_factory) -> Path:
    _require()
    proc, result = drive(tmp_path_factory.mktemp("hooked"), hooked=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return result


@pytest.mark.parametrize("ruleset", ["5.1.0", "6.0.0", "6.1.0"])
def test_the_hooked_reference_log_passes_every_round_of_the_benchmark(hooked_log, ruleset):
    verdict = compliance.check(hooked_log, ruleset)
    assert verdict.verdict == "passed", verdict.problems or verdict.messages


def test_the_added_keys_carry_the_run_values_and_precede_init_stop(hooked_log):
    records = logged(hooked_log)
    keys = [record["key"] for record in records]
    values = {record["key"]: record["value"] for record in records}
    assert all(keys.index(key) < keys.index("init_stop") for key in ADDED_KEYS)
    assert {key: values[key] for key in ADDED_KEYS} == {
        "max_steps": 1_200_000,
        "lowest_numerical_precision_in_linear": "fp8",
        "lowest_numerical_precision_in_attn": "bfloat16",
        "lowest_numerical_precision_in_comm": "fp8",
        "tensor_parallelism": 1,
        "pipeline_parallelism": 1,
        "context_parallelism": 1,
        "expert_parallelism": 1,
        "micro_batch_size": 2,
        "config_filename": "config_H200_1x8x1_8b.sh",
    }
    assert values["submission_org"] == "Example Org" and values["submission_platform"] == "example-8xH200"
    assert [r["metadata"]["status"] for r in records if r["key"] == "run_stop"] == ["success"]
    # the reference's own events keep their file and line (the wrappers add a frame)
    run_start = next(r for r in records if r["key"] == "run_start")
    assert Path(run_start["metadata"]["file"]).name == "callbacks.py"


def test_the_log_without_the_added_keys_fails_on_exactly_those(hooked_log, tmp_path):
    stripped = tmp_path / "result.txt"
    kept = [line for line in hooked_log.read_text().splitlines(keepends=True) if (compliance.mllog_record(line) or {}).get("key") not in ADDED_KEYS]
    stripped.write_text("".join(kept))
    assert compliance.check(stripped, "5.1.0").problems == ["missing: max_steps"]
    [problem] = compliance.check(stripped, "6.1.0").problems
    assert problem.startswith("missing: ") and set(problem.removeprefix("missing: ").split(", ")) == set(ADDED_KEYS)


def test_without_the_hooks_the_reference_writes_to_its_own_path_and_misses_the_keys(tmp_path):
    _require()
    proc, result = drive(tmp_path, hooked=False)
    assert not result.exists()
    own = Path("/mlperf-outputs/mlperf_llama31_8b.log")
    if not own.parent.is_dir():  # the import itself fails without that folder (so would a read-only image)
        assert proc.returncode != 0 and str(own) in proc.stderr
        return
    verdict = compliance.check(own, "6.1.0")
    assert verdict.verdict == "failed"
    assert any("max_steps" in problem for problem in verdict.problems)
