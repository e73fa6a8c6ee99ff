"""gpt_oss_20b's full-scale path against the reference itself (mlcommons/training aa344c7,
small_llm_moe_pretraining/primus).

Primus and Megatron-LM need GPUs, so the reference's training cannot run here. Instead:

1. Every path, script and config the full-scale command and environment name exists in the reference tree, and
   the container's build-time fix (``patches/fix_reference_dockerfile.py``) turns the reference's own
   Dockerfile.nvidia into one that installs the wheel that is really there and checks Primus out at a commit.
2. The reference's own MLPerf logger -- the pure-Python ``primus_mllog`` 0.1.20 wheel that ships in the
   reference folder, unzipped unmodified -- is driven through a run: its ``MLPerfMegatronPretrainTrainer`` (init,
   run, train, train_step and its wrapped evaluation) on named stand-ins of the Primus/Megatron names it imports
   (``MegatronPretrainTrainer`` as a loop that evaluates every ``eval_interval`` iterations, ``get_args``,
   ``evaluate``), with Megatron arguments resolved from the reference's own ``conf/gpt_oss_20B-pretrain-nvidia.yaml``
   under the environment benchmark.yaml gives the run. With the image's hooks and patch the log lands in
   ``COMPLIANCE_FILE`` and passes the official 6.1.0 (and 6.0.0) closed checker; without them it fails on exactly
   what the patch fixes. ``SYNTH_WARMUP_STEPS=0`` skips primus_mllog's synthetic warm-up (Transformer Engine and a
   real model); it runs before ``run_start`` and logs nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from mlperf_wf.config import registry
from mlperf_wf.plan.launch import Launch, definition_env
from mlperf_wf.results import compliance
from tests.conftest import reference_source

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = reference_source("small_llm_moe_pretraining/primus")
BENCH = registry.load_benchmark("gpt_oss_20b")
ENV = definition_env(BENCH, Launch("pyxis"))
"""The run's environment from the definition, its ``{quality_target}`` the rules' target (mlperf-logging)."""
CONTAINER = ROOT / "src/mlperf_wf/benchmarks" / "gpt_oss_20b" / "container"
HOOKS = ROOT / "containers" / "hooks"
PATCHES = CONTAINER / "patches"
PRIMUS_COMMIT = "a99a28f9a72dbae6310d3303a997b4eb8db663f9"
SUBMISSION = {
    "MLPERF_SUBMISSION_BENCHMARK": "gpt_oss_20b",
    "MLPERF_SUBMISSION_ORG": "Example Org",
    "MLPERF_SUBMISSION_PLATFORM": "example-8xB200",
    "MLPERF_SUBMISSION_DIVISION": "closed",
    "MLPERF_SUBMISSION_STATUS": "onprem",
}
PRECISION_KEYS = [f"lowest_numerical_precision_in_{part}" for part in ("linear", "attn", "comm")]

pytestmark = pytest.mark.skipif(REFERENCE is None, reason="shared reference source (mlcommons/training aa344c7) not present")


def in_image(path: str) -> Path:
    """Where a path of the image's /workspace/code (the reference folder, COPY . . at Dockerfile.nvidia:33) is in the tree."""
    assert path.startswith(BENCH.full.workdir + "/"), path
    return REFERENCE / path.removeprefix(BENCH.full.workdir + "/")


