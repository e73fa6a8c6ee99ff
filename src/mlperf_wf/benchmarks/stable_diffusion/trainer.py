"""Tiny-scale stable_diffusion trainer: a diffusers UNet2DConditionModel trained as the reference's LatentDiffusion.

As ldm/models/diffusion/ddpm.py: a latent is sampled from the stored moments (``DiagonalGaussianDistribution``:
mean + std x noise) and multiplied by the first stage's scale factor; the caption is encoded by the frozen text
encoder (the penultimate layer then the final layer norm, FrozenOpenCLIPEmbedder ``layer: penultimate``); a
timestep is drawn uniformly from the 1000 of the scaled-linear schedule and the UNet regresses the v target
(``parameterization: v``) with the mean squared error. AdamW with a linear warm-up (LambdaLinearScheduler).

Every ``eval_every_samples`` the run generates one image per validation prompt (DDIM, eta 0, classifier-free
guidance against the empty prompt), decodes it with the first stage, and logs FID and CLIP score as two
``eval_accuracy`` events with ``metric`` FID / CLIP and the same ``samples_count`` (mlperf_logging_utils.py's
``on_validation_end``; the rules aggregate them into ``aggregated_eval_accuracy``). The run stops when every
target of ``run.spec.targets`` holds. Every mllog value is the value the loop uses.
"""

from __future__ import annotations

import io
import math
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from mlperf_logging.mllog import constants
from torch.nn import functional

from mlperf_wf.benchmarks.stable_diffusion import metrics, prepare
from mlperf_wf.benchmarks.stable_diffusion.hyperparameters import Hyperparameters
from mlperf_wf.run.harness import TinyRun


@dataclass
class Corpus:
    moments: torch.Tensor
    """(N, 2 x C, h, w) float32."""
    captions: list[str]
    prompts: list[str]
    stats: tuple[np.ndarray, np.ndarray]


def load_corpus(data_dir: Path) -> Corpus:
    """Every moments tar of the prepared tree (sorted by key) and the validation prompts and statistics."""
    import pandas as pd

    moments, captions = [], []
    for path in sorted((data_dir / prepare.MOMENTS_DIR).glob("*.tar")):
        samples: dict[str, dict[str, bytes]] = {}
        with tarfile.open(path) as tar:
            for member in tar:
                if member.isfile():
                    key, _, extension = member.name.rpartition(".")
                    samples.setdefault(key, {})[extension] = tar.extractfile(member).read()
        for key in sorted(samples):
            moments.append(np.load(io.BytesIO(samples[key]["npy"]))[0])
            captions.append(samples[key]["txt"].decode())
    frame = pd.read_csv(data_dir / prepare.COCO_DIR / prepare.TSV, sep="\t", header=0)
    stats = metrics.load_stats(data_dir / prepare.COCO_DIR / prepare.STATS)
    return Corpus(torch.from_numpy(np.stack(moments)), captions, [str(c) for c in frame["caption"]], stats)


class TextEncoder:
    """The frozen conditioning encoder: penultimate hidden states, then the final layer norm."""

    def __init__(self, folder: Path) -> None:
        from transformers import AutoTokenizer, CLIPTextModel

        self.model = CLIPTextModel.from_pretrained(folder).eval().requires_grad_(False)
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self._cache: dict[str, torch.Tensor] = {}

    def _final_norm(self, hidden: torch.Tensor) -> torch.Tensor:
        inner = getattr(self.model, "text_model", self.model)  # transformers 4.x nests the tower, 5.x does not
        return inner.final_layer_norm(hidden)

    @property
    def width(self) -> int:
        return self.model.config.hidden_size

    @torch.no_grad()
    def encode(self, texts: list[str]) -> torch.Tensor:
        missing = sorted({t for t in texts if t not in self._cache})
        if missing:
            tokens = self.tokenizer(missing, padding="max_length", truncation=True, max_length=self.tokenizer.model_max_length, return_tensors="pt")
            out = self.model(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask, output_hidden_states=True)
            hidden = self._final_norm(out.hidden_states[-2])
            self._cache.update(zip(missing, hidden, strict=True))
        return torch.stack([self._cache[t] for t in texts])


def build_unet(hp: Hyperparameters, latent_channels: int, latent_side: int, context_dim: int):
    """The reference's UNet family (openaimodel.UNetModel: res blocks + linear-projection spatial transformers
    with cross-attention), scaled down: two levels instead of four."""
    from diffusers import UNet2DConditionModel
    from diffusers.models.attention_processor import AttnProcessor

    width = hp.model_channels
    unet = UNet2DConditionModel(
        sample_size=latent_side,
        in_channels=latent_channels,
        out_channels=latent_channels,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        block_out_channels=(width, 2 * width),
        layers_per_block=1,
        cross_attention_dim=context_dim,
        attention_head_dim=8,
        norm_num_groups=8,
        use_linear_projection=True,
    )
    unet.set_attn_processor(AttnProcessor())  # plain bmm attention: torch's CPU flash kernel is slower at these sizes
    return unet


def schedulers(hp: Hyperparameters):
    """(training schedule, DDIM sampler) over the reference's betas."""
    from diffusers import DDIMScheduler, DDPMScheduler

    prediction = {"v": "v_prediction", "eps": "epsilon"}[hp.parameterization]
    common = {
        "num_train_timesteps": hp.timesteps,
        "beta_start": hp.linear_start,
        "beta_end": hp.linear_end,
        "beta_schedule": "scaled_linear",
        "prediction_type": prediction,
    }
    return DDPMScheduler(**common), DDIMScheduler(**common, clip_sample=False, set_alpha_to_one=False, steps_offset=1)


