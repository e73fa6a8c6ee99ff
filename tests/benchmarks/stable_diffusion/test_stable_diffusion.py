"""stable_diffusion's tiny tier pieces: the FID/CLIP formulas, the real-weights loader, the per-metric targets,
the preparation's checks (the end-to-end run is not wired into a test yet: see the benchmark README)."""

from __future__ import annotations

import io
import tarfile
import warnings

import numpy as np
import pytest
import torch

from mlperf_wf.benchmarks.stable_diffusion import inception, metrics, prepare, shapes
from mlperf_wf.config import mlperf_rules
from mlperf_wf.errors import UserError


def test_frechet_distance_is_the_closed_form_for_commuting_covariances():
    rng = np.random.default_rng(0)
    mu1, mu2 = rng.normal(size=4), rng.normal(size=4)
    s1, s2 = np.diag(rng.uniform(0.5, 2, 4)), np.diag(rng.uniform(0.5, 2, 4))
    expected = np.sum((mu1 - mu2) ** 2) + np.sum((np.sqrt(np.diag(s1)) - np.sqrt(np.diag(s2))) ** 2)
    assert metrics.frechet_distance(mu1, s1, mu2, s2) == pytest.approx(expected, rel=1e-9)
    assert metrics.frechet_distance(mu1, s1, mu1, s1) == pytest.approx(0.0, abs=1e-9)


def test_singular_covariances_take_pytorch_fid_s_offset_without_a_warning():
    """Fewer samples than features make singular covariances (the tiny tier's FID): pytorch-fid asks SciPy for no
    warning (``disp=False``), sees the non-finite root and retries with an offset; so does ours."""
    features = np.random.default_rng(0).normal(size=(2, 8))
    mu, sigma = metrics.statistics(features)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert metrics.frechet_distance(mu, sigma, mu + 1.0, sigma) == pytest.approx(8.0, abs=1e-3)


def test_a_file_in_the_published_inception_layout_loads_strictly_and_gives_pool3_features(tmp_path):
    # Same keys and layout as pt_inception-2015-12-05-6726825d.pth, every width divided by 16 (checked: every
    # tensor name and shape must match the FID Inception-v3 at that width; the fc keeps 1008 classes).
    published = inception.FIDInceptionV3(width_divisor=1)
    tiny = inception.FIDInceptionV3(width_divisor=16)
    assert set(tiny.state_dict()) == set(published.state_dict())
    folder = tmp_path / "inception"
    folder.mkdir()
    torch.save(tiny.state_dict(), folder / metrics.PUBLISHED_INCEPTION_FILE)
    encoder = metrics.FeatureEncoder(folder)
    assert encoder.kind == "published FID Inception-v3 layout"
    features = encoder.features(torch.rand(3, 3, 16, 16))
    assert features.shape == (3, 2048 // 16)
    broken = {k: v for k, v in tiny.state_dict().items() if not k.startswith("Mixed_7c.branch_pool")}
    torch.save(broken, folder / metrics.PUBLISHED_INCEPTION_FILE)
    with pytest.raises(UserError, match=r"Mixed_7c\.branch_pool"):
        metrics.FeatureEncoder(folder)


@pytest.mark.parametrize("ruleset", ["3.1.0", "4.0.0", "4.1.0", "5.0.0"])
def test_both_targets_come_from_the_rules(ruleset):
    targets = mlperf_rules.quality_targets("stable_diffusion", ruleset, "closed")
    assert [(t.metric, t.comparison, t.value) for t in targets] == [("FID", "<=", 90.0), ("CLIP", ">=", 0.15)]
    # The open rules only bound the range; runs aim at the closed targets.
    assert mlperf_rules.quality_targets("stable_diffusion", ruleset, "open") == targets
    assert mlperf_rules.quality_targets("rgat", "5.0.0", "closed") == [mlperf_rules.quality_target("rgat", "5.0.0", "closed")]


def _tar(path, members):
    with tarfile.open(path, "w") as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))


def _npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_preparation_refuses_a_sample_without_caption_or_with_misshaped_moments(tmp_path):
    good = np.zeros((1, 8, 8, 8), dtype=np.float32)
    _tar(tmp_path / "ok.tar", {"a.npy": _npy(good), "a.txt": b"a red circle"})
    assert prepare.check_moments_tar(tmp_path / "ok.tar") == 1
    _tar(tmp_path / "nocap.tar", {"a.npy": _npy(good)})
    with pytest.raises(UserError, match=r"lacks its \.npy moments or \.txt caption"):
        prepare.check_moments_tar(tmp_path / "nocap.tar")
    _tar(tmp_path / "shape.tar", {"a.npy": _npy(good[0]), "a.txt": b"x"})
    with pytest.raises(UserError, match=r"expected float32 \(1, 2 x channels, h, w\)"):
        prepare.check_moments_tar(tmp_path / "shape.tar")


