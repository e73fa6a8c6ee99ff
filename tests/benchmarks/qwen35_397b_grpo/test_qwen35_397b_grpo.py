"""qwen35_397b_grpo's tiny tier: the task split, the GRPO pieces, the R2E-Gym-Subset stand-in and its conversion to
the reference's two verified JSON-lines files, the logged hyperparameters against the 6.1.0 rules, and why the
target is earned: GRPO from the warmed-up policy beats pass@4 0.69 on the 251 held-out tasks, the same loop with
shuffled rewards does not, and the run's log passes the official checker except the declared open rule."""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
from functools import partial
from pathlib import Path

import pandas as pd
import pytest
import torch

from mlperf_wf.benchmarks.qwen35_397b_grpo import arithmetic, base_policy, grpo, megatron_checkpoint, policy, prepare, r2e_gym_subset, task_images
from mlperf_wf.benchmarks.qwen35_397b_grpo.hyperparameters import Hyperparameters
from mlperf_wf.config import mlperf_rules
from mlperf_wf.config.registry import load_benchmark, load_dataset
from mlperf_wf.errors import UserError
from mlperf_wf.results import compliance

NAME = "qwen35_397b_grpo"
RULESET = "6.1.0"
HP = Hyperparameters()


def test_the_round_run_count_and_target_come_from_mlperf_logging():
    assert mlperf_rules.rulesets_of(NAME) == ["6.1.0"]
    assert mlperf_rules.required_runs(NAME) == 3
    for division in ("closed", "open"):
        target = mlperf_rules.quality_target(NAME, RULESET, division)
        assert (target.comparison, target.value) == (">", 0.69)
    bench = load_benchmark(NAME)
    assert bench.tiny.division == "open" and set(bench.tiny.open_rules_not_met) == {"max_sequence_length"}


def test_the_split_is_disjoint_and_the_validation_set_is_the_251_the_rules_log():
    tasks = arithmetic.split()
    assert len(tasks["validation"]) == 251 and len(tasks["probe"]) == 500 and len(tasks["train"]) == 10_000 - 751
    ids = [{task.instance_id for task in part} for part in tasks.values()]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert arithmetic.Task(12, 34).prompt == "12+34=" and arithmetic.Task(12, 34).answer == "046"
    assert arithmetic.parse_prompt("07+93=") == arithmetic.Task(7, 93)
    with pytest.raises(ValueError, match="not a tiny addition prompt"):
        arithmetic.parse_prompt("7+93=")


def test_leave_one_out_advantages_and_the_clipped_loss():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    advantages = grpo.leave_one_out_advantages(rewards)
    std = rewards[0].std().item()
    assert advantages[0].tolist() == pytest.approx([(1 - 0) / std, (0 - 1 / 3) / std, (0 - 1 / 3) / std, (0 - 1 / 3) / std], rel=1e-5)
    assert advantages[1].abs().sum() == 0  # a group with equal rewards carries no signal
    logprobs = torch.zeros(2, 3, requires_grad=True)
    loss = grpo.clipped_policy_loss(logprobs, logprobs.detach(), torch.tensor([1.0, -1.0]), 0.2, 0.28)
    loss.backward()
    assert logprobs.grad[0].lt(0).all() and logprobs.grad[1].gt(0).all()  # raise the rewarded, lower the other
    far = torch.full((1, 3), math.log(2.0), requires_grad=True)  # ratio 2: beyond 1 + 0.28, clipped for a positive advantage
    grpo.clipped_policy_loss(far, torch.zeros(1, 3), torch.tensor([1.0]), 0.2, 0.28).backward()
    assert far.grad.abs().sum() == 0


def test_nucleus_filtering_and_the_exact_chunked_linear_attention():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    assert policy._filter_top_p(probs, 0.95).tolist()[0] == pytest.approx([0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0])
    assert torch.equal(policy._filter_top_p(probs, 1.0), probs)
    from transformers import Qwen3_5MoeForCausalLM

    torch.manual_seed(0)
    model = Qwen3_5MoeForCausalLM(policy.model_config()).eval()
    assert model.config.layer_types == ["linear_attention", "full_attention"] and model.config.num_experts == 4
    ids = torch.randint(0, len(arithmetic.VOCABULARY), (4, 10))
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids, chunk_size=policy.LINEAR_ATTENTION_CHUNK).logits, model(input_ids=ids).logits, atol=1e-5)