@torch.no_grad()
def generate(unet, sampler, text: TextEncoder, vae, prompts: list[str], hp: Hyperparameters, generator: torch.Generator, batch: int = 256) -> torch.Tensor:
    """One image in [0, 1] per prompt: DDIM (eta 0) with classifier-free guidance, decoded by the first stage."""
    images = []
    side = unet.config.sample_size
    empty = text.encode([""])
    guided_pass = hp.guidance_scale != 1.0  # at scale 1 the guided prediction is the conditional one
    for start in range(0, len(prompts), batch):
        chunk = prompts[start : start + batch]
        context = text.encode(chunk)
        if guided_pass:
            context = torch.cat([empty.expand(len(chunk), -1, -1), context])
        latents = torch.randn((len(chunk), unet.config.in_channels, side, side), generator=generator)
        sampler.set_timesteps(hp.sampler_steps)
        for t in sampler.timesteps:
            if guided_pass:
                unconditional, conditional = unet(torch.cat([latents, latents]), t, encoder_hidden_states=context).sample.chunk(2)
                prediction = unconditional + hp.guidance_scale * (conditional - unconditional)
            else:
                prediction = unet(latents, t, encoder_hidden_states=context).sample
            latents = sampler.step(prediction, t, latents, eta=0.0).prev_sample
        decoded = vae.decode(latents / vae.config.scaling_factor).sample
        images.append(((decoded + 1) / 2).clamp(0, 1))
    return torch.cat(images)


def evaluate(unet, sampler, text, vae, encoder: metrics.FeatureEncoder, scorer: metrics.ClipScorer, corpus: Corpus, hp, generator) -> dict[str, float]:
    """FID against the published statistics and the mean CLIP score, over the first ``eval_prompts`` prompts."""
    prompts = corpus.prompts[: hp.eval_prompts]
    images = generate(unet, sampler, text, vae, prompts, hp, generator)
    mu, sigma = metrics.statistics(encoder.features(images))
    return {"FID": metrics.frechet_distance(mu, sigma, *corpus.stats), "CLIP": float(np.mean(scorer.scores(images, prompts)))}


def lr_factor(step: int, warmup_steps: int) -> float:
    """LambdaLinearScheduler with f_start 1e-6, f_max 1, f_min 1 and a cycle longer than any run."""
    if step < warmup_steps:
        return 1e-6 + (1.0 - 1e-6) * step / warmup_steps
    return 1.0


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Train to both targets (or ``max_samples``); the harness logs the preamble and hyperparameters."""
    from diffusers import AutoencoderKL

    if run.world_size > 1:
        raise ValueError("the tiny stable_diffusion trainer runs in one process")
    checkpoint = run.spec.input("checkpoint")
    vae = AutoencoderKL.from_pretrained(checkpoint / "first_stage").eval().requires_grad_(False)
    text = TextEncoder(checkpoint / "cond_stage")
    encoder = metrics.FeatureEncoder(run.spec.input("inception"))
    scorer = metrics.ClipScorer.load(run.spec.input("clip"))
    run.begin()
    corpus = load_corpus(run.spec.data_dir)
    run.event(constants.TRAIN_SAMPLES, len(corpus.captions))
    run.event(constants.EVAL_SAMPLES, min(hp.eval_prompts, len(corpus.prompts)))

    torch.manual_seed(run.spec.seed)
    generator = torch.Generator().manual_seed(run.spec.seed)
    channels = corpus.moments.shape[1] // 2
    unet = build_unet(hp, channels, corpus.moments.shape[-1], text.width)
    training, sampler = schedulers(hp)
    lr = hp.base_learning_rate * hp.global_batch_size
    optimizer = torch.optim.AdamW(unet.parameters(), lr=lr, betas=(hp.adam_beta1, hp.adam_beta2), eps=hp.adam_epsilon, weight_decay=hp.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, hp.warmup_steps))
    eval_every = max(1, math.ceil(hp.eval_every_samples / hp.global_batch_size))
    status, samples, history, scores = constants.ABORTED, 0, [], {}
    step = 0
    while samples < hp.max_samples:
        run.block_start(samples_count=samples)
        for _ in range(eval_every):
            pick = torch.randint(len(corpus.captions), (hp.global_batch_size,), generator=generator)
            mean, logvar = corpus.moments[pick].chunk(2, dim=1)
            std = torch.exp(0.5 * logvar.clamp(-30.0, 20.0))
            latents = (mean + std * torch.randn(mean.shape, generator=generator)) * vae.config.scaling_factor
            noise = torch.randn(latents.shape, generator=generator)
            t = torch.randint(0, hp.timesteps, (hp.global_batch_size,), generator=generator)
            noisy = training.add_noise(latents, noise, t)
            target = training.get_velocity(latents, noise, t) if hp.parameterization == "v" else noise
            context = text.encode([corpus.captions[i] for i in pick])
            loss = functional.mse_loss(unet(noisy, t, encoder_hidden_states=context).sample, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            step += 1
            samples += hp.global_batch_size
        run.block_stop(samples_count=samples)
        run.eval_start(samples_count=samples)
        unet.eval()
        scores = evaluate(unet, sampler, text, vae, encoder, scorer, corpus, hp, torch.Generator().manual_seed(run.spec.seed + 1))
        unet.train()
        run.eval_results(scores, samples_count=samples)
        history.append({"samples_count": samples, **scores, "loss": float(loss.detach()), "seconds": run.seconds})
        if run.spec.reached_all(scores):
            status = constants.SUCCESS
            break
    run.finish(status, samples_count=samples)
    return {"status": status, "samples_count": samples, **scores, "encoders": f"FID {encoder.kind}, CLIP {scorer.kind}", "history": history}
