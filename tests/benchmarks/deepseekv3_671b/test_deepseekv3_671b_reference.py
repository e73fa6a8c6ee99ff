"""deepseekv3_671b's full-scale definition and round patch against the reference itself (mlcommons/training aa344c7).

The reference cannot run on CPU here (Megatron-Bridge, Transformer Engine, 64 x 4 GB300), so: every path, script
and config file the full-scale command names is checked to exist in the reference tree, every value the plan
passes is compared with config_GB300_64x4x256xtp1pp4cp1.sh and run_deepseek_v3_671b.sh, every flag with the
parser of pretrain_deepseek_v3_671b.py; and the reference's unmodified ``pretrain_deepseek_v3_671b.py`` and
``callback.py`` are run with the plan's own command line, the round patch loaded by the hooks, and stand-ins of
the GPU-only packages they import (Megatron-Bridge's recipe/pretrain loop, megatron-core's parallel state,
mlperf-common's logger wrapper), so the log they write goes through the official 6.1.0 closed checker. The
stand-in recipe's AdamW betas, weight decay and clip (0.9/0.95, 0.1, 1.0) are the values the reference's fixture
logs report; its ``bf16_mixed`` precision is an assumption (no log carries a precision key); neither is read from
Megatron-Bridge's source (not in our copy).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mlperf_wf.config.registry import load_benchmark
from mlperf_wf.plan.launch import Launch, quality_target_text
from mlperf_wf.results import compliance
from tests.conftest import parser_options, reference_source, shell_values

ROOT = Path(__file__).resolve().parents[3]
CONTAINERS = ROOT / "containers"
HOOKS = CONTAINERS / "hooks"
PATCHES = ROOT / "src/mlperf_wf/benchmarks" / "deepseekv3_671b" / "container" / "patches"
BENCH = load_benchmark("deepseekv3_671b")
QUALITY_TARGET = quality_target_text(BENCH, Launch("pyxis"))
"""The command's ``{quality_target}``: the latest round's closed target, from mlperf-logging's rules."""
REFERENCE = reference_source(BENCH.reference.path)
CONFIG = "config_GB300_64x4x256xtp1pp4cp1.sh"
needs_reference = pytest.mark.skipif(REFERENCE is None, reason="shared reference source (mlcommons/training aa344c7) not present")


def command_value(option: str) -> str:
    command = BENCH.full.command
    return command[command.index(option) + 1]


@needs_reference
def test_every_file_and_option_the_full_command_names_exists_in_the_reference():
    command = BENCH.full.command
    assert command[:2] == ["python", "pretrain_deepseek_v3_671b.py"]  # run_deepseek.py:58-59,294-302, from the workdir
    assert BENCH.full.workdir == "/workspace/code" and "WORKDIR /workspace/code\nCOPY . ." in (REFERENCE / "Dockerfile").read_text()
    script = REFERENCE / Path(command[1]).name
    assert script.is_file() and (REFERENCE / "callback.py").is_file()
    assert (REFERENCE / BENCH.full.env["MLPERF_CONFIG_FILENAME"]).is_file()
    for name in (
        "run_deepseek_v3_671b.sh",
        "run_deepseek.py",
        "requirements.txt",
        "eval_batch_size.patch",
        "start_eval_at_iter.patch",
        "deepseek_mtp_module_conversion.patch",
    ):
        assert (REFERENCE / name).is_file(), name
    flags = [word for word in command[2:] if word.startswith("--")]
    assert set(flags) <= parser_options(script) and len(flags) == len(set(flags))
    # Every flag run_deepseek_v3_671b.sh passes (PRETRAIN_ARGS) is in the plan, none more.
    lines = re.findall(r'^\s*PRETRAIN_ARGS="([^"]*)"', (REFERENCE / "run_deepseek_v3_671b.sh").read_text(), re.M)
    passed = {flag for line in lines for flag in re.findall(r"--\w+", line)}
    assert set(flags) == passed - {"--virtual_pipeline_parallel_size"}  # only with VIRTUAL_PIPELINE_PARALLEL_SIZE set, empty by default