def test_generated_images_show_what_the_caption_says():
    images, labels, captions = shapes.sample(np.random.default_rng(1), 32)
    assert images.shape == (32, 3, 16, 16) and images.min() >= 0 and images.max() <= 1
    for image, label, caption in zip(images, labels, captions, strict=True):
        colour, shape = shapes.CLASSES[label]
        assert caption == f"a {colour} {shape}"
        brightest = image.reshape(3, -1)[:, image.sum(0).argmax()]
        assert int(np.argmax(brightest)) == int(np.argmax(shapes.COLOURS[colour])) or colour == "yellow"


# ---- on the generated tiny data (one module-scoped generation: the stand-ins train once per process) ----

SEED = 2023
"""The catalog entries' tiny seed."""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Every catalog entry's tiny stand-in, then the prepared tree, as the DAG makes them."""
    from mlperf_wf.acquire.prepare import assemble, record_shard
    from mlperf_wf.benchmarks.stable_diffusion import tiny_data

    root = tmp_path_factory.mktemp("sd")
    generators = {
        "data": tiny_data.generate_moments,
        "prompts": tiny_data.generate_prompts,
        "stats": tiny_data.generate_stats,
        "checkpoint": tiny_data.generate_checkpoint,
        "inception": tiny_data.generate_inception,
        "clip": tiny_data.generate_clip,
    }
    for role, generate in generators.items():
        generate(root / role, SEED)
    for shard in prepare.shards("tiny"):
        prepare.prepare_shard(shard, {r: root / r for r in ("data", "prompts", "stats")}, root / "shards" / shard, "tiny")
        record_shard(root / "shards" / shard)
    assemble(prepare.layout("tiny"), root / "shards", root / "dataset")
    return root


@pytest.fixture(scope="module")
def pipeline(tiny):
    """The frozen networks and the prepared corpus a run reads."""
    from diffusers import AutoencoderKL

    from mlperf_wf.benchmarks.stable_diffusion import trainer

    return {
        "vae": AutoencoderKL.from_pretrained(tiny / "checkpoint/first_stage").eval(),
        "text": trainer.TextEncoder(tiny / "checkpoint/cond_stage"),
        "encoder": metrics.FeatureEncoder(tiny / "inception"),
        "scorer": metrics.ClipScorer.load(tiny / "clip"),
        "corpus": trainer.load_corpus(tiny / "dataset"),
    }


def test_tiny_data_is_in_the_layout_the_reference_reads(tiny):
    import pandas as pd

    tars = sorted(p.name for p in (tiny / "dataset" / prepare.MOMENTS_DIR).iterdir())
    assert tars == ["00000.tar", "00001.tar", "00002.tar", "00003.tar"]
    with tarfile.open(tiny / "dataset" / prepare.MOMENTS_DIR / "00000.tar") as tar:
        names = tar.getnames()
        moments = np.load(io.BytesIO(tar.extractfile(names[0]).read()))
        caption = tar.extractfile(names[1]).read().decode()
    assert names[0].endswith(".npy") and names[1] == names[0].replace(".npy", ".txt")
    assert moments.dtype == np.float32 and moments.shape == (1, 8, 8, 8)  # (1, mean + logvar of 4 channels, h, w)
    assert caption.startswith("a ")
    frame = pd.read_csv(tiny / "dataset" / prepare.COCO_DIR / prepare.TSV, sep="\t", header=0)
    assert list(frame.columns) == ["image_id", "id", "caption"] and len(frame) == 256
    with np.load(tiny / "dataset" / prepare.COCO_DIR / prepare.STATS) as stats:
        assert sorted(stats.files) == ["mu", "sigma"] and stats["sigma"].shape == (64, 64)


