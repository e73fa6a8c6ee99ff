"""Tiny-scale flux1 trainer: a diffusers FluxTransformer2DModel trained with rectified flow on the prepared encodings.

It follows the reference's ``FluxTrainer`` (T: = torchtitan/experiments/flux/ at 9603aa83):

- data: the prepared ``cc12m_preprocessed``/``coco_preprocessed`` folders opened with ``datasets.load_from_disk`` and
  the two empty-encoding files (``encodings.py``); a caption is dropped (replaced by the empty encodings) with
  probability ``caption_dropout`` per training sample (T:dataset/flux_dataset.py:353-365, T:train.py:236-243);
- latents: a sample of the stored posterior, ``mean + exp(logvar / 2) * eps``, then ``(z - shift) * scale``
  (T:model/autoencoder_utils.py, T:train.py:231-234), packed 2 x 2 into tokens with (0, row, column) image ids and
  zero text ids (T:utils.py pack_latents / create_position_encoding_for_latents, T:train.py:276-287);
- training: t ~ U(0, 1), x_t = (1 - t) x + t n, the model predicts n - x, MSE (T:train.py:270-302), AdamW with
  clipping 1.0 and a constant learning rate;
- validation: every sample of the held-out set at its own timestep t = timestep / 8 (T:train.py:397-401), the
  per-sample MSE averaged over the sample's elements and summed, divided by the number of samples (T:train.py:427-430,
  598): with the same count per timestep this is the mean of the 8 per-timestep losses (the README's algorithm).
  The reference draws the noise and the posterior sample from the global generator at each evaluation; here they come
  from a generator seeded alike at every evaluation, so successive evaluations differ only by the model.
- the run evaluates every ``eval_every_samples`` and stops at the first evaluation at or below the target
  (T:train.py:512-523); ``eval_accuracy`` (and ``averaged_validation_loss``, the key the rounds' open rules name)
  carry ``samples_count`` = samples trained (T:mlperf_logging.py:146-162).

Every mllog value is the value the loop uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from mlperf_logging.mllog import constants

from mlperf_wf.benchmarks.flux1 import encodings
from mlperf_wf.benchmarks.flux1.hyperparameters import Hyperparameters
from mlperf_wf.errors import UserError
from mlperf_wf.run.harness import TinyRun

EVAL_NOISE_SEED = 29_696
"""Seed of the validation noise and posterior samples, the same at every evaluation."""


@dataclass
class Split:
    """One split decoded into tensors (float32; the stored values are bfloat16)."""

    t5: torch.Tensor
    clip: torch.Tensor
    mean: torch.Tensor
    logvar: torch.Tensor
    timestep: torch.Tensor | None

    def __len__(self) -> int:
        return len(self.mean)


def load_split(folder: Path, with_timesteps: bool) -> Split:
    table = encodings.load_folder(folder)
    columns = {name: torch.stack([encodings.deserialize(cell, name) for cell in table[name]]).float() for name in encodings.ARRAY_COLUMNS}
    timestep = torch.tensor(table["timestep"], dtype=torch.float32) if with_timesteps else None
    return Split(columns["t5_encodings"], columns["clip_encodings"], columns["mean"], columns["logvar"], timestep)


def load_empty(folder: Path) -> tuple[torch.Tensor, torch.Tensor]:
    t5, clip = encodings.load_empty(folder)
    return torch.from_numpy(t5).float(), torch.from_numpy(clip).float()


def build_model(latent_channels: int, text_width: int, hp: Hyperparameters) -> torch.nn.Module:
    """FLUX.1's transformer (diffusers' implementation of the BFL model torchtitan reimplements), at tiny width."""
    from diffusers import FluxTransformer2DModel

    return FluxTransformer2DModel(
        patch_size=1,
        in_channels=latent_channels * 4,  # 2 x 2 packed latents, as FLUX.1's 64 = 16 x 4
        num_layers=hp.double_blocks,
        num_single_layers=hp.single_blocks,
        attention_head_dim=hp.head_dim,
        num_attention_heads=hp.heads,
        joint_attention_dim=text_width,
        pooled_projection_dim=text_width,
        guidance_embeds=False,  # schnell has no guidance embedding
        axes_dims_rope=hp.rope_axes(),
    )


def pack(latents: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (B, H/2 * W/2, C * 4): einops ``b c (h ph) (w pw) -> b (h w) (c ph pw)``, as T:utils.py pack_latents."""
    b, c, h, w = latents.shape
    return latents.view(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5).reshape(b, (h // 2) * (w // 2), c * 4)


def image_ids(height: int, width: int) -> torch.Tensor:
    """(0, row, column) per packed token (T:utils.py create_position_encoding_for_latents)."""
    ids = torch.zeros(height // 2, width // 2, 3)
    ids[..., 1] = torch.arange(height // 2)[:, None]
    ids[..., 2] = torch.arange(width // 2)[None, :]
    return ids.reshape(-1, 3)


def scaled_latents(mean: torch.Tensor, logvar: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A posterior sample, shifted and scaled as the reference's autoencoder latents."""
    sample = mean + torch.exp(0.5 * logvar) * torch.randn(mean.shape, generator=generator)
    return (sample - encodings.AUTOENCODER_SHIFT) * encodings.AUTOENCODER_SCALE


def per_sample_loss(model, latents: torch.Tensor, noise: torch.Tensor, t: torch.Tensor, t5: torch.Tensor, clip: torch.Tensor) -> torch.Tensor:
    """Rectified-flow MSE of each sample: x_t = (1 - t) x + t n, target n - x."""
    sigma = t.view(-1, 1, 1, 1)
    noisy = (1 - sigma) * latents + sigma * noise
    height, width = latents.shape[-2:]
    prediction = model(
        hidden_states=pack(noisy),
        encoder_hidden_states=t5,
        pooled_projections=clip,
        timestep=t,  # diffusers scales by 1000 inside, as FLUX's timestep embedding
        img_ids=image_ids(height, width),
        txt_ids=torch.zeros(t5.shape[1], 3),
    ).sample
    return ((prediction - pack(noise - latents)) ** 2).mean(dim=(1, 2))


def validation_loss(model, validation: Split, batch_size: int) -> float:
    """The reference's validation loss: each sample at t = timestep / 8, summed per-sample MSE over the sample count."""
    generator = torch.Generator().manual_seed(EVAL_NOISE_SEED)
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for start in range(0, len(validation), batch_size):
            part = slice(start, start + batch_size)
            latents = scaled_latents(validation.mean[part], validation.logvar[part], generator)
            noise = torch.randn(latents.shape, generator=generator)
            t = validation.timestep[part] / encodings.TIMESTEPS
            total += float(per_sample_loss(model, latents, noise, t, validation.t5[part], validation.clip[part]).sum())
            count += len(latents)
    model.train()
    return total / count


def check_shapes(train: Split, validation: Split, empty: tuple[torch.Tensor, torch.Tensor]) -> None:
    if train.mean.shape[1:] != validation.mean.shape[1:] or train.t5.shape[1:] != validation.t5.shape[1:] or empty[0].shape != train.t5.shape[1:]:
        raise UserError(
            f"flux1: training latents {tuple(train.mean.shape[1:])} / T5 {tuple(train.t5.shape[1:])}, validation {tuple(validation.mean.shape[1:])} / "
            f"{tuple(validation.t5.shape[1:])} and empty T5 {tuple(empty[0].shape)} must agree"
        )


def train(run: TinyRun, hp: Hyperparameters, shuffle_captions: bool = False) -> dict:
    """Run to the target (or ``max_train_samples``). ``shuffle_captions`` (tests only) pairs every training image with a
    random other sample's captions: the control that shows the loss level comes from the prompt."""
    from mlperf_wf.benchmarks.flux1 import tiny_world

    torch.manual_seed(run.spec.seed)
    model = build_model(tiny_world.LATENT_CHANNELS, tiny_world.TEXT_WIDTH, hp)
    run.config_unsharded(model)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=hp.learning_rate, betas=(hp.adam_beta1, hp.adam_beta2), eps=hp.adam_epsilon, weight_decay=hp.weight_decay
    )
    run.begin()
    data = run.spec.data_dir
    train_split = load_split(data / encodings.TRAIN_FOLDER, with_timesteps=False)
    validation = load_split(data / encodings.VALIDATION_FOLDER, with_timesteps=True)
    empty_t5, empty_clip = load_empty(data / encodings.EMPTY_FOLDER)
    check_shapes(train_split, validation, (empty_t5, empty_clip))
    if train_split.mean.shape[1] != tiny_world.LATENT_CHANNELS or train_split.t5.shape[2] != tiny_world.TEXT_WIDTH:
        raise UserError(
            f"flux1: the tiny model takes {tiny_world.LATENT_CHANNELS} latent channels and {tiny_world.TEXT_WIDTH}-wide text, "
            f"got {train_split.mean.shape[1]} and {train_split.t5.shape[2]}"
        )
    run.event(constants.TRAIN_SAMPLES, len(train_split))
    run.event(constants.EVAL_SAMPLES, len(validation))

    generator = torch.Generator().manual_seed(run.spec.seed)
    order = torch.randperm(len(train_split), generator=generator)
    captions = torch.randperm(len(train_split), generator=generator) if shuffle_captions else torch.arange(len(train_split))
    position, samples, history = 0, 0, []
    status, loss_value = constants.ABORTED, None
    while samples < hp.max_train_samples:
        run.block_start(samples_count=samples)
        for _ in range(hp.eval_every_samples // hp.global_batch_size):
            if position + hp.global_batch_size > len(order):  # the reference loops over its data (infinite=True)
                order, position = torch.randperm(len(train_split), generator=generator), 0
            index = order[position : position + hp.global_batch_size]
            position += hp.global_batch_size
            t5, clip = train_split.t5[captions[index]].clone(), train_split.clip[captions[index]].clone()
            dropped = torch.rand(len(index), generator=generator) < hp.caption_dropout
            t5[dropped], clip[dropped] = empty_t5, empty_clip
            latents = scaled_latents(train_split.mean[index], train_split.logvar[index], generator)
            noise = torch.randn(latents.shape, generator=generator)
            t = torch.rand(len(index), generator=generator)
            loss = per_sample_loss(model, latents, noise, t, t5, clip).mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), hp.gradient_clip_norm)
            optimizer.step()
            samples += len(index)
        run.block_stop(samples_count=samples)
        run.eval_start(samples_count=samples)
        loss_value = validation_loss(model, validation, hp.eval_batch_size)
        run.event("averaged_validation_loss", loss_value, samples_count=samples)
        run.eval_result(loss_value, samples_count=samples)
        history.append({"samples_count": samples, "eval_accuracy": loss_value, "seconds": run.seconds})
        if run.spec.reached(loss_value):
            status = constants.SUCCESS
            break
    run.finish(status, samples_count=samples)
    return {"status": status, "samples_count": samples, "eval_accuracy": loss_value, "seconds": run.seconds, "history": history}
