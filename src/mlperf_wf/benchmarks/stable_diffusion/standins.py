"""The networks the tiny tier trains on its own generated images, in place of those the reference downloads.

* ``first stage``: a diffusers ``AutoencoderKL`` (the reference's SD-2 VAE from ``512-base-ema.ckpt`` is an
  AutoencoderKL too) that writes the latent moments and decodes generated latents into images.
* ``CLIP stand-in``: a transformers ``CLIPModel`` trained contrastively on the generated image-caption pairs.
  Its text tower conditions the UNet (the reference conditions on OpenCLIP ViT-H's text tower, penultimate
  layer) and the whole model scores image-caption agreement (the reference's ViT-H-14 CLIP score).
* ``FID stand-in``: a small CNN classifier of the generated (colour, shape) classes whose penultimate
  activations replace Inception-v3's pool3 features in the Fréchet distance.

Each is trained with a fixed seed on one thread, so every catalog generator that needs it rebuilds the
same weights. They are stand-ins: their scores are not the MLPerf FID/CLIP (benchmark README).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from mlperf_wf.benchmarks.stable_diffusion import shapes

PAD, EOS, BOS = "<pad>", "<eos>", "<bos>"
MAX_TOKENS = 8
"""Caption tokens including BOS/EOS (the reference pads to OpenCLIP's 77)."""
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
"""OpenCLIP's image normalisation (the same for ViT-H-14 laion2b)."""
STANDIN_FID_FILE = "standin_fid_encoder.pth"
STANDIN_FID_KIND = "mlperf_wf stand-in FID encoder"


def _seeded(seed: int) -> torch.Generator:
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    return torch.Generator().manual_seed(seed)


@functools.lru_cache(maxsize=4)
def training_images(seed: int, count: int = 3072) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """The images the stand-ins learn from (a seed of their own, never the validation images)."""
    images, labels, captions = shapes.sample(np.random.default_rng(seed + 7919), count)
    return images, labels, tuple(captions)


# ---- first stage (VAE) ----


def vae_config() -> dict:
    return {
        "in_channels": 3,
        "out_channels": 3,
        "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"],
        "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D"],
        "block_out_channels": [16, 16],
        "layers_per_block": 1,
        "latent_channels": 4,
        "norm_num_groups": 8,
        "mid_block_add_attention": False,
        "sample_size": shapes.RESOLUTION,
    }


@functools.lru_cache(maxsize=2)
def train_vae(seed: int, steps: int = 200, batch: int = 32):
    """An AutoencoderKL (4 latent channels, factor 2) trained to reconstruct the generated images."""
    from diffusers import AutoencoderKL

    generator = _seeded(seed)
    images = torch.from_numpy(training_images(seed)[0])
    vae = AutoencoderKL(**vae_config())
    optimizer = torch.optim.AdamW(vae.parameters(), lr=2e-3)
    for _ in range(steps):
        x = images[torch.randint(len(images), (batch,), generator=generator)] * 2 - 1
        posterior = vae.encode(x).latent_dist
        z = posterior.mean + posterior.std * torch.randn(posterior.mean.shape, generator=generator)
        loss = functional.mse_loss(vae.decode(z).sample, x) + 1e-6 * posterior.kl().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    vae.eval()
    with torch.no_grad():
        latents = vae.encode(images[:512] * 2 - 1).latent_dist.mean
    # The reference fixes scale_factor 0.18215 for SD's VAE (1 / the std of its latents); this VAE's own.
    vae.register_to_config(scaling_factor=round(float(1.0 / latents.std()), 5))
    return vae


# ---- CLIP stand-in ----