def test_an_untrained_unet_and_shifted_captions_stay_far_from_the_stand_in_targets(pipeline):
    from mlperf_wf.benchmarks.stable_diffusion import tiny_data, trainer
    from mlperf_wf.benchmarks.stable_diffusion.hyperparameters import Hyperparameters
    from mlperf_wf.config.registry import load_benchmark

    targets = {t.metric: t for t in load_benchmark("stable_diffusion").tiny.standin_targets}
    hp = Hyperparameters()
    torch.manual_seed(0)
    unet = trainer.build_unet(hp, 4, 8, pipeline["text"].width).eval()
    _, sampler = trainer.schedulers(hp)
    p = pipeline
    untrained = trainer.evaluate(unet, sampler, p["text"], p["vae"], p["encoder"], p["scorer"], p["corpus"], hp, torch.Generator().manual_seed(1))
    assert untrained["FID"] > 2 * targets["FID"].value and untrained["CLIP"] < targets["CLIP"].value / 2
    images, captions = tiny_data.validation_set(SEED)
    shifted = p["scorer"].scores(torch.from_numpy(images), captions[1:] + captions[:1])
    assert shifted.mean() < targets["CLIP"].value / 4


def test_the_stand_in_targets_sit_where_their_calibration_says(pipeline):
    from mlperf_wf.benchmarks.stable_diffusion import tiny_data
    from mlperf_wf.config.registry import load_benchmark

    targets = {t.metric: t for t in load_benchmark("stable_diffusion").tiny.standin_targets}
    images, captions = tiny_data.validation_set(SEED)
    x = torch.from_numpy(images)
    vae = pipeline["vae"]
    with torch.no_grad():
        reconstructed = ((vae.decode(vae.encode(x * 2 - 1).latent_dist.mean).sample + 1) / 2).clamp(0, 1)
    floor = metrics.frechet_distance(*metrics.statistics(pipeline["encoder"].features(reconstructed)), *pipeline["corpus"].stats)
    matched = float(pipeline["scorer"].scores(x, captions).mean())
    # benchmark.yaml: FID <= 1.25 x the reconstruction floor, CLIP >= 0.8 x the matched real pairs' score
    assert targets["FID"].value == pytest.approx(1.25 * floor, rel=0.05)
    assert targets["CLIP"].value == pytest.approx(0.8 * matched, rel=0.05)


def test_a_run_stops_only_when_every_metric_meets_its_target():
    from mlperf_wf.config.mlperf_rules import report_target, run_targets
    from mlperf_wf.config.registry import load_benchmark
    from mlperf_wf.run.harness import RunSpec
    from mlperf_wf.run.mllog_utils import Submission

    bench = load_benchmark("stable_diffusion")
    tiny = run_targets(bench, "5.0.0", "open", "tiny")
    assert [(t.metric, t.comparison, t.value) for t in tiny] == [("FID", "<=", 225.0), ("CLIP", ">=", 0.65)]
    assert run_targets(bench, "5.0.0", "closed", "full") == mlperf_rules.quality_targets("stable_diffusion", "5.0.0")
    spec = RunSpec(
        "stable_diffusion", "stable_diffusion", None, None, 1, 225.0, "5.0.0", Submission("o", "p", "open", "research"), "c", metric_targets=tuple(tiny)
    )
    assert spec.reached_all({"FID": 200.0, "CLIP": 0.7})
    assert not spec.reached_all({"FID": 200.0, "CLIP": 0.6}) and not spec.reached_all({"FID": 230.0, "CLIP": 0.7})
    assert not spec.reached_all({"FID": 200.0})
    assert report_target(tiny)["all"][1] == {"comparison": ">=", "value": 0.65, "metric": "CLIP"}
    # a benchmark with one target keeps the report's shape
    assert report_target(run_targets(load_benchmark("rgat"), "5.1.0", "closed", "tiny")) == {"comparison": ">=", "value": 0.72}


def test_any_clipmodel_folder_is_read_as_the_clip_input(tiny, tmp_path):
    """The real ViT-H-14 in its Hugging Face form is a CLIPModel folder like the stand-in's: the same loader reads
    it (checked here with the stand-in's files minus its STANDIN marker: config.json, model.safetensors, tokenizer)."""
    import shutil

    folder = tmp_path / "clip"
    shutil.copytree(tiny / "clip", folder)
    (folder / "STANDIN").unlink()
    scorer = metrics.ClipScorer.load(folder)
    assert scorer.kind == "published"
    images, _, captions = shapes.sample(np.random.default_rng(5), 8)
    scores = scorer.scores(torch.from_numpy(images), captions)
    assert scores.shape == (8,) and np.all(np.abs(scores) <= 1.0 + 1e-6)
    with pytest.raises(UserError, match=r"no config\.json"):
        metrics.ClipScorer.load(tmp_path)