def test_the_logged_hyperparameters_are_the_loops_and_meet_the_closed_rules_but_the_declared_ones():
    logged = HP.mllog(1)
    assert logged["global_batch_size"] == HP.num_prompts_per_step * HP.num_generations_per_prompt == 256
    assert logged["num_generations_per_prompt"] == 16
    assert logged["opt_gradient_clip_norm"] == pytest.approx(0.125 * math.sqrt(256 / logged["global_batch_size"]))
    assert (logged["opt_adamw_beta_1"], logged["opt_adamw_beta_2"], logged["opt_adamw_epsilon"], logged["opt_adamw_weight_decay"]) == (0.9, 0.999, 1e-8, 0.0)
    assert logged["opt_learning_rate_warmup_steps"] == 0 and logged["opt_learning_rate_decay_schedule"] == "constant"
    assert (logged["generation_training_rollout_temperature"], logged["generation_training_rollout_top_p"]) == (1.0, 1.0)
    assert (logged["generation_validation_rollout_temperature"], logged["generation_validation_rollout_top_p"]) == (0.1, 0.95)
    assert logged["max_sequence_length"] == 10 and logged["reference_policy_kl_penalty"] == HP.kl_penalty > 0
    assert HP.first_validation_samples == 256 * math.ceil(2.5 + 3840 / 256) == 4608
    required = mlperf_rules.required_keys(NAME, RULESET, "open")
    harness = {"submission_benchmark", "submission_org", "submission_platform", "submission_division", "submission_status", "seed", "config_filename"}
    loop = {"cache_clear", "init_start", "init_stop", "run_start", "run_stop", "eval_accuracy", "train_samples", "eval_samples"}
    loop |= {f"lowest_numerical_precision_in_{part}" for part in ("linear", "attn", "comm")}
    loop |= {f"{kind}_parallelism" for kind in ("tensor", "pipeline", "context", "expert")}
    assert required - harness - loop - set(logged) == set()


def test_the_kl_penalty_is_zero_at_the_reference_policy_and_pulls_the_policy_back_toward_it():
    reference = torch.log_softmax(torch.randn(8, 3, 13, generator=torch.Generator().manual_seed(0)), dim=-1)[..., 0]
    assert grpo.reference_kl(reference, reference).item() == pytest.approx(0.0, abs=1e-7)
    logprobs = (reference + 0.3).requires_grad_(True)
    kl = grpo.reference_kl(logprobs, reference)
    assert kl.item() > 0
    (gradient,) = torch.autograd.grad(kl, logprobs)
    # a policy more confident than the reference on its samples is pushed back down
    assert (gradient > 0).all()


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen_data")
    r2e_gym_subset.generate(root / "repo", load_dataset("r2e_gym_subset").tiny.seed)
    task_images.generate(root / "images", load_dataset("r2e_gym_task_images").tiny.seed)
    summary = prepare.prepare_shard(prepare.SHARD, {"data": root / "repo"}, root / "prepared", "tiny")
    return root, summary


def test_the_repository_has_the_published_split_and_columns(tiny_data):
    root, _ = tiny_data
    frame = pd.read_parquet(root / "repo" / r2e_gym_subset.PARQUET_FILE)
    assert list(frame.columns) == list(r2e_gym_subset.COLUMNS) and len(frame) == 4578
    row = frame.iloc[0]
    assert json.loads(row["expected_output_json"]) == {"answer": arithmetic.parse_prompt(row["problem_statement"]).answer}
    assert row["docker_image"] == f"namanjain12/{row['repo_name']}_final:{row['commit_hash']}"


def test_the_conversion_writes_the_references_files_and_the_generators_still_produce_the_pinned_values(tiny_data):
    root, summary = tiny_data
    prepared = root / "prepared"
    assert set(prepare.layout("tiny")) == {prepare.TRAIN_FILENAME, prepare.VALIDATION_FILENAME, prepare.METRICS_FILENAME, "prepared.json"}
    for name, expected in prepare.EXPECTED["tiny"].items():
        prepare.verify(prepared / name, expected)  # the pinned sha256/rows/bytes (verify_dataset.sh's three checks)
    assert summary["files"][prepare.VALIDATION_FILENAME]["rows"] == 251 and summary["files"][prepare.TRAIN_FILENAME]["rows"] == 685
    validation = {json.loads(line)["instance_id"] for line in (prepared / prepare.VALIDATION_FILENAME).read_text().splitlines()}
    training = {json.loads(line)["instance_id"] for line in (prepared / prepare.TRAIN_FILENAME).read_text().splitlines()}
    assert not validation & training and validation == {task.instance_id for task in arithmetic.split()["validation"]}
    for instance_id in [*validation, *training]:
        task_images.load(root / "images", instance_id)  # every qualified task has its environment
    assert prepare.EXPECTED["full"][prepare.TRAIN_FILENAME] == prepare.Expected(
        "c07bcd64ed1c558e28d091239104e38295a5e696c1d21bb0b61f0346c7eaa0f7", 685, 444_421_669
    )