def test_every_file_the_full_command_and_environment_name_is_in_the_reference_tree():
    command = BENCH.full.command
    # the node's GPUs and the expert parallelism follow the run's geometry (README: the rehearsal's fix)
    assert command == ["env", "GPUS_PER_NODE={gpus_per_node}", "PRIMUS_EP={gpus_per_node}", "./run_and_time.sh"] and BENCH.full.workdir == "/workspace/code"
    script = REFERENCE / "run_and_time.sh"
    assert script.is_file() and os.access(script, os.X_OK)  # run.sub:52 runs it as ./run_and_time.sh
    env = ENV
    assert BENCH.full.env["MLLOG_TARGET_EVAL_LOSS"] == "{quality_target}"  # one source: the rules; the config agrees below
    assert in_image(env["EXP"]).is_file()
    assert (REFERENCE / "src" / "train.py").is_file()  # run_and_time.sh runs src/train.py from /workspace/code
    run_and_time = script.read_text()
    assert "src/train.py" in run_and_time and "${GPUS_PER_NODE}" in run_and_time and "${NNODES}" in run_and_time
    # Every variable of the environment is the value config_B200_1x8x1.sh exports, sourced by bash as
    # run_with_docker.sh:62 does (its arithmetic included), and it leaves out only PYTHONPATH and HF_TOKEN.
    sourced = subprocess.run(
        ["env", "-i", "bash", "-c", f". {REFERENCE / 'config_B200_1x8x1.sh'} && env -0"], capture_output=True, text=True, check=True
    ).stdout
    exported = dict(item.split("=", 1) for item in sourced.split("\0") if "=" in item)
    ours = {key: value for key, value in env.items() if not key.startswith("MLPERF_WF_")}
    assert {key: exported.get(key) for key in ours} == ours
    assert set(exported) - set(ours) - {"PWD", "SHLVL", "_"} == {"PYTHONPATH", "HF_TOKEN"}
    # The data files the yaml reads are the catalog's, at the mount the patch relocates.
    conf = (REFERENCE / "conf" / "gpt_oss_20B-pretrain-nvidia.yaml").read_text()
    for name in ("c4-train.en_6_text_document", "c4-validation-91205-samples.en_text_document"):
        assert f"/data/{name}" in conf
        assert {f"{name}.bin", f"{name}.idx"} <= {item.path for item in registry.load_dataset("c4_llama31_8b_preprocessed").files}
    # Mounts as run.sub:28.
    run_sub = (REFERENCE / "run.sub").read_text()
    assert '_cont_mounts="${DATADIR}:/data,${LOGDIR}:/results,${MODELDIR}:/model"' in run_sub
    assert (BENCH.full.mounts["prepared"], BENCH.full.mounts["results"], BENCH.full.mounts["tokenizer"]) == ("/data", "/results", "/model")
    for patch in ("primus_evaluator.patch", "megatron_validation_consumed_samples.patch"):
        assert (REFERENCE / "patches" / patch).is_file()


