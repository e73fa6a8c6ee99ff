"""The preprocessed-encoding layout the flux1 reference reads, in one place for the generator, the preparation and
the trainer.

The reference (torchtitan's ``experiments/flux`` on the ``mlperf-training-flux.1`` branch, pinned in
``benchmark.yaml``; T: = ``torchtitan/experiments/flux/`` at 9603aa83) trains from encodings made once, offline:

- ``cc12m_preprocessed`` and ``coco_preprocessed`` are Hugging Face ``datasets`` folders written by
  ``Dataset.save_to_disk`` (T:scripts/preprocess_flux_dataset.py:29-32) and opened with ``load_from_disk``
  (T:dataset/flux_dataset.py:195-198, T:dataset/flux_mlperf.py:128-132). Columns (T:scripts/preprocess_flux_dataset.py:40-49):
  ``__key__`` string, ``t5_encodings``/``clip_encodings``/``mean``/``logvar`` binary, ``timestep`` int32 (null in
  CC12M, 0-7 in COCO, ``np.arange(n) % 8``: T:scripts/coco_to_webdataset.py:129).
- Each binary cell is one sample's array saved with ``np.save`` as the uint16 view of bfloat16
  (T:scripts/preprocess_flux_dataset.py:157-170), read back with ``view(torch.bfloat16)`` (T:dataset/flux_dataset.py:131-137).
  Shapes at full scale: T5 (256, 4096), CLIP pooled (768,), the autoencoder's posterior mean/logvar (16, 32, 32).
- ``empty_encodings/t5_empty.npy`` and ``clip_empty.npy``: float16 arrays with a leading batch of 1
  (T:scripts/save_empty_encodings.py:31-38), the encodings of the empty prompt that replace a dropped caption
  (classifier-free guidance, T:train.py:148-156,236-243).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from mlperf_wf.errors import UserError

TRAIN_FOLDER = "cc12m_preprocessed"
"""The reference's default training path ``/dataset/cc12m_preprocessed`` (T:dataset/flux_dataset.py:195-196)."""
VALIDATION_FOLDER = "coco_preprocessed"
"""The reference's default validation path ``/dataset/coco_preprocessed`` (T:dataset/flux_mlperf.py:128-129)."""
EMPTY_FOLDER = "empty_encodings"
"""``encoder.empty_encodings_path = "/dataset/empty_encodings"`` (T:train_configs/flux_schnell_mlperf_preprocessed.toml)."""
EMPTY_FILES = ("t5_empty.npy", "clip_empty.npy")
"""The two files the trainer loads from it (T:train.py:148-156)."""
ARRAY_COLUMNS = ("t5_encodings", "clip_encodings", "mean", "logvar")
"""Binary columns: one bf16-as-uint16 ``.npy`` per cell."""
COLUMNS = ("__key__", *ARRAY_COLUMNS, "timestep")
"""Every column of the preprocessed folders, in the reference's schema order."""
TIMESTEPS = 8
"""Validation timesteps: sample i is evaluated at t = timestep / 8 with timestep in 0..7 (T:train.py:399)."""
AUTOENCODER_SHIFT = 0.1159
"""``encoder.autoencoder_shift``: latent = (sample - shift) * scale (T:train.py:231-234, the preprocessed toml)."""
AUTOENCODER_SCALE = 0.3611
"""``encoder.autoencoder_scale``."""


def serialize(array: np.ndarray) -> bytes:
    """One cell: ``array`` as bfloat16, saved by ``np.save`` as its uint16 view (the reference's serializer)."""
    import torch

    buffer = io.BytesIO()
    np.save(buffer, torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(torch.bfloat16).view(torch.uint16).numpy())
    return buffer.getvalue()


def deserialize(cell: bytes, column: str = "cell"):
    """A cell back as a bfloat16 torch tensor; a cell that is not a uint16 ``.npy`` is one clear error."""
    import torch

    try:
        raw = np.load(io.BytesIO(cell), allow_pickle=False)
    except (ValueError, OSError) as err:
        raise UserError(f"{column}: not a .npy array ({err})") from None
    if raw.dtype != np.uint16:
        raise UserError(f"{column}: dtype {raw.dtype}; the reference stores bfloat16 as its uint16 view")
    return torch.from_numpy(raw).view(torch.bfloat16)


def save_folder(rows: dict[str, list], out_dir: Path, shards: int = 1) -> list[Path]:
    """Write ``rows`` (column -> values) as a ``save_to_disk`` folder with the reference's schema."""
    import datasets

    datasets.disable_progress_bars()
    features = datasets.Features(
        {
            "__key__": datasets.Value("string"),
            **{name: datasets.Value("binary") for name in ARRAY_COLUMNS},
            "timestep": datasets.Value("int32"),
        }
    )
    datasets.Dataset.from_dict({name: rows[name] for name in COLUMNS}, features=features).save_to_disk(str(out_dir), num_shards=shards)
    return sorted(p for p in out_dir.rglob("*") if p.is_file())


def load_folder(folder: Path):
    """``datasets.load_from_disk`` of a preprocessed folder, as the reference opens it; a folder that is not one, or that
    lacks a column, is one clear error."""
    import datasets

    datasets.disable_progress_bars()
    try:
        table = datasets.load_from_disk(str(folder))
    except (FileNotFoundError, ValueError) as err:
        raise UserError(f"{folder}: not a datasets save_to_disk folder ({err})") from None
    missing = [name for name in COLUMNS if name not in table.column_names]
    if missing:
        raise UserError(f"{folder}: lacks column {missing[0]}; the reference's preprocessed schema has {', '.join(COLUMNS)}")
    return table


def load_empty(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """(t5, clip) empty encodings, each without its batch axis, as the reference indexes ``[0]`` (T:train.py:149-156)."""
    arrays = []
    for name in EMPTY_FILES:
        path = folder / name
        if not path.is_file():
            raise UserError(f"{path}: missing; the empty-encodings dataset holds {' and '.join(EMPTY_FILES)}")
        array = np.load(path, allow_pickle=False)
        if array.dtype != np.float16 or array.shape[0] != 1:
            raise UserError(f"{path}: dtype {array.dtype}, shape {array.shape}; the reference saves float16 with a leading batch of 1")
        arrays.append(array[0])
    return arrays[0], arrays[1]
