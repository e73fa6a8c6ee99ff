"""Tiny stand-ins of the stable_diffusion catalog entries, each in the layout the reference reads.

* ``laion_400m_filtered_moments``: webdataset tars ``00000.tar``... of ``<key>.npy`` (the first stage's
  moments, float32 (1, 2 x 4, h, w): mean and log-variance, as ``webdataset_images2latents.py`` saves them)
  and ``<key>.txt`` (the caption).
* ``sd_coco2014_validation_prompts``: ``val2014_30k.tsv`` with the columns ``image_id``, ``id``, ``caption``
  (``coco-split-resize.py``'s output, read by ``ldm/data/tsv.py``).
* ``sd_coco2014_validation_stats``: ``val2014_30k_stats.npz`` (``mu``, ``sigma``, as ``save_fid_stats``) of
  the validation images under the FID encoder of ``sd_inception_checkpoint``.
* ``sd_checkpoint``: the first stage (diffusers ``AutoencoderKL`` folder ``first_stage``) and the text
  encoder (``cond_stage``: the CLIP stand-in's text tower and tokenizer); the real one is ``512-base-ema.ckpt``.
* ``sd_inception_checkpoint``: ``standin_fid_encoder.pth``; ``sd_clip_checkpoint``: the CLIP stand-in folder.

Every generator rebuilds what it needs from the same seed (``standins``), so the files agree.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import torch

from mlperf_wf.benchmarks.stable_diffusion import metrics, shapes, standins

TRAIN_PAIRS = 4096
TRAIN_SHARDS = 4
VALIDATION_PROMPTS = 256
TSV = "val2014_30k.tsv"
STATS = "val2014_30k_stats.npz"


def validation_set(seed: int) -> tuple[np.ndarray, list[str]]:
    """The held-out images and captions (a seed of their own: never trained on by the UNet or the stand-ins)."""
    images, _, captions = shapes.sample(np.random.default_rng(seed + 104729), VALIDATION_PROMPTS)
    return images, captions


def _add(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    info.mtime = 0
    tar.addfile(info, io.BytesIO(payload))


def generate_moments(out_dir: Path, seed: int) -> None:
    """LAION stand-in: first-stage moments and captions in webdataset tars."""
    out_dir.mkdir(parents=True, exist_ok=True)
    vae = standins.train_vae(seed)
    images, _, captions = shapes.sample(np.random.default_rng(seed), TRAIN_PAIRS)
    per_shard = TRAIN_PAIRS // TRAIN_SHARDS
    with torch.no_grad():
        moments = vae.encode(torch.from_numpy(images) * 2 - 1).latent_dist.parameters.numpy()
    for shard in range(TRAIN_SHARDS):
        with tarfile.open(out_dir / f"{shard:05d}.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
            for i in range(shard * per_shard, (shard + 1) * per_shard):
                buffer = io.BytesIO()
                np.save(buffer, moments[i : i + 1].astype(np.float32))
                _add(tar, f"{i:09d}.npy", buffer.getvalue())
                _add(tar, f"{i:09d}.txt", captions[i].encode())


def generate_prompts(out_dir: Path, seed: int) -> None:
    """COCO-2014 validation prompts stand-in."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    _, captions = validation_set(seed)
    frame = pd.DataFrame({"image_id": range(VALIDATION_PROMPTS), "id": range(1000, 1000 + VALIDATION_PROMPTS), "caption": captions})
    frame.to_csv(out_dir / TSV, sep="\t", index=False)


def generate_stats(out_dir: Path, seed: int) -> None:
    """FID statistics of the validation images under the stand-in FID encoder."""
    out_dir.mkdir(parents=True, exist_ok=True)
    images, _ = validation_set(seed)
    encoder = standins.train_fid_encoder(seed)
    with torch.no_grad():
        features = encoder.features(torch.from_numpy(images)).double().numpy()
    mu, sigma = metrics.statistics(features)
    np.savez_compressed(out_dir / STATS, mu=mu, sigma=sigma)


def generate_checkpoint(out_dir: Path, seed: int) -> None:
    """SD checkpoint stand-in: the first stage and the conditioning text encoder."""
    out_dir.mkdir(parents=True, exist_ok=True)
    standins.train_vae(seed).save_pretrained(out_dir / "first_stage", safe_serialization=True)
    model, tokenizer = standins.train_clip(seed)
    from transformers import CLIPTextModel

    text = CLIPTextModel(model.config.text_config)
    text.load_state_dict({k.removeprefix("text_model."): v for k, v in model.state_dict().items() if k.startswith("text_model.")}, strict=True)
    text.save_pretrained(out_dir / "cond_stage", safe_serialization=True)
    tokenizer.save_pretrained(out_dir / "cond_stage")


def generate_inception(out_dir: Path, seed: int) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    standins.save_fid_encoder(standins.train_fid_encoder(seed), out_dir / standins.STANDIN_FID_FILE)


def generate_clip(out_dir: Path, seed: int) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer = standins.train_clip(seed)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    (out_dir / "STANDIN").write_text("CLIPModel trained by mlperf_wf on the generated shapes; not OpenCLIP ViT-H-14\n")