def build_tokenizer():
    """Word-level tokenizer over the caption vocabulary (the real one is OpenCLIP's BPE)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = sorted({word for colour, shape in shapes.CLASSES for word in shapes.caption(colour, shape).split()})
    vocabulary = {PAD: 0, BOS: 1, EOS: 2, **{word: i + 3 for i, word in enumerate(words)}}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocabulary, unk_token=PAD))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(single=f"{BOS} $A {EOS}", special_tokens=[(BOS, 1), (EOS, 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token=PAD, bos_token=BOS, eos_token=EOS, model_max_length=MAX_TOKENS)


def clip_config(vocabulary: int):
    from transformers import CLIPConfig

    text = {
        "vocab_size": vocabulary,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "max_position_embeddings": MAX_TOKENS,
        "projection_dim": 32,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    vision = {
        "image_size": shapes.RESOLUTION,
        "patch_size": 4,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "projection_dim": 32,
    }
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=32)


def clip_pixels(images: torch.Tensor, image_size: int) -> torch.Tensor:
    """Images in [0, 1] as CLIP reads them: resized (bicubic) to the model's side, normalised with OpenCLIP's mean/std."""
    if images.shape[-1] != image_size:
        images = functional.interpolate(images, size=(image_size, image_size), mode="bicubic", align_corners=False).clamp(0, 1)
    mean = torch.tensor(CLIP_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CLIP_STD).view(1, 3, 1, 1)
    return (images - mean) / std


@functools.lru_cache(maxsize=2)
def train_clip(seed: int, steps: int = 300, batch: int = 128):
    """(CLIPModel, tokenizer) trained with the symmetric contrastive loss on the generated pairs."""
    from transformers import CLIPModel

    generator = _seeded(seed + 1)
    tokenizer = build_tokenizer()
    model = CLIPModel(clip_config(len(tokenizer)))
    images, _, captions = training_images(seed)
    pixels = clip_pixels(torch.from_numpy(images), shapes.RESOLUTION)
    tokens = tokenizer(list(captions), padding="max_length", max_length=MAX_TOKENS, return_tensors="pt")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        pick = torch.randint(len(pixels), (batch,), generator=generator)
        out = model(input_ids=tokens.input_ids[pick], attention_mask=tokens.attention_mask[pick], pixel_values=pixels[pick], return_loss=True)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    return model.eval(), tokenizer


# ---- FID stand-in ----


class StandInFIDEncoder(nn.Module):
    """Three conv blocks and a 64-d penultimate layer; ``features`` feed the Fréchet distance."""

    def __init__(self, feature_dim: int = 64, num_classes: int = len(shapes.CLASSES)) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(64, feature_dim), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Linear(feature_dim, num_classes)

    @property
    def feature_dim(self) -> int:
        return self.head.in_features

    def features(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[-1] != shapes.RESOLUTION:
            images = functional.interpolate(images, size=(shapes.RESOLUTION, shapes.RESOLUTION), mode="bilinear", align_corners=False)
        return self.body(images)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images))


@functools.lru_cache(maxsize=2)
def train_fid_encoder(seed: int, steps: int = 600, batch: int = 64) -> StandInFIDEncoder:
    """The stand-in classifier of the generated classes (cross-entropy, Adam)."""
    generator = _seeded(seed + 2)
    images, labels, _ = training_images(seed)
    images, labels = torch.from_numpy(images), torch.from_numpy(labels)
    model = StandInFIDEncoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        pick = torch.randint(len(images), (batch,), generator=generator)
        loss = functional.cross_entropy(model(images[pick]), labels[pick])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def save_fid_encoder(model: StandInFIDEncoder, path: Path) -> None:
    """A torch state dict whose ``standin`` entry names what it is (the published file is a bare state dict)."""
    torch.save({"standin": STANDIN_FID_KIND, "feature_dim": model.feature_dim, "state_dict": model.state_dict()}, path)


def load_fid_encoder(payload: dict) -> StandInFIDEncoder:
    model = StandInFIDEncoder(int(payload["feature_dim"]))
    model.load_state_dict(payload["state_dict"], strict=True)
    return model.eval()


def write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")
