"""The seeded stand-in world behind flux1's three tiny datasets (prompts, their encodings and the latents they describe),
and the three catalog entries' generators (``generate_cc12m``, ``generate_coco``, ``generate_empty_encodings``).

The real data is CC12M/COCO images and captions, encoded offline by the frozen T5-XXL, CLIP-L and the FLUX.1
autoencoder. The stand-in keeps what the benchmark measures and the published layout (``encodings.py``): a caption
is one of ``PROMPTS`` prompts, encoded as a fixed random ``TEXT_TOKENS`` x ``TEXT_WIDTH`` "T5" sequence and a
``TEXT_WIDTH`` "CLIP" vector plus a little per-caption variation; the image's autoencoder posterior is a
``LATENT_CHANNELS`` x ``LATENT_SIZE``² mean and log-variance, stored unscaled as the real VAE's (the trainer applies
the reference's shift 0.1159 and scale 0.3611).

How hard, and why (``../shared/reference/tiny-scale-notes.md`` §4): the scaled latent is a smooth pattern of the
prompt (unit variance) plus ``BASES`` shared patterns with per-image amplitudes (variance share about 8 %), plus a
per-image texture and the posterior noise the trainer samples from ``logvar`` (together about 0.3 %, the part no model
can predict). The rectified-flow loss on the 8-point grid then has a floor near 0.3; an untrained model scores about
2.3, and the target 0.586 is reached only by learning which pattern each prompt describes and the shared structure
(the t = 7/8 term, where x_t is mostly noise, falls from ~1.3 to ~0.35 only with the prompt). The prompts,
patterns and empty-prompt encodings come from ``WORLD_SEED``, shared by every split; each dataset's own seed draws
its captions, amplitudes and textures, so the validation split holds images the training split never shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlperf_wf.benchmarks.flux1 import encodings

CC12M_SAMPLES = 4096
"""Training samples of ``flux1_cc12m_preprocessed`` (the real subset: 1,099,776); the reference loops over them
(``infinite=True``)."""
COCO_SAMPLES = 512
"""Validation samples of ``flux1_coco_preprocessed``, 64 per timestep (the real subset: 29,696, 3,712 per timestep)."""
WORLD_SEED = 5400
"""Seed of the prompts, their patterns and the empty-prompt encodings (the same for every split)."""
PROMPTS = 8
"""Distinct prompts (captions) in the world."""
TEXT_TOKENS = 8
"""Tokens of the T5 stand-in encoding (reference: 256, ``max_t5_encoding_len``)."""
TEXT_WIDTH = 64
"""Width of both text encodings (reference: T5 4096, CLIP 768)."""
LATENT_CHANNELS = 16
"""Autoencoder latent channels (the FLUX.1 autoencoder's 16)."""
LATENT_SIZE = 8
"""Latent height and width (reference: 32 for 256-pixel images)."""
BASES = 4
"""Shared patterns whose per-image amplitudes vary within a prompt."""
AMPLITUDE_STD = 0.1
"""Standard deviation of each amplitude."""
TEXTURE_STD = 0.03
"""Per-element iid texture in the posterior mean (scaled units)."""
POSTERIOR_STD = 0.04
"""Posterior standard deviation in scaled units (``logvar`` = log of its unscaled square, with a little jitter)."""
CAPTION_STD = 0.1
"""Per-caption variation added to the prompt's encodings."""


@dataclass(frozen=True)
class World:
    """The fixed part: prompt encodings, their latent patterns, the shared bases and the empty-prompt encodings."""

    t5: np.ndarray
    clip: np.ndarray
    patterns: np.ndarray
    bases: np.ndarray
    empty_t5: np.ndarray
    empty_clip: np.ndarray


def _smooth(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` smooth latent patterns (three random 2-D sinusoids per channel), scaled to unit variance together."""
    y, x = np.meshgrid(np.arange(LATENT_SIZE), np.arange(LATENT_SIZE), indexing="ij")
    out = np.zeros((count, LATENT_CHANNELS, LATENT_SIZE, LATENT_SIZE))
    for _ in range(3):
        fy, fx, phase = (rng.uniform(0, b, (count, LATENT_CHANNELS, 1, 1)) for b in (1.5, 1.5, 2 * np.pi))
        out += np.sin(fy * y + fx * x + phase)
    return out / out.std()


def world() -> World:
    rng = np.random.default_rng(WORLD_SEED)
    return World(
        t5=rng.standard_normal((PROMPTS, TEXT_TOKENS, TEXT_WIDTH)),
        clip=rng.standard_normal((PROMPTS, TEXT_WIDTH)),
        patterns=_smooth(rng, PROMPTS),
        bases=_smooth(rng, BASES),
        empty_t5=rng.standard_normal((TEXT_TOKENS, TEXT_WIDTH)),
        empty_clip=rng.standard_normal(TEXT_WIDTH),
    )


def scaled_latent_mean(w: World, prompts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Posterior means in the scaled latent space: the prompt's pattern, the shared bases, the texture (about unit variance)."""
    amplitudes = rng.normal(0.0, AMPLITUDE_STD, (len(prompts), BASES, 1, 1, 1))
    mean = w.patterns[prompts] + (amplitudes * w.bases[None]).sum(1)
    mean += rng.normal(0.0, TEXTURE_STD, mean.shape)
    return mean / np.sqrt(1.0 + BASES * AMPLITUDE_STD**2)


def split(samples: int, seed: int, timesteps: bool, key_prefix: str) -> dict[str, list]:
    """One split's rows in the reference's schema: ``timestep`` is ``i % 8`` in validation (as coco_to_webdataset.py), null in training."""
    w = world()
    rng = np.random.default_rng(seed)
    prompts = rng.integers(0, PROMPTS, samples)
    t5 = w.t5[prompts] + rng.normal(0.0, CAPTION_STD, (samples, TEXT_TOKENS, TEXT_WIDTH))
    clip = w.clip[prompts] + rng.normal(0.0, CAPTION_STD, (samples, TEXT_WIDTH))
    mean = scaled_latent_mean(w, prompts, rng) / encodings.AUTOENCODER_SCALE + encodings.AUTOENCODER_SHIFT
    logvar = 2 * np.log(POSTERIOR_STD / encodings.AUTOENCODER_SCALE) + rng.normal(0.0, 0.1, mean.shape)
    return {
        "__key__": [f"{key_prefix}{i:08d}" for i in range(samples)],
        "t5_encodings": [encodings.serialize(a) for a in t5],
        "clip_encodings": [encodings.serialize(a) for a in clip],
        "mean": [encodings.serialize(a) for a in mean],
        "logvar": [encodings.serialize(a) for a in logvar],
        "timestep": [i % encodings.TIMESTEPS for i in range(samples)] if timesteps else [None] * samples,
    }


def write_empty(out_dir: Path) -> list[Path]:
    """``t5_empty.npy`` and ``clip_empty.npy``: float16 with a batch of 1, as save_empty_encodings.py writes them."""
    w = world()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / name for name in encodings.EMPTY_FILES]
    np.save(paths[0], w.empty_t5[None].astype(np.float16))
    np.save(paths[1], w.empty_clip[None].astype(np.float16))
    return paths


def generate_cc12m(out_dir: Path, seed: int) -> list[Path]:
    """``flux1_cc12m_preprocessed``: the training encodings, a ``save_to_disk`` folder in the reference's schema."""
    return encodings.save_folder(split(CC12M_SAMPLES, seed, timesteps=False, key_prefix="cc12m-"), out_dir, shards=2)


def generate_coco(out_dir: Path, seed: int) -> list[Path]:
    """``flux1_coco_preprocessed``: the validation encodings with their timestep column (``i % 8``), drawn with their
    own seed."""
    return encodings.save_folder(split(COCO_SAMPLES, seed, timesteps=True, key_prefix="coco-"), out_dir)


def generate_empty_encodings(out_dir: Path, seed: int) -> list[Path]:
    """``flux1_empty_encodings``: the empty prompt's T5 and CLIP encodings, float16 with a batch of 1 as the reference's
    save_empty_encodings.py writes them."""
    del seed  # the empty prompt belongs to the world, shared by every split
    return write_empty(out_dir)