def test_the_build_fix_installs_the_shipped_wheel_and_pins_primus(tmp_path):
    sys.path.insert(0, str(PATCHES))
    try:
        import fix_reference_dockerfile as fix
    finally:
        sys.path.remove(str(PATCHES))
    original = (REFERENCE / "Dockerfile.nvidia").read_text()
    assert "primus_mllog-0.1.0-py3-none-any.whl" in original and not (REFERENCE / "primus_mllog-0.1.0-py3-none-any.whl").exists()
    fixed = fix.fixed_dockerfile(original, REFERENCE, PRIMUS_COMMIT)
    assert "RUN pip install primus_mllog-0.1.20-py3-none-any.whl" in fixed and (REFERENCE / "primus_mllog-0.1.20-py3-none-any.whl").is_file()
    assert f"git checkout {PRIMUS_COMMIT} && \\" in fixed and "checkout main" not in fixed
    changed = [(a, b) for a, b in zip(original.splitlines(), fixed.splitlines(), strict=True) if a != b]
    assert len(changed) == 2
    # The reference's ROCm Dockerfile (the image variant mi355) has the same two lines, fixed the same way.
    rocm = (REFERENCE / "Dockerfile").read_text()
    rocm_fixed = fix.fixed_dockerfile(rocm, REFERENCE, PRIMUS_COMMIT)
    assert "RUN pip install primus_mllog-0.1.20-py3-none-any.whl" in rocm_fixed and f"git checkout {PRIMUS_COMMIT} && \\" in rocm_fixed
    assert len([(a, b) for a, b in zip(rocm.splitlines(), rocm_fixed.splitlines(), strict=True) if a != b]) == 2
    # The Dockerfile of this folder names the same commit, and refuses another.
    assert f"ARG PRIMUS_COMMIT={PRIMUS_COMMIT}" in (CONTAINER / "Dockerfile").read_text()
    assert PRIMUS_COMMIT in (CONTAINER / "Apptainer.def").read_text()
    with pytest.raises(fix.FixError, match="40-hex"):
        fix.fixed_dockerfile(original, REFERENCE, "main")
    with pytest.raises(fix.FixError, match="exactly once"):
        fix.fixed_dockerfile(fixed, REFERENCE, PRIMUS_COMMIT)
    # The command line: edits in place, keeps the original, says what is wrong in one line.
    copy = tmp_path / "Dockerfile.nvidia"
    copy.write_text(original)
    for wheel in REFERENCE.glob("primus_mllog-*.whl"):
        (tmp_path / wheel.name).write_bytes(wheel.read_bytes())
    script = str(PATCHES / "fix_reference_dockerfile.py")
    assert subprocess.run([sys.executable, script, "--primus-commit", PRIMUS_COMMIT, str(copy)], check=False).returncode == 0
    assert copy.read_text() == fixed and (tmp_path / "Dockerfile.nvidia.orig").read_text() == original
    refused = subprocess.run([sys.executable, script, "--primus-commit", "abc", str(copy)], capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "40-hex" in refused.stderr


# ---- the reference's own logger ---------------------------------------------------------------------------

STAND_INS = {
    # primus/modules/trainer/megatron/pre_trainer.py: the base class primus_mllog's trainer extends; its train()
    # is Megatron's loop: a train_step per iteration, evaluate_and_print_results every eval_interval, until
    # train_iters (which the MLPerf trainer lowers to stop at the target).
    "primus/__init__.py": "",
    "primus/modules/__init__.py": "",
    "primus/modules/trainer/__init__.py": "",
    "primus/modules/trainer/megatron/__init__.py": "",
    "primus/modules/trainer/megatron/trainer.py": (
        "from megatron.training import get_args, training\n\ndef evaluate_and_print_results(*args, **kwargs):\n    return training.evaluate(*args, **kwargs)\n"
    ),
    "primus/modules/trainer/megatron/pre_trainer.py": (
        "from megatron.training import get_args\n"
        "from primus.modules.trainer.megatron import trainer as trainer_module\n\n"
        "class _Optimizer:\n    param_groups = [{'lr': 4e-4}]\n\n"
        "class MegatronPretrainTrainer:\n"
        "    def __init__(self, *args, **kwargs):\n        self.optimizer = _Optimizer()\n"
        "    def init(self):\n        return None\n"
        "    def run(self, *args, **kwargs):\n"
        "        return self.train(None, None, self.optimizer, None, None, None, None, None, None, None)\n"
        "    def train(self, *args):\n"
        "        args_ = get_args()\n"
        "        while args_.iteration < args_.train_iters:\n"
        "            self.train_step(None, None, None, None, None, None)\n"
        "            args_.iteration += 1\n"
        "            args_.consumed_train_samples += args_.global_batch_size\n"
        "            if args_.iteration % args_.eval_interval == 0:\n"
        "                trainer_module.evaluate_and_print_results('iteration', None, None, None, args_.iteration)\n"
        "    def train_step(self, *args, **kwargs):\n"
        "        return {'lm loss': 4.0}, False, False, False, 0, 1.0, 0\n"
    ),
    # megatron/training: get_args() and training.evaluate (the validation loss of each evaluation, in order).
    "megatron/__init__.py": "",
    "megatron/training/__init__.py": (
        "import json, os\nfrom types import SimpleNamespace\n"
        "_ARGS = SimpleNamespace(**json.loads(os.environ['STAND_IN_MEGATRON_ARGS']))\n\n"
        "def get_args():\n    return _ARGS\n"
    ),
    "megatron/training/training.py": (
        "import os\n_LOSSES = [float(v) for v in os.environ['STAND_IN_VALIDATION_LOSSES'].split(',')]\n\n"
        "def evaluate(*args, **kwargs):\n    return {'lm loss': _LOSSES.pop(0)}, None, False\n"
    ),
}

DRIVER = """
import primus_mllog
trainer = primus_mllog.MLPerfMegatronPretrainTrainer(module_name="pre_trainer")
trainer.init()
trainer.run()
"""


def resolved_conf(env: dict[str, str]) -> dict[str, object]:
    """The pre_trainer overrides of the reference's yaml with Primus's ``${VAR:default}`` resolved under ``env``."""
    text = (REFERENCE / "conf" / "gpt_oss_20B-pretrain-nvidia.yaml").read_text()
    overrides = yaml.safe_load(text)["modules"]["pre_trainer"]["overrides"]

    def resolve(value: object) -> object:
        match = re.fullmatch(r"\$\{(\w+):([^}]*)\}", value) if isinstance(value, str) else None
        return yaml.safe_load(env.get(match.group(1), match.group(2))) if match else value

    return {key: resolve(value) for key, value in overrides.items()}


def megatron_args(env: dict[str, str], seed: int) -> dict[str, object]:
    """Megatron's arguments of a full-scale run: the reference's yaml under the run's environment, plus the
    defaults Primus/Megatron fill in where the yaml is silent (each named)."""
    conf = resolved_conf({**env, "SEED": str(seed)})
    gpus = int(env["GPUS_PER_NODE"]) * int(env["NNODES"])
    model_parallel = conf["tensor_model_parallel_size"] * conf["pipeline_model_parallel_size"]
    return {
        **{key: value for key, value in conf.items() if isinstance(value, (int, float, str, bool, type(None), list))},
        "context_parallel_size": 1,  # Primus trainer_base.yaml default; the yaml sets none
        "clip_grad": 1.0,  # Primus trainer_base.yaml:90 (at a99a28f9); the yaml sets none
        "accumulate_allreduce_grads_in_fp32": True,  # Megatron's arguments.py sets it for bf16
        "fp8_param_gather": False,  # Primus trainer_base.yaml:58
        "data_parallel_size": gpus // model_parallel,
        "iteration": 0,
        "consumed_train_samples": 0,
    }


def drive(tmp_path: Path, hooked: bool, losses: str = "3.9,3.5,3.31") -> Path:
    """Run primus_mllog's trainer through a run with the full-scale configuration; returns the result file."""
    wheel_dir = tmp_path / "wheel"
    with zipfile.ZipFile(next(REFERENCE.glob("primus_mllog-*.whl"))) as wheel:
        wheel.extractall(wheel_dir)
    stand_in = tmp_path / "stand_in"
    for name, text in STAND_INS.items():
        (stand_in / name).parent.mkdir(parents=True, exist_ok=True)
        (stand_in / name).write_text(text)
    (tmp_path / "driver.py").write_text(DRIVER)
    result = tmp_path / "results" / "result.txt"
    result.parent.mkdir()  # run_and_time.sh:28 mkdir -p /results
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MLPERF_", "PYTHONPATH", "COMPLIANCE_FILE", "MLLOG_"))}
    env.update(ENV)
    env["MLLOG_OUTPUT_FILE"] = str(tmp_path / "results" / "mlperf_output.log")  # the reference's /results, here
    env.update(COMPLIANCE_FILE=str(result), SEED="4242", SYNTH_WARMUP_STEPS="0", RANK="0")
    env["STAND_IN_MEGATRON_ARGS"] = json.dumps(megatron_args(ENV, 4242))
    env["STAND_IN_VALIDATION_LOSSES"] = losses
    path = [str(stand_in), str(wheel_dir)]
    if hooked:
        path = [str(HOOKS), str(PATCHES), *path]
        env.update(SUBMISSION, MLPERF_WF_HOOKS="mlperf_wf_gpt_oss_20b")
    env["PYTHONPATH"] = os.pathsep.join(path)
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py")], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return result if hooked else Path(env["MLLOG_OUTPUT_FILE"])


def logged(path: Path) -> dict[str, list[dict]]:
    records: dict[str, list[dict]] = {}
    for line in path.read_text().splitlines():
        if (record := compliance.mllog_record(line)) is not None:
            records.setdefault(record["key"], []).append(record)
    return records


@pytest.fixture(scope="module")
def hooked_log(tmp_path_factory) -> Path:
    return drive(tmp_path_factory.mktemp("hooked"), hooked=True)


@pytest.mark.parametrize("ruleset", ["6.0.0", "6.1.0"])
def test_the_reference_logger_with_the_patch_passes_the_closed_rules(hooked_log, ruleset):
    verdict = compliance.check(hooked_log, ruleset)
    assert verdict.verdict == "passed", verdict.messages


def test_the_log_carries_the_full_scale_values(hooked_log):
    records = logged(hooked_log)
    value = {key: items[0]["value"] for key, items in records.items()}
    assert value["submission_benchmark"] == "gpt_oss_20b" and value["submission_org"] == "Example Org"
    assert [value[key] for key in PRECISION_KEYS] == ["bfloat16", "bfloat16", "bfloat16"]
    assert (value["max_sequence_length"], value["global_batch_size"], value["micro_batch_size"], value["eval_samples"]) == (8192, 16, 2, 1024)
    assert (value["expert_parallelism"], value["tensor_parallelism"], value["gradient_accumulation_steps"]) == (8, 1, 1)
    assert (value["max_steps"], value["opt_learning_rate_decay_steps"], value["seed"]) == (1_200_000, 1_199_872, 4242)
    assert value["config_filename"] == BENCH.full.env["EXP"]
    assert [item["value"] for item in records["eval_accuracy"]] == [3.9, 3.5, 3.31]
    assert [item["metadata"]["samples_count"] for item in records["eval_accuracy"]] == [12288, 24576, 36864]
    assert records["run_stop"][0]["metadata"]["status"] == "success"
    keys = [record["key"] for record in map(compliance.mllog_record, hooked_log.read_text().splitlines()) if record]
    assert max(keys.index(key) for key in PRECISION_KEYS) < keys.index("init_stop")


def test_without_the_patch_the_reference_log_fails_on_what_the_patch_fixes(tmp_path):
    own = drive(tmp_path, hooked=False)
    value = {key: items[0]["value"] for key, items in logged(own).items()}
    assert value["submission_benchmark"] == "gpt-oss-20b" and not set(PRECISION_KEYS) & set(value)
    verdict = compliance.check(own, "6.1.0")
    assert verdict.verdict == "failed" and "gpt-oss-20b" in verdict.problems[0]
    # With only the name corrected, the checker names exactly the other gaps the patch fills.
    renamed = tmp_path / "renamed.txt"
    renamed.write_text(own.read_text().replace('"gpt-oss-20b"', '"gpt_oss_20b"'))
    verdict = compliance.check(renamed, "6.1.0")
    assert verdict.verdict == "failed"
    missing = sorted(re.findall(r"Required \w+ occurrence of '(\w+)' but found 0", " ".join(verdict.messages)))
    assert missing == sorted(["cache_clear", "init_start", *PRECISION_KEYS]), verdict.messages


def test_the_patch_points_the_yaml_data_paths_at_the_workflow_mount():
    sys.path[:0] = [str(HOOKS), str(PATCHES)]
    try:
        import mlperf_wf_gpt_oss_20b as patch
    finally:
        del sys.path[:2]
    config = SimpleNamespace(**resolved_conf(BENCH.full.env), data_cache_path=None)
    os.environ.update(MLPERF_WF_DATA_DIR=BENCH.full.env["MLPERF_WF_DATA_DIR"], MLPERF_WF_DATA_CACHE=BENCH.full.env["MLPERF_WF_DATA_CACHE"])
    try:
        patch.relocate_data(config)
    finally:
        del os.environ["MLPERF_WF_DATA_DIR"], os.environ["MLPERF_WF_DATA_CACHE"]
    assert config.train_data_path == "10 /data/dataset/c4-train.en_6_text_document"
    assert config.valid_data_path == config.test_data_path == "/data/dataset/c4-validation-91205-samples.en_text_document"
    assert config.data_cache_path == BENCH.full.scratch["megatron_index_cache"].mount
    assert patch.precisions(SimpleNamespace(bf16=True, fp8="hybrid", fp8_param_gather=True))["lowest_numerical_precision_in_comm"] == "fp8"
    assert patch.precisions(SimpleNamespace(bf16=True, accumulate_allreduce_grads_in_fp32=True))["lowest_numerical_precision_in_comm"] == "fp32"