@needs_reference
def test_the_values_the_plan_passes_are_the_reference_configs():
    config = shell_values(REFERENCE / CONFIG)
    defaults = shell_values(REFERENCE / "run_deepseek_v3_671b.sh")
    assert BENCH.full.geometry.nodes == int(config["NNODES"]) == int(defaults["NNODES"]) == 64
    assert BENCH.full.geometry.gpus_per_node == int(config["GPUS_PER_NODE"]) == 4
    assert BENCH.full.geometry.walltime_minutes * 60 == sum(int(p) * s for p, s in zip(config["TIME"].split(":"), (3600, 60, 1), strict=True))
    for option, name in (
        ("--gbs", "GBS"),
        ("--mbs", "MBS"),
        ("--lr", "MAX_LR"),
        ("--min_lr", "MIN_LR"),
        ("--max_steps", "MAX_STEPS"),
        ("--lr_decay_steps", "LR_DECAY_STEPS"),
        ("--warmup_steps", "WARMUP_STEPS"),
        ("--eval_check_interval", "EVAL_CHECK_INTERVAL"),
        ("--eval_batches", "EVAL_BATCHES"),
        ("--eval_batch_size", "EVAL_BATCH_SIZE"),
        ("--tensor_parallel_size", "TENSOR_PARALLEL_SIZE"),
        ("--pipeline_parallel_size", "PIPELINE_PARALLEL_SIZE"),
        ("--context_parallel_size", "CONTEXT_PARALLEL_SIZE"),
        ("--expert_model_parallel_size", "EXPERT_PARALLEL_SIZE"),
        ("--expert_tensor_parallel_size", "EXPERT_TENSOR_PARALLEL_SIZE"),
        ("--recompute_modules", "RECOMPUTE_MODULES"),
    ):
        assert command_value(option) == config[name], option
    # the target is the rules' (mlperf-logging), the one source; the reference's run script agrees with it
    assert command_value("--target_log_ppl") == "{quality_target}" and float(QUALITY_TARGET) == float(defaults["TARGET"])
    for option, name in (
        ("--sequence_length", "SEQUENCE_LENGTH"),
        ("--moe_token_dispatcher_type", "MOE_TOKEN_DISPATCHER_TYPE"),
        ("--moe_grouped_gemm", "MOE_GROUPED_GEMM"),
        ("--moe_permute_fusion", "MOE_PERMUTE_FUSION"),
        ("--moe_router_fusion", "MOE_ROUTER_FUSION"),
    ):
        assert command_value(option) == defaults[name] and name not in re.findall(r"^export (\w+)", (REFERENCE / CONFIG).read_text(), re.M), option
    gbs = int(command_value("--gbs"))
    assert int(BENCH.full.env["START_EVAL_AT_ITER"]) == 42 + 24576 // gbs  # config: $(( 42 + 24576 / GBS ))
    assert "START_EVAL_AT_ITER=$(( 42 + 24576 / GBS ))" in (REFERENCE / CONFIG).read_text()
    assert abs(float(command_value("--lr")) - 2.4e-5 * math.sqrt(gbs / 16384)) < 1e-9  # the closed rule at the plan's GBS
    assert int(command_value("--lr_decay_steps")) == 12000 - int(command_value("--warmup_steps"))


