"""llama31_405b's tiny tier: the C4 stand-in in the published Mixtral layout, its tokenizer and starting
checkpoint, the preparation, and why the target is hard: an untrained model and a model trained on
shuffled tokens do not reach a log perplexity of 5.6, the same model trained on the real order does."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mlperf_wf.acquire.mirror import generate_tiny_mirror
from mlperf_wf.benchmarks.llama31_405b import c4_corpus, checkpoint, prepare, tokenizer
from mlperf_wf.benchmarks.llama31_405b.hyperparameters import Hyperparameters
from mlperf_wf.config import mlperf_rules
from mlperf_wf.config.registry import load_benchmark, load_dataset
from mlperf_wf.language_models import causal_trainer, markov_corpus

TARGET = mlperf_rules.quality_target("llama31_405b", "6.0.0", "open")
HP = Hyperparameters()


def test_the_target_is_the_rules_and_lies_between_the_entropy_rate_and_the_unigram_entropy():
    assert (TARGET.comparison, TARGET.value) == ("<=", 5.6)
    assert mlperf_rules.quality_target("llama31_405b", "6.0.0", "closed") == TARGET
    matrix = markov_corpus.transitions(load_dataset("c4_mixtral_8x22b_preprocessed").tiny.seed, c4_corpus.SHAPE)
    rate, unigram = markov_corpus.entropy_rate(matrix), markov_corpus.unigram_entropy(matrix)
    assert rate == pytest.approx(3.06, abs=0.01) and unigram == pytest.approx(6.90, abs=0.01)
    assert rate + 2 < TARGET.value < unigram - 1
    assert tokenizer.SYMBOLS > math.exp(TARGET.value)


def test_three_runs_are_required_and_the_tiny_tier_runs_the_latest_round_open():
    bench = load_benchmark("llama31_405b")
    assert mlperf_rules.required_runs("llama31_405b") == 3
    assert mlperf_rules.resolve_ruleset("llama31_405b", "latest") == "6.0.0"
    assert bench.tiny.division == "open" and set(bench.tiny.open_rules_not_met) <= {rule.split(" ")[0] for rule in bench.tiny.closed_rules_not_met}


def test_the_logged_hyperparameters_are_the_ones_the_loop_uses():
    logged = HP.mllog(1)
    assert logged["max_sequence_length"] == HP.sequence_length == 128
    assert logged["opt_learning_rate_decay_steps"] == HP.max_steps - HP.warmup_steps == math.ceil(1_200_000 * 1152 / 16) - 20
    assert logged["opt_end_learning_rate"] == pytest.approx(HP.learning_rate * HP.end_learning_rate_fraction)
    assert HP.learning_rate_factor(HP.warmup_steps + HP.decay_steps) == pytest.approx(HP.end_learning_rate_fraction)
    assert HP.first_eval_samples == math.floor(0.0026 * HP.global_batch_size + 12) * HP.eval_every_samples
    assert logged["init_checkpoint_step"] == 0 and logged["opt_name"] == "adamw"
    required = mlperf_rules.required_keys("llama31_405b", "6.0.0", "open")
    harness = {"submission_benchmark", "submission_org", "submission_platform", "submission_division", "submission_status", "seed"}
    loop = {"cache_clear", "init_start", "init_stop", "run_start", "run_stop", "eval_accuracy", "train_samples", "eval_samples"}
    assert required - harness - loop - set(logged) == set()


@pytest.fixture(scope="module")
def mirrors(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    return {
        dataset: generate_tiny_mirror(load_dataset(dataset), root / dataset)
        for dataset in ("c4_mixtral_8x22b_preprocessed", "mixtral_8x22b_tokenizer", "llama31_405b_checkpoint")
    }


@pytest.fixture(scope="module")
def prepared(mirrors, tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared")
    for shard in prepare.shards("tiny"):
        prepare.prepare_shard(shard, {"data": mirrors["c4_mixtral_8x22b_preprocessed"].data}, out / shard, "tiny")
    tree = out / "dataset"
    for name, target in prepare.layout("tiny").items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).symlink_to(out / target)
    return tree


def test_the_corpus_has_every_published_file_name_and_megatron_reads_it(mirrors):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    mirror = mirrors["c4_mixtral_8x22b_preprocessed"]
    listed = sorted(line.split()[1] for line in mirror.md5.read_text().splitlines())
    assert listed == sorted(f.path for f in load_dataset("c4_mixtral_8x22b_preprocessed").files)  # all 22
    for prefix, count in c4_corpus.documents_per_file().items():
        dataset = IndexedDataset(str(mirror.data / prefix))
        assert len(dataset) == count
    validation = IndexedDataset(str(mirror.data / c4_corpus.VALIDATION_PREFIX))
    first = np.array(validation[0])  # a copy: the item is a view of the dataset's memory map
    assert first.dtype == np.int32 and first.max() < tokenizer.SYMBOLS  # no BOS/EOD, as the reference's preprocessing
    assert tokenizer.build().decode(first.tolist()).split()[0] == f"t{int(first[0]):03d}"


def test_the_tokenizer_folder_loads_with_autotokenizer_and_fits_the_checkpoint(mirrors):
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(mirrors["mixtral_8x22b_tokenizer"].data)
    assert loaded("t000 t1023", add_special_tokens=False).input_ids == [0, 1023]
    assert (loaded.bos_token, loaded.eos_token) == ("<s>", "</s>")
    model = checkpoint.load(mirrors["llama31_405b_checkpoint"].data)
    assert model.config.vocab_size == len(loaded)
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # grouped-query attention, as 405B


def test_preparation_links_the_three_files_the_reference_reads(prepared):
    names = sorted(p.name for p in prepared.iterdir())
    for prefix in (*c4_corpus.READ_TRAIN_PREFIXES, c4_corpus.VALIDATION_PREFIX):
        assert f"{prefix}.bin" in names and f"{prefix}.idx" in names
    assert not any("en_0" in name for name in names)


def _evaluate(model, corpus) -> float:
    windows = markov_corpus.windows(corpus.validation_prefix, HP.sequence_length)[: HP.eval_sequences]
    return causal_trainer.log_perplexity(model, windows)


def _train(model, windows: torch.Tensor, steps: int) -> None:
    torch.manual_seed(0)
    optimizer, schedule = causal_trainer.optimizer_for(model, HP)
    order = torch.randperm(len(windows))
    for step in range(steps):
        start = (step * HP.global_batch_size) % (len(order) - HP.global_batch_size)
        causal_trainer.optimizer_step(model, windows[order[start : start + HP.global_batch_size]], optimizer, HP.gradient_clip_norm, schedule)


def test_baselines_do_not_reach_the_target_and_training_on_the_real_order_does(mirrors, prepared):
    torch.set_num_threads(2)
    corpus = causal_trainer.Corpus(tuple(str(prepared / prefix) for prefix in c4_corpus.READ_TRAIN_PREFIXES), str(prepared / c4_corpus.VALIDATION_PREFIX))
    train = torch.cat([markov_corpus.windows(p, HP.sequence_length) for p in corpus.train_prefixes])
    steps = 100  # the demo's runs stop at about 70
    untrained = _evaluate(checkpoint.load(mirrors["llama31_405b_checkpoint"].data), corpus)
    assert untrained == pytest.approx(math.log(tokenizer.SYMBOLS + 2), abs=0.1) and not TARGET.reached(untrained)
    shuffled = train.flatten()[torch.randperm(train.numel(), generator=torch.Generator().manual_seed(1))].reshape(train.shape)
    model = checkpoint.load(mirrors["llama31_405b_checkpoint"].data)
    _train(model, shuffled, steps)
    on_shuffled = _evaluate(model, corpus)
    assert not TARGET.reached(on_shuffled) and on_shuffled > 6.5  # near the unigram entropy, 6.90
    model = checkpoint.load(mirrors["llama31_405b_checkpoint"].data)
    _train(model, train, steps)
    assert TARGET.reached(_evaluate(model, corpus))
