"""FID and CLIP score as the reference computes them (ldm/modules/fid/fid_score.py, ldm/models/clip_encoder.py,
ddpm.py:606-651), with the encoders read from the run's metric-weight inputs.

* FID: the Fréchet distance between Gaussians fitted to encoder features of the generated images and the
  published statistics (``mu``, ``sigma`` of ``val2014_30k_stats.npz``):
  ``|mu1 - mu2|^2 + Tr(S1) + Tr(S2) - 2 Tr(sqrtm(S1 S2))``, with scipy's ``linalg.sqrtm``, the ``eps`` offset
  when the product is singular and the imaginary-part check, as pytorch-fid.
* CLIP score: the mean over prompts of the cosine similarity between the L2-normalised image and caption
  embeddings (``image_features @ text_features.T`` of unit vectors), as ``CLIPEncoder.get_clip_score``.

The ``inception`` input holds either the published ``pt_inception-2015-12-05-6726825d.pth`` (then the FID
Inception-v3 of ``inception.py`` gives the features) or the project's ``standin_fid_encoder.pth``; the ``clip``
input is a transformers ``CLIPModel`` folder (the Hugging Face form of OpenCLIP ViT-H-14 laion2b, or the stand-in).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy import linalg

from mlperf_wf.benchmarks.stable_diffusion import inception, standins
from mlperf_wf.errors import UserError

PUBLISHED_INCEPTION_FILE = "pt_inception-2015-12-05-6726825d.pth"


def frechet_distance(mu1: np.ndarray, sigma1: np.ndarray, mu2: np.ndarray, sigma2: np.ndarray, eps: float = 1e-6) -> float:
    """pytorch-fid's ``calculate_frechet_distance`` (the formula the reference calls)."""
    mu1, mu2 = np.atleast_1d(mu1), np.atleast_1d(mu2)
    sigma1, sigma2 = np.atleast_2d(sigma1), np.atleast_2d(sigma2)
    if mu1.shape != mu2.shape or sigma1.shape != sigma2.shape:
        raise UserError(f"FID statistics differ in shape: mu {mu1.shape} vs {mu2.shape}, sigma {sigma1.shape} vs {sigma2.shape}")
    diff = mu1 - mu2
    with warnings.catch_warnings():  # pytorch-fid's disp=False, without SciPy's deprecated argument: a singular product
        warnings.simplefilter("ignore", linalg.LinAlgWarning)  # gives a non-finite root, retried with the offset below
        covmean = linalg.sqrtm(sigma1.dot(sigma2))
    if not np.isfinite(covmean).all():
        offset = np.eye(sigma1.shape[0]) * eps
        covmean = linalg.sqrtm((sigma1 + offset).dot(sigma2 + offset))
    if np.iscomplexobj(covmean):
        if not np.allclose(np.diagonal(covmean).imag, 0, atol=1e-3):
            raise ValueError(f"FID: imaginary component {np.max(np.abs(covmean.imag))}")
        covmean = covmean.real
    return float(diff.dot(diff) + np.trace(sigma1) + np.trace(sigma2) - 2 * np.trace(covmean))


def statistics(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``mu`` and ``sigma`` (rowvar=False) of activations, as ``calculate_activation_statistics``."""
    return np.mean(features, axis=0), np.cov(features, rowvar=False)


class FeatureEncoder:
    """The FID feature extractor of an ``inception`` input folder."""

    def __init__(self, folder: Path) -> None:
        published = folder / PUBLISHED_INCEPTION_FILE
        standin = folder / standins.STANDIN_FID_FILE
        if published.is_file():
            self.model: torch.nn.Module = inception.load(published)
            self.kind = "published FID Inception-v3 layout"
        elif standin.is_file():
            payload = torch.load(standin, map_location="cpu", weights_only=True)
            if not isinstance(payload, dict) or payload.get("standin") != standins.STANDIN_FID_KIND:
                raise UserError(f"{standin}: not a stand-in FID encoder written by mlperf_wf")
            self.model = standins.load_fid_encoder(payload)
            self.kind = "stand-in"
        else:
            raise UserError(f"{folder}: neither {PUBLISHED_INCEPTION_FILE} (the reference's Inception weights) nor {standins.STANDIN_FID_FILE}")

    @torch.no_grad()
    def features(self, images: torch.Tensor, batch: int = 256) -> np.ndarray:
        return torch.cat([self.model.features(images[i : i + batch]) for i in range(0, len(images), batch)]).double().numpy()


@dataclass
class ClipScorer:
    """A transformers CLIPModel folder with its tokenizer: image-caption cosine similarity."""

    model: object
    tokenizer: object
    kind: str

    @classmethod
    def load(cls, folder: Path) -> ClipScorer:
        from transformers import AutoTokenizer, CLIPModel

        if not (folder / "config.json").is_file():
            raise UserError(f"{folder}: no config.json; the clip input is a transformers CLIPModel folder (config, weights, tokenizer)")
        model = CLIPModel.from_pretrained(folder).eval()
        kind = "stand-in" if (folder / "STANDIN").is_file() else "published"
        return cls(model, AutoTokenizer.from_pretrained(folder), kind)

    @torch.no_grad()
    def scores(self, images: torch.Tensor, captions: list[str]) -> np.ndarray:
        """One cosine similarity per (image, caption) pair."""
        side = self.model.config.vision_config.image_size
        image = self.model.get_image_features(pixel_values=standins.clip_pixels(images, side))
        tokens = self.tokenizer(captions, padding="max_length", truncation=True, max_length=self.tokenizer.model_max_length, return_tensors="pt")
        text = self.model.get_text_features(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask)
        image, text = _pooled(image), _pooled(text)
        image = image / image.norm(dim=-1, keepdim=True)
        text = text / text.norm(dim=-1, keepdim=True)
        return (image * text).sum(-1).double().numpy()


def _pooled(output) -> torch.Tensor:
    # transformers 5 returns a model output whose pooler_output is the projected embedding; 4.x a tensor.
    return output if isinstance(output, torch.Tensor) else output.pooler_output


def load_stats(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``mu`` and ``sigma`` of a published-layout statistics file (``val2014_30k_stats.npz``)."""
    try:
        with np.load(path) as stats:
            return stats["mu"][:], stats["sigma"][:]
    except (OSError, KeyError, ValueError) as err:
        raise UserError(f"{path}: not an FID statistics file with mu and sigma ({err})") from None