@needs_reference
def test_mounts_and_environment_follow_the_run_script_and_the_launcher():
    script = (REFERENCE / "run_deepseek_v3_671b.sh").read_text()
    mounts = re.search(r'^MOUNTS="([^"]+)"', script, re.M).group(1)
    for role in ("prepared", "tokenizer", "checkpoint", "results"):
        assert f":{BENCH.full.mounts[role]}" in mounts, role
    assert ":/mlperf-outputs" in mounts and BENCH.full.scratch["mlperf_outputs"].mount == "/mlperf-outputs"
    assert ':/npy_index"' in script and BENCH.full.scratch["npy_index"].mount == "/npy_index"
    launcher = (REFERENCE / "run_deepseek.py").read_text()
    block = launcher[launcher.index("PERF_ENV_VARS = {") : launcher.index("}", launcher.index("PERF_ENV_VARS = {"))]
    perf_env = dict(re.findall(r'"(\w+)": "([^"]*)"', block))
    assert perf_env and all(BENCH.full.env[name] == value for name, value in perf_env.items())
    assert 'env_vars["NCCL_NET_GDR_LEVEL"] = "PHB"' in launcher and BENCH.full.env["NCCL_NET_GDR_LEVEL"] == "PHB"
    assert 'env_vars["NCCL_NET_GDR_C2C"] = "1"' in launcher and BENCH.full.env["NCCL_NET_GDR_C2C"] == "1"
    assert '"--mpi=pmix"' in launcher and BENCH.full.process_model == "per_gpu" and "ntasks_per_node=num_gpus_per_node" in launcher
    assert 'os.getenv("PREPROCESSED_PATH", "/preproc_data")' in (REFERENCE / "pretrain_deepseek_v3_671b.py").read_text()


@needs_reference
def test_the_dockerfile_builds_the_references_own_at_the_pinned_commit_plus_the_patch_block():
    ours = (ROOT / "src/mlperf_wf/benchmarks" / "deepseekv3_671b" / "container" / "Dockerfile").read_text()
    assert BENCH.reference.commit in ours and "-f training/llm_moe_pretraining/nemo/Dockerfile" in ours
    assert "nvcr.io/nvidia/pytorch:25.12-py3" in ours and "ARG FROM_IMAGE_NAME=nvcr.io/nvidia/pytorch:25.12-py3" in (REFERENCE / "Dockerfile").read_text()
    apptainer = (ROOT / "src/mlperf_wf/benchmarks" / "deepseekv3_671b" / "container" / "Apptainer.def").read_text()
    assert "From: mlperf-workflow/deepseekv3_671b-reference:aa344c7" in apptainer and "MLPERF_WF_HOOKS=mlperf_wf_deepseekv3_671b" in apptainer


# ---- the reference's own scripts with the round patch, on stand-ins of the GPU-only packages ----