def test_a_changed_file_fails_verification_with_one_line(tiny_data, tmp_path):
    root, _ = tiny_data
    copy = tmp_path / prepare.VALIDATION_FILENAME
    copy.write_bytes((root / "prepared" / prepare.VALIDATION_FILENAME).read_bytes().replace(b'"problem_statement":"', b'"problem_statement":" ', 1))
    with pytest.raises(UserError, match=r"SHA-256 .* expected b11e7d2d"):
        prepare.verify(copy, prepare.EXPECTED["tiny"][prepare.VALIDATION_FILENAME])


def test_the_full_conversion_needs_the_pinned_nemo_rl_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv("MLPERF_WF_NEMO_RL_DIR", raising=False)
    with pytest.raises(UserError, match=r"MLPERF_WF_NEMO_RL_DIR is not set.*3fca04c9b313d313302923a5bb6b0c8dc0340ed6"):
        prepare.prepare_shard(prepare.SHARD, {"data": tmp_path}, tmp_path / "out", "full")
    monkeypatch.setenv("MLPERF_WF_NEMO_RL_DIR", str(tmp_path))
    with pytest.raises(UserError, match="not a git checkout"):
        prepare.nemo_rl_checkout()


def test_the_task_environment_is_the_verifier():
    env = task_images.environment(arithmetic.Task(12, 34))
    assert task_images.run_test(env, "046") == 1.0 and task_images.run_test(env, "46") == 0.0 and task_images.run_test(env, "047") == 0.0


@pytest.fixture(scope="module")
def base_checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen_base")
    torch.set_num_threads(1)
    base_policy.generate(folder, load_dataset("qwen35_397b_a17b_checkpoint").tiny.seed)
    return folder


def _converted(tmp_path) -> Path:
    folder = tmp_path / "megatron_checkpoint"
    if not folder.exists():
        megatron_checkpoint.generate(folder, load_dataset("qwen35_397b_megatron_checkpoint").tiny.seed)
    return folder


def _run(tmp_path, tiny_data, checkpoint, seed: int, **overrides):
    from mlperf_wf.benchmarks.qwen35_397b_grpo import trainer
    from mlperf_wf.run.harness import RunSpec, TinyRun
    from mlperf_wf.run.mllog_utils import Submission

    root, _ = tiny_data
    target = mlperf_rules.quality_target(NAME, RULESET, "open")
    hp = Hyperparameters(**overrides)
    spec = RunSpec(
        benchmark=NAME,
        submission_benchmark=NAME,
        data_dir=root / "prepared",
        result_file=tmp_path / f"result_{seed}.txt",
        seed=seed,
        target=target.value,
        target_comparison=target.comparison,
        ruleset=RULESET,
        submission=Submission(org="test", platform="cpu", division="open", status="onprem"),
        config_filename="hyperparameters.py",
        inputs={"checkpoint": checkpoint, "task_images": root / "images", "megatron_checkpoint": _converted(tmp_path)},
    )
    with TinyRun(spec, hp) as run:
        return trainer.train(run, hp), spec.result_file


def test_the_base_policy_starts_with_room_for_rl(base_checkpoint):
    record = json.loads((base_checkpoint / "warm_up.json").read_text())
    assert base_policy.STOP_PASS_AT_4 <= record["probe_pass_at_4"] < 0.69
    model, tokenizer = policy.load(base_checkpoint)
    validation = arithmetic.split()["validation"]
    verifiers = [partial(arithmetic.reward, expected=task.answer) for task in validation]
    untrained = policy.pass_at_k(model, tokenizer, [t.prompt for t in validation], verifiers, 4, 0.1, 0.95, torch.Generator().manual_seed(0))
    assert untrained < 0.69


