"""flux1's tiny tier without Snakemake: the stand-in encodings in the reference's preprocessed layout, the
preparation's checks, the validation loss as the reference computes it, a run that reaches 0.586 with a log the
official checker passes, and the two baselines that must not reach it (an untrained model; the same training with the
captions shuffled across images)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mlperf_wf.acquire import prepare
from mlperf_wf.benchmarks.flux1 import encodings, tiny_world, trainer
from mlperf_wf.benchmarks.flux1 import prepare as prep
from mlperf_wf.benchmarks.flux1.hyperparameters import Hyperparameters
from mlperf_wf.config import mlperf_rules
from mlperf_wf.config.registry import load_dataset
from mlperf_wf.errors import UserError
from mlperf_wf.results import compliance
from mlperf_wf.run.harness import TinyRun
from tests.mllogs import tiny_run_spec

ROOT = Path(__file__).resolve().parents[3]
TARGET = 0.586


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> dict[str, Path]:
    """The three tiny datasets, as their catalog generators write them into the mirror."""
    root = tmp_path_factory.mktemp("published")
    folders = {"data": root / "cc12m", "validation": root / "coco", "empty_encodings": root / "empty"}
    tiny_world.generate_cc12m(folders["data"], seed=load_dataset("flux1_cc12m_preprocessed", ROOT).tiny.seed)
    tiny_world.generate_coco(folders["validation"], seed=load_dataset("flux1_coco_preprocessed", ROOT).tiny.seed)
    tiny_world.generate_empty_encodings(folders["empty_encodings"], seed=0)
    return folders


@pytest.fixture(scope="module")
def prepared(published, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("prepared")
    for shard in prep.shards("tiny"):
        prep.prepare_shard(shard, published, root / "shards" / shard, "tiny")
        prepare.record_shard(root / "shards" / shard)
    prepare.assemble(prep.layout("tiny"), root / "shards", root / "dataset")
    return root / "dataset"


@pytest.fixture(scope="module")
def trained(prepared, tmp_path_factory) -> tuple[dict, Path, torch.nn.Module]:
    """One tiny run (seed 1234, the 6.1.0 open rules the demo uses) to the target."""
    result = tmp_path_factory.mktemp("run") / "result.txt"
    spec = tiny_run_spec("flux1", "6.1.0", result, prepared, target=TARGET)
    spec = type(spec)(**{**spec.__dict__, "submission": type(spec.submission)(org="t", platform="t", division="open", status="research")})
    with TinyRun(spec, Hyperparameters()) as run:
        summary = trainer.train(run, Hyperparameters())
    return summary, result


@pytest.mark.parametrize("ruleset", ["5.1.0", "6.0.0", "6.1.0"])
def test_the_target_is_0_586_in_both_divisions_though_the_open_rules_name_the_result_averaged_validation_loss(ruleset):
    for division in ("closed", "open"):
        assert mlperf_rules.quality_target("flux1", ruleset, division) == mlperf_rules.QualityTarget("<=", TARGET)
    assert "averaged_validation_loss" in mlperf_rules.required_keys("flux1", ruleset, "open")


def test_the_encodings_have_the_reference_schema_and_layout(published):
    for role, folder in (("data", "cc12m"), ("validation", "coco")):
        names = {p.name for p in published[role].iterdir()}
        assert {"dataset_info.json", "state.json"} <= names and any(n.startswith("data-") and n.endswith(".arrow") for n in names), folder
        table = encodings.load_folder(published[role])
        assert table.column_names == list(encodings.COLUMNS)
        assert {name: str(feature.dtype) for name, feature in table.features.items()} == {
            "__key__": "string",
            "t5_encodings": "binary",
            "clip_encodings": "binary",
            "mean": "binary",
            "logvar": "binary",
            "timestep": "int32",
        }
        raw = np.load(__import__("io").BytesIO(table[0]["mean"]))
        assert raw.dtype == np.uint16 and raw.shape == (tiny_world.LATENT_CHANNELS, tiny_world.LATENT_SIZE, tiny_world.LATENT_SIZE)
    coco = encodings.load_folder(published["validation"])
    assert coco["timestep"] == [i % 8 for i in range(tiny_world.COCO_SAMPLES)]
    assert set(encodings.load_folder(published["data"])["timestep"]) == {None}
    for name, shape in (("t5_empty.npy", (1, tiny_world.TEXT_TOKENS, tiny_world.TEXT_WIDTH)), ("clip_empty.npy", (1, tiny_world.TEXT_WIDTH))):
        array = np.load(published["empty_encodings"] / name)
        assert array.dtype == np.float16 and array.shape == shape


def test_stored_latents_decode_to_unit_variance_after_the_references_shift_and_scale(published):
    split = trainer.load_split(published["validation"], with_timesteps=True)
    latents = trainer.scaled_latents(split.mean, split.logvar, torch.Generator().manual_seed(0))
    assert 0.8 < float(latents.std()) < 1.2 and abs(float(latents.mean())) < 0.2


def test_the_generator_is_deterministic_per_seed_and_validation_differs_from_training():
    a, b, c = tiny_world.split(8, 1, False, "x"), tiny_world.split(8, 1, False, "x"), tiny_world.split(8, 2, False, "x")
    assert a["mean"] == b["mean"] and a["mean"] != c["mean"]


def test_the_preparation_lays_out_the_folders_the_reference_reads(prepared):
    assert sorted(p.name for p in prepared.iterdir() if not p.name.startswith(".")) == ["cc12m_preprocessed", "coco_preprocessed", "empty_encodings"]
    summary = json.loads((prepared.parent / "shards" / "validation" / "shard.json").read_text())
    assert summary["samples"] == tiny_world.COCO_SAMPLES and summary["per_timestep"] == tiny_world.COCO_SAMPLES // 8


def test_the_preparation_refuses_unbalanced_timesteps_a_wrong_count_and_bad_empty_encodings(tmp_path):
    rows = tiny_world.split(16, 3, True, "coco-")
    rows["timestep"][0] = 7
    encodings.save_folder(rows, tmp_path / "coco")
    with pytest.raises(UserError, match=r"coco: 16 samples; the tiny validation set has 512"):
        prep.check_split(tmp_path / "coco", "validation", "tiny")
    with pytest.raises(UserError, match=r"coco: 16 samples; the full validation set has 29696"):
        prep.check_split(tmp_path / "coco", "validation", "full")
    prep.EXPECTED_ROWS["test"] = {"validation": 16}
    try:
        with pytest.raises(UserError, match=r"timestep counts \{0: 1, 1: 2, .* same count for each of 0-7"):
            prep.check_split(tmp_path / "coco", "validation", "test")
    finally:
        del prep.EXPECTED_ROWS["test"]
    (tmp_path / "empty").mkdir()
    np.save(tmp_path / "empty" / "t5_empty.npy", np.zeros((1, 8, 64), np.float32))
    with pytest.raises(UserError, match=r"t5_empty.npy: dtype float32, shape \(1, 8, 64\); the reference saves float16"):
        encodings.load_empty(tmp_path / "empty")


def test_the_validation_loss_is_the_mean_over_the_eight_timesteps(prepared):
    """The reference sums per-sample MSEs over the set and divides by the count (train.py:427-430, 598); on the balanced
    grid that is its README's algorithm: the mean over t = k/8 of each timestep's mean loss."""
    full = trainer.load_split(prepared / encodings.VALIDATION_FOLDER, with_timesteps=True)
    validation = trainer.Split(full.t5[:128], full.clip[:128], full.mean[:128], full.logvar[:128], full.timestep[:128])  # 16 per timestep
    torch.manual_seed(0)
    model = trainer.build_model(tiny_world.LATENT_CHANNELS, tiny_world.TEXT_WIDTH, Hyperparameters())
    got = trainer.validation_loss(model, validation, batch_size=len(validation))
    generator = torch.Generator().manual_seed(trainer.EVAL_NOISE_SEED)
    latents = trainer.scaled_latents(validation.mean, validation.logvar, generator)
    noise = torch.randn(latents.shape, generator=generator)
    with torch.no_grad():
        losses = trainer.per_sample_loss(model, latents, noise, validation.timestep / 8, validation.t5, validation.clip)
    per_timestep = [float(losses[validation.timestep == k].mean()) for k in range(8)]
    assert got == pytest.approx(sum(per_timestep) / 8, rel=1e-5)
    assert got > 1.5  # baseline: the untrained model is far above the target


def test_a_run_reaches_the_target_on_held_out_data_and_its_log_passes_the_checker(trained):
    summary, result = trained
    assert summary["status"] == "success" and summary["eval_accuracy"] <= TARGET
    assert summary["history"][0]["eval_accuracy"] > 0.9  # it got there by training
    verdict = compliance.check(result, "6.1.0")
    assert verdict.verdict == "passed", verdict.messages
    lines = [json.loads(line.removeprefix(":::MLLOG ")) for line in result.read_text().splitlines()]
    logged = {line["key"]: line["value"] for line in lines}
    hp = Hyperparameters()
    assert logged["evaluation_frequency"] == hp.eval_every_samples and logged["global_batch_size"] == hp.global_batch_size
    assert (logged["train_samples"], logged["eval_samples"]) == (tiny_world.CC12M_SAMPLES, tiny_world.COCO_SAMPLES)
    assert logged["submission_division"] == "open"


def test_shuffled_captions_stay_far_above_the_target_after_half_as_many_samples_again(prepared, trained, tmp_path):
    """The control: the same data, model and recipe, with each image's captions taken from a random other sample, for
    1.5 times the samples the real run needed, evaluated once at the end (to keep the test short)."""
    budget = 3 * trained[0]["samples_count"] // 1024 * 512
    spec = tiny_run_spec("flux1", "6.1.0", tmp_path / "result.txt", prepared, target=TARGET)
    hp = Hyperparameters(max_train_samples=budget, eval_every_samples=budget)
    with TinyRun(spec, hp) as run:
        summary = trainer.train(run, hp, shuffle_captions=True)
    assert summary["status"] == "aborted" and summary["samples_count"] == budget
    assert summary["eval_accuracy"] > TARGET + 0.1


@pytest.mark.slow
def test_the_tiny_dag_downloads_verifies_prepares_trains_and_reports(tmp_path):
    """Snakemake end to end on one run: mirror -> download -> md5 -> the three shards -> runs -> compliance -> report."""
    from tests.workflow.test_workflow import new_workdir, snakemake

    workdir = new_workdir(tmp_path / "flux1")
    snakemake(workdir, "--cores", "2", "--config", "benchmarks=[flux1]", "runs=1")
    report = json.loads((workdir / "results/tiny/flux1/report.json").read_text())
    assert report["ruleset"] == "6.1.0" and report["division"] == "open" and report["quality_target"] == {"comparison": "<=", "value": TARGET}
    assert [r["seed"] for r in report["runs"]] == [1234] and {r["compliance"] for r in report["runs"]} == {"passed"}
    assert all(r["final_eval_accuracy"] <= TARGET for r in report["runs"])
    prepared = workdir / "resources/tiny/prepared/flux1/dataset"
    assert sorted(p.name for p in prepared.iterdir() if not p.name.startswith(".")) == ["cc12m_preprocessed", "coco_preprocessed", "empty_encodings"]