STUBS = {
    "megatron/__init__.py": "",
    "megatron/core/__init__.py": "",
    "megatron/core/parallel_state.py": (
        "def is_pipeline_last_stage(ignore_virtual=True):\n    return True\n"
        "def get_data_parallel_rank():\n    return 0\n"
        "get_tensor_model_parallel_rank = get_context_parallel_rank = get_data_parallel_rank\n"
    ),
    "megatron/core/full_cuda_graph.py": "class FullCudaGraphWrapper:\n    cuda_graph = None\n",
    "megatron/core/inference/__init__.py": "",
    "megatron/core/inference/communication_utils.py": "def broadcast_from_last_pipeline_stage(size, dtype, tensor):\n    return tensor\n",
    "megatron/bridge/__init__.py": "",
    "megatron/bridge/recipes/__init__.py": "",
    "megatron/bridge/recipes/deepseek/__init__.py": "",
    # The recipe's shape as the reference uses it: a config container with model/train/optimizer/scheduler/... parts.
    "megatron/bridge/recipes/deepseek/deepseek_v3.py": (
        "from types import SimpleNamespace as N\n"
        "def deepseek_v3_pretrain_config():\n"
        "    return N(model=N(tensor_model_parallel_size=2, pipeline_model_parallel_size=16, context_parallel_size=1,\n"
        "                     expert_model_parallel_size=64, moe_aux_loss_coeff=1e-4),\n"
        "             train=N(micro_batch_size=1, global_batch_size=4096, train_iters=500000, eval_interval=2000, eval_iters=32),\n"
        "             optimizer=N(lr=3e-4, min_lr=3e-5, adam_eps=1e-5, adam_beta1=0.9, adam_beta2=0.95, weight_decay=0.1, clip_grad=1.0),\n"
        "             scheduler=N(lr_warmup_iters=2000, lr_decay_iters=None), rng=N(seed=1234), dataset=None, tokenizer=None,\n"
        "             checkpoint=N(), logger=N(), mixed_precision='bf16_mixed')\n"
        "def set_deepseek_v3_pipeline_model_parallel_layout(model_cfg):\n    model_cfg.layout = 'set'\n"
    ),
    "megatron/bridge/training/__init__.py": "",
    "megatron/bridge/training/config.py": "class GPTDatasetConfig:\n    def __init__(self, **k):\n        self.__dict__.update(k)\nConfigContainer = object\n",
    "megatron/bridge/training/gpt_step.py": "def forward_step(*a, **k):\n    pass\n",
    "megatron/bridge/training/tokenizers/__init__.py": "",
    "megatron/bridge/training/tokenizers/config.py": "class TokenizerConfig:\n    def __init__(self, **k):\n        self.__dict__.update(k)\n",
    "megatron/bridge/training/callbacks.py": "class Callback:\n    pass\nclass CallbackContext:\n    pass\n",
    # The training loop's calls into the callbacks: a loss that falls 0.03 a step from 5.0, evaluated every
    # eval_interval steps from start_eval_at_iter, until a callback stops the run.
    "megatron/bridge/training/pretrain.py": (
        "from types import SimpleNamespace as N\n"
        "import torch\n"
        "def Loss(value):\n    return torch.tensor(value, dtype=torch.float32)\n"
        "def pretrain(config, forward_step_func, callbacks):\n"
        "    state = N(cfg=config, train_state=N(step=0, do_valid=True, do_test=True), should_stop=False)\n"
        "    context = N(state=state, loss_dict={'lm loss': Loss(5.0)}, total_loss_dict={})\n"
        "    for cb in callbacks:\n        getattr(cb, 'on_train_start', lambda c: None)(context)\n"
        "    while not state.should_stop and state.train_state.step < config.train.train_iters:\n"
        "        for cb in callbacks:\n            getattr(cb, 'on_train_step_end', lambda c: None)(context)\n"
        "        state.train_state.step += 1\n"
        "        step = state.train_state.step\n"
        "        if not state.should_stop and step >= getattr(config.train, 'start_eval_at_iter', 0) and step % config.train.eval_interval == 0:\n"
        "            context.total_loss_dict = {'lm loss': Loss(5.0 - 0.03 * step)}\n"
        "            for cb in callbacks:\n                getattr(cb, 'on_eval_start', lambda c: None)(context)\n"
        "            for cb in callbacks:\n                getattr(cb, 'on_eval_end', lambda c: None)(context)\n"
    ),
    # mlperf-common's interface as callback.py and the script use it (rank-0-only logging, the submission helper).
    "mlperf_common/__init__.py": "",
    "mlperf_common/frameworks/__init__.py": "",
    "mlperf_common/frameworks/pyt.py": (
        "class PyTCommunicationHandler:\n    def global_rank(self):\n        return 0\n    def barrier(self, group=None):\n        pass\n"
    ),
    "mlperf_common/logging.py": (
        "from mlperf_logging import mllog\nfrom mlperf_logging.mllog import constants\n"
        "class MLLoggerWrapper:\n"
        "    def __init__(self, comm_handler, mllogger=None, default_stack_offset=3):\n"
        "        self.comm_handler, self.mllogger, self.constants = comm_handler, mllogger or mllog.get_mllogger(), constants\n"
        "        self.mllogger.default_stack_offset = self.default_stack_offset = default_stack_offset\n"
        "    def start(self, *a, **k):\n        self._log(self.mllogger.start, *a, **k)\n"
        "    def end(self, *a, **k):\n        self._log(self.mllogger.end, *a, **k)\n"
        "    def event(self, *a, **k):\n        self._log(self.mllogger.event, *a, **k)\n"
        "    def _log(self, log_fn, *a, unique=True, unique_log_rank=0, sync=False, sync_group=None, internal_call=False, **k):\n"
        "        if k.get('stack_offset') is None and internal_call:\n            k['stack_offset'] = self.default_stack_offset + 1\n"
        "        if not unique or self.comm_handler.global_rank() == unique_log_rank:\n            log_fn(*a, **k)\n"
        "    def log_init_stop_run_start(self):\n"
        "        self.end(key=constants.INIT_STOP, internal_call=True)\n        self.start(key=constants.RUN_START, internal_call=True)\n"
        "    def mlperf_submission_log(self, benchmark):\n"
        "        for key, value in ((constants.SUBMISSION_BENCHMARK, benchmark), (constants.SUBMISSION_ORG, 'ORG'),\n"
        "                           (constants.SUBMISSION_DIVISION, constants.CLOSED), (constants.SUBMISSION_STATUS, constants.ONPREM),\n"
        "                           (constants.SUBMISSION_PLATFORM, '1xPLATFORM')):\n"
        "            self.event(key=key, value=value, internal_call=True)\n"
    ),
}