def test_grpo_reaches_the_target_and_the_log_passes_except_the_declared_rule(tmp_path, tiny_data, base_checkpoint):
    summary, result = _run(tmp_path, tiny_data, base_checkpoint, seed=11)
    assert summary["status"] == "success" and summary["eval_accuracy"] > 0.69
    evals = [record["samples"] for record in summary["history"] if "pass_at_4" in record]
    assert evals[0] == HP.first_validation_samples and all(b - a == 256 for a, b in itertools.pairwise(evals))
    declared = dict(load_benchmark(NAME).tiny.open_rules_not_met)
    checked = compliance.check(result, RULESET, declared=declared)
    assert checked.verdict == "passed_except_declared", checked.problems


def test_shuffled_rewards_do_not_reach_the_target(tmp_path, tiny_data, base_checkpoint):
    summary, _ = _run(tmp_path, tiny_data, base_checkpoint, seed=11, shuffle_rewards=True, max_steps=40)
    assert summary["status"] == "aborted"
    assert max(record["pass_at_4"] for record in summary["history"] if "pass_at_4" in record) < 0.69


def test_the_full_conversion_runs_the_submodules_converter_with_the_references_arguments_then_renames_and_verifies(monkeypatch, tmp_path):
    """download_dataset.sh:126-157 against a stand-in checkout: its converter records its arguments and writes the
    three outputs; preparation renames them and checks them (here against the stand-in's own values)."""
    import hashlib
    import subprocess

    checkout = tmp_path / "RL"
    (checkout / "tools").mkdir(parents=True)
    (checkout / "tools" / "create_r2e_gym_easy_subset_jsonl.py").write_text(
        "import json, sys, pathlib\n"
        "args = dict(zip(sys.argv[1::2], sys.argv[2::2]))\n"
        "out = pathlib.Path(args['--output-dir'])\n"
        "(out / 'benchmark_r2e_gym_easy_train.jsonl').write_text('{\"t\":1}\\n')\n"
        "(out / 'benchmark_r2e_gym_easy_val.jsonl').write_text('{\"v\":1}\\n{\"v\":2}\\n')\n"
        "(out / 'r2e_gym_subset_full_conversion_metrics.json').write_text(json.dumps(args))\n"
    )
    for name in ("train-instance-ids.txt", "val-instance-ids.txt"):
        (checkout / "tools" / name).write_text("id\n")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "stand-in"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "uv").write_text('#!/bin/sh\n# uv run --with pyarrow==23.0.1 python ...: run the rest\nshift 3\nexec "$@"\n')
    (bin_dir / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}")
    monkeypatch.setenv("MLPERF_WF_NEMO_RL_DIR", str(checkout))
    monkeypatch.setattr(prepare, "NEMO_RL_COMMIT", "0" * 40)
    with pytest.raises(UserError, match=f"at commit {head}; the reference pins 0000"):
        prepare.nemo_rl_checkout()
    monkeypatch.setattr(prepare, "NEMO_RL_COMMIT", head)

    def expected(text: str) -> prepare.Expected:
        return prepare.Expected(hashlib.sha256(text.encode()).hexdigest(), text.count("\n"), len(text.encode()))

    stand_in = {prepare.TRAIN_FILENAME: expected('{"t":1}\n'), prepare.VALIDATION_FILENAME: expected('{"v":1}\n{"v":2}\n')}
    monkeypatch.setitem(prepare.EXPECTED, "full", stand_in)
    out = tmp_path / "prepared"
    summary = prepare.prepare_shard(prepare.SHARD, {"data": tmp_path / "repo"}, out, "full")
    assert summary["files"][prepare.VALIDATION_FILENAME]["rows"] == 2
    args = json.loads((out / prepare.METRICS_FILENAME).read_text())
    assert args["--dataset-dir"] == str(tmp_path / "repo") and args["--container-image-dir"] == "/inputs/nemo_gym/sif"
    assert (args["--train-ids"], args["--val-ids"]) == ("tools/train-instance-ids.txt", "tools/val-instance-ids.txt")
    assert not (out / ".staging").exists()
    monkeypatch.setitem(prepare.EXPECTED, "full", {**stand_in, prepare.TRAIN_FILENAME: expected('{"t":2}\n')})
    with pytest.raises(UserError, match="SHA-256"):
        prepare.prepare_shard(prepare.SHARD, {"data": tmp_path / "repo"}, out, "full")
