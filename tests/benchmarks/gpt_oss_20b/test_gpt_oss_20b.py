"""gpt_oss_20b's tiny tier: a GPT-OSS mixture of experts (transformers' GptOssForCausalLM) on llama31_8b's
Megatron-format C4 stand-in, the reference's MoE settings (softmax top-k routing, no load balancing, auxiliary
loss coefficient 0.0, which the run logs and the loss really uses), the target 3.34 between the corpus's entropy
rate and its unigram entropy, a baseline that cannot reach it (the same model and steps on the same tokens
shuffled), and one run of the tiny DAG end to end (verdict ``passed_except_declared``: only the declared
max_sequence_length rule fails)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from mlperf_wf.acquire.mirror import generate_tiny_mirror
from mlperf_wf.benchmarks.gpt_oss_20b import trainer
from mlperf_wf.benchmarks.gpt_oss_20b.hyperparameters import Hyperparameters
from mlperf_wf.config import hyperparameters, mlperf_rules, registry
from mlperf_wf.config.registry import load_dataset
from mlperf_wf.language_models import c4_corpus, causal_trainer, markov_corpus
from mlperf_wf.language_models import llama31_tokenizer as tokenizer
from tests.workflow.test_workflow import new_workdir, snakemake

BENCH = registry.load_benchmark("gpt_oss_20b")
HP = Hyperparameters()
VOCABULARY = tokenizer.SYMBOLS + 2


def test_ten_runs_the_target_and_the_open_division_come_from_mlperf_logging():
    assert mlperf_rules.required_runs("gpt_oss_20b") == 10
    assert mlperf_rules.resolve_ruleset("gpt_oss_20b", "latest") == "6.1.0"
    for division in ("open", "closed"):
        target = mlperf_rules.quality_target("gpt_oss_20b", "6.1.0", division)
        assert (target.comparison, target.value) == ("<=", 3.34)
    assert BENCH.tiny.division == "open" and list(BENCH.tiny.open_rules_not_met) == ["max_sequence_length"]
    matrix = markov_corpus.transitions(load_dataset("c4_llama31_8b_preprocessed").tiny.seed, c4_corpus.SHAPE)
    assert markov_corpus.entropy_rate(matrix) + 2 < 3.34 < markov_corpus.unigram_entropy(matrix) - 1.5


def test_the_logged_hyperparameters_are_the_ones_the_loop_and_the_model_use():
    logged = HP.mllog(1)
    assert logged["opt_learning_rate_decay_steps"] == HP.decay_steps == 1_200_000 - HP.warmup_steps
    assert logged["max_steps"] == HP.max_steps == 1_200_000 and logged["max_sequence_length"] == HP.sequence_length
    assert HP.learning_rate_factor(HP.warmup_steps + HP.decay_steps) == pytest.approx(HP.end_learning_rate_fraction)
    assert (HP.eval_sequences, logged["opt_gradient_clip_norm"], logged["opt_name"]) == (1024, 1.0, "adamw")
    assert logged["moe_aux_loss_coeff"] == HP.moe_aux_loss_coeff == 0.0
    model = trainer.build_model(VOCABULARY, HP)
    config = model.config
    assert (config.num_local_experts, config.num_experts_per_tok, config.router_aux_loss_coef) == (HP.experts, HP.experts_per_token, 0.0)
    assert config.layer_types == ["sliding_attention", "full_attention"] and config.sliding_window == HP.sliding_window
    assert config.rope_parameters["rope_type"] == "default" and config.rope_parameters["rope_theta"] == HP.rotary_base
    assert config.initializer_range == HP.init_std and config.num_key_value_heads < config.num_attention_heads
    required = mlperf_rules.required_keys("gpt_oss_20b", "6.1.0", "open")
    harness = {"submission_benchmark", "submission_org", "submission_platform", "submission_division", "submission_status", "seed", "config_filename"}
    loop = {"cache_clear", "init_start", "init_stop", "run_start", "run_stop", "eval_accuracy", "train_samples", "eval_samples"}
    trainer_config = {f"lowest_numerical_precision_in_{p}" for p in ("linear", "attn", "comm")} | {
        f"{k}_parallelism" for k in ("tensor", "pipeline", "context", "expert")
    }
    assert required - harness - loop - trainer_config - set(logged) - {"block_start", "block_stop", "eval_start", "eval_stop"} <= {
        "epoch_start",
        "epoch_stop",
    }


def test_at_coefficient_zero_the_router_loss_is_not_computed_and_otherwise_it_is_added():
    assert trainer.training_loss(HP) is causal_trainer.next_token_loss
    torch.manual_seed(0)
    batch = torch.randint(0, tokenizer.SYMBOLS, (4, 33))
    weighted = HP.model_copy(update={"moe_aux_loss_coeff": 0.5})
    torch.manual_seed(0)
    model = trainer.build_model(VOCABULARY, weighted)
    assert model.config.output_router_logits
    with torch.no_grad():
        total = trainer.training_loss(weighted)(model, batch)
        output = model(input_ids=batch[:, :-1], output_router_logits=True)
        language = causal_trainer.next_token_loss(model, batch)
    assert output.aux_loss > 0
    assert total.item() == pytest.approx(language.item() + 0.5 * output.aux_loss.item(), rel=1e-5)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    mirror = generate_tiny_mirror(load_dataset("c4_llama31_8b_preprocessed"), tmp_path_factory.mktemp("mirror") / "c4")
    train = markov_corpus.windows(str(mirror.data / c4_corpus.TRAIN_PREFIX), HP.sequence_length)
    evaluation = markov_corpus.windows(str(mirror.data / c4_corpus.VALIDATION_PREFIX), HP.sequence_length)[:256]
    return train, evaluation


@pytest.fixture
def one_thread():
    """One torch thread, as the harness gives every tiny run (two threads on a shared 2-core machine are 5x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def train_steps(windows: torch.Tensor, evaluation: torch.Tensor, steps: int) -> float:
    hp = hyperparameters.resolve(BENCH, {})
    torch.manual_seed(0)
    model = trainer.build_model(VOCABULARY, hp)
    optimizer, schedule = causal_trainer.optimizer_for(model, hp)
    for step in range(steps):
        batch = windows[step * hp.global_batch_size : (step + 1) * hp.global_batch_size]
        causal_trainer.optimizer_step(model, batch, optimizer, hp.gradient_clip_norm, schedule, trainer.training_loss(hp))
    return causal_trainer.log_perplexity(model, evaluation)


def test_the_model_reaches_the_target_and_a_shuffled_corpus_baseline_does_not(corpus, one_thread):
    windows, evaluation = corpus
    steps = 40  # where the demo's runs cross the target (their fourth evaluation)
    shuffled = windows.flatten()[torch.randperm(windows.numel(), generator=torch.Generator().manual_seed(0))].reshape(windows.shape)
    assert train_steps(windows, evaluation, steps) < 3.34 - 0.3
    assert train_steps(shuffled, evaluation, steps) > 3.34 + 1.0


def test_one_tiny_run_end_to_end_meets_the_target_with_only_the_declared_rule_failing(tmp_path):
    workdir = new_workdir(tmp_path / "project")
    snakemake(workdir, "--cores", "2", "results/tiny/gpt_oss_20b/report.json", "--config", "benchmarks=[gpt_oss_20b]", "runs=1")
    verdict = json.loads((workdir / "results/tiny/gpt_oss_20b/runs/0/compliance.json").read_text())
    assert verdict["verdict"] == "passed_except_declared"
    assert len(verdict["problems"]) == 1 and "max_sequence_length" in verdict["problems"][0]
    records = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in (workdir / "results/tiny/gpt_oss_20b/runs/0/result.txt").read_text().splitlines()]
    values = {record["key"]: record["value"] for record in records}
    assert values["moe_aux_loss_coeff"] == 0.0 and values["eval_samples"] == 1024 and values["submission_division"] == "open"
    assert values["run_stop"] is None and records[-1]["metadata"]["status"] == "success" and values["eval_accuracy"] <= 3.34
    assert math.isfinite(values["eval_accuracy"])