SCRIPT = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_reference(tmp_path: Path, hooked: bool) -> tuple[subprocess.CompletedProcess, Path]:
    stubs = tmp_path / "stubs"
    for name, text in STUBS.items():
        (stubs / name).parent.mkdir(parents=True, exist_ok=True)
        (stubs / name).write_text(text)
    result = tmp_path / "results" / "result.txt"
    drop = {"PYTHONPATH", "MLPERF_WF_HOOKS", "COMPLIANCE_FILE", "RANK", "SLURM_PROCID"}
    env = {name: value for name, value in os.environ.items() if name not in drop and not name.startswith("MLPERF_")}
    env.update({name: value for name, value in BENCH.full.env.items() if name != "PYTHONPATH"})
    env.update({"PREPROCESSED_PATH": "/preproc_data/dataset", "COMPLIANCE_FILE": str(result)})
    env.update({"MLPERF_SUBMISSION_ORG": "test-org", "MLPERF_SUBMISSION_PLATFORM": "64xGB300", "MLPERF_SUBMISSION_DIVISION": "closed"})
    env.update({"MLPERF_SUBMISSION_STATUS": "onprem", "MLPERF_SUBMISSION_BENCHMARK": "deepseekv3_671b"})
    env["PYTHONPATH"] = os.pathsep.join([str(stubs), *([str(HOOKS), str(PATCHES)] if hooked else [])])
    if hooked:
        env["MLPERF_WF_HOOKS"] = "mlperf_wf_deepseekv3_671b"
    words = [word.format(nodes=64, gpus_per_node=4, seed=4321, quality_target=QUALITY_TARGET) for word in BENCH.full.command[2:]]
    argv = [str(REFERENCE), str(REFERENCE / "pretrain_deepseek_v3_671b.py"), *words]
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *argv], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    return proc, result


@needs_reference
def test_the_reference_with_the_patch_writes_a_log_the_closed_checker_passes(tmp_path):
    proc, result = run_reference(tmp_path, hooked=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = result.read_text()
    for expected in (
        '"key": "tensor_parallelism", "value": 1,',
        '"key": "pipeline_parallelism", "value": 4,',
        '"key": "expert_parallelism", "value": 64,',
        '"key": "micro_batch_size", "value": 1,',
        '"key": "config_filename", "value": "config_GB300_64x4x256xtp1pp4cp1.sh"',
        '"key": "lowest_numerical_precision_in_linear", "value": "bfloat16"',
        '"key": "submission_org", "value": "test-org"',
        '"key": "seed", "value": 4321',
        '"key": "global_batch_size", "value": 16384',
    ):
        assert expected in log, expected
    assert log.count('"key": "moe_aux_loss_coeff"') == 1 and '"key": "moe_aux_loss_coeff", "value": 0.01' in log  # logged once, by the reference
    assert '"file": "' + str(REFERENCE / "pretrain_deepseek_v3_671b.py") in log  # the caller's file:line is kept
    events = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in log.splitlines() if ":::MLLOG " in line]
    evaluations = [event for event in events if event["key"] == "eval_accuracy"]
    assert evaluations[0]["metadata"]["samples_count"] == 43 * 16384  # 6.1.0's FIRST_CHECK
    assert all("time_ms" in event for event in events)
    checked = compliance.check(result, "6.1.0")
    assert checked.verdict == "passed", checked.output


@needs_reference
def test_without_the_patch_the_reference_writes_no_result_file_and_lacks_the_61_keys(tmp_path):
    proc, result = run_reference(tmp_path, hooked=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not result.exists() and '"key": "eval_accuracy"' in proc.stderr + proc.stdout
    assert "expert_parallelism" not in proc.stderr + proc.stdout


def test_a_learning_rate_off_the_closed_rule_stops_a_closed_run(monkeypatch, capsys):
    from types import SimpleNamespace

    monkeypatch.syspath_prepend(str(HOOKS))
    monkeypatch.syspath_prepend(str(PATCHES))
    import mlperf_wf_deepseekv3_671b as patch

    config = SimpleNamespace(train=SimpleNamespace(global_batch_size=15360), optimizer=SimpleNamespace(lr=0.000024))
    monkeypatch.setenv("MLPERF_SUBMISSION_DIVISION", "open")
    patch.check_learning_rate(config)
    assert "2.4e-5 x sqrt(15360/16384) = 2.3237900" in capsys.readouterr().err
    monkeypatch.setenv("MLPERF_SUBMISSION_DIVISION", "closed")
    with pytest.raises(SystemExit, match="closed rule"):
        patch.check_learning_rate(config)
    patch.check_learning_rate(SimpleNamespace(train=SimpleNamespace(global_batch_size=15360), optimizer=SimpleNamespace(lr=0.000023238)))


def test_a_first_evaluation_off_the_closed_rule_stops_a_closed_run(monkeypatch, capsys):
    """START_EVAL_AT_ITER is the config's $((42 + 24576 / GBS)); a site that changes --gbs alone would fail FIRST_CHECK."""
    from types import SimpleNamespace

    monkeypatch.syspath_prepend(str(HOOKS))
    monkeypatch.syspath_prepend(str(PATCHES))
    import mlperf_wf_deepseekv3_671b as patch

    at_18432 = SimpleNamespace(train=SimpleNamespace(global_batch_size=18432), optimizer=SimpleNamespace(lr=patch.closed_learning_rate(18432)))
    assert [patch.closed_first_evaluation(gbs) for gbs in (15360, 16384, 18432)] == [43, 43, 43]
    monkeypatch.setenv("MLPERF_SUBMISSION_DIVISION", "closed")
    monkeypatch.setenv("START_EVAL_AT_ITER", "43")
    patch.check_learning_rate(at_18432)
    monkeypatch.setenv("START_EVAL_AT_ITER", "44")
    with pytest.raises(SystemExit, match=r"START_EVAL_AT_ITER 44 at global batch 18432; .* = 43"):
        patch.check_learning_rate(at_18432)
    monkeypatch.setenv("START_EVAL_AT_ITER", "42")
    at_4096 = SimpleNamespace(train=SimpleNamespace(global_batch_size=4096), optimizer=SimpleNamespace(lr=patch.closed_learning_rate(4096)))
    with pytest.raises(SystemExit, match=r"= 48"):
        patch.check_learning_rate(at_4096)
    assert "START_EVAL_AT_ITER" in capsys.readouterr().err


def test_a_hugging_face_checkpoint_at_the_load_folder_is_refused_and_the_conversion_is_loaded_as_it_is(monkeypatch, tmp_path):
    from types import SimpleNamespace

    monkeypatch.syspath_prepend(str(HOOKS))
    monkeypatch.syspath_prepend(str(PATCHES))
    import mlperf_wf_deepseekv3_671b as patch

    hf = tmp_path / "checkpoint"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    (hf / "model-00001-of-00163.safetensors").write_bytes(b"")
    with pytest.raises(SystemExit, match=r"deepseekv3_checkpoint_bf16_megatron_bridge"):
        patch.refuse_hugging_face_checkpoint(SimpleNamespace(checkpoint=SimpleNamespace(load=str(hf))))
    converted = tmp_path / "converted"
    (converted / "iter_0000000").mkdir(parents=True)
    (converted / "latest_checkpointed_iteration.txt").write_text("0\n")
    config = SimpleNamespace(checkpoint=SimpleNamespace(load=str(converted)))
    patch.refuse_hugging_face_checkpoint(config)  # R2's conversion: left alone
    assert config.checkpoint.load == str(converted)
