"""The starting policy converted to Megatron-Bridge's format once, shared read-only by every run (tiny stand-in).

NeMo-RL at the pinned commit converts the Hugging Face checkpoint on a run's first use: each Megatron policy worker
calls ``validate_model_paths`` (nemo_rl/models/megatron/setup.py:405-419), which looks for
``$NRL_MEGATRON_CHECKPOINT_DIR/model_<policy.model_name with '/' as '_'>/iter_0000000`` and, when it is missing,
``handle_model_import`` (:1390) imports the 397B model from Hugging Face into that folder, inside the run's timed
initialisation. The reference avoids that by converting once before its runs: ``docker/mlperf/data_scripts/
convert_ckpt.sh`` submits its own launcher (run.sub) for one step (``MAX_STEPS=1``) on the full allocation, which
leaves the conversion in ``NRL_MEGATRON_CHECKPOINT_DIR`` for every later run.

Here the conversion is the dataset ``qwen35_397b_megatron_checkpoint`` (this folder's datasets/, protocol ``made_in_image``):
the workflow's one-off job of the image makes it once the same way (``full.made_in_image`` in benchmark.yaml: the run's
launch with ``++grpo.max_num_steps=1`` and the folder read-write), and every run mounts it read-only at
``/inputs/nemo_gym/mcore_ckpt``. Its folder name
depends on where the run sees the Hugging Face checkpoint (``CONTAINER_HF_CKPT_PATH=/inputs/hf_checkpoint``):
``model__inputs_hf_checkpoint`` (:data:`CONVERTED_FOLDER`).

Tiny tier: the tiny policy is trained in the Hugging Face format it is published in, so there is nothing to convert;
the stand-in holds the converted folder's marker files (:data:`REQUIRED_FILES`, tiny contents), and the tiny trainer
refuses to start without them (:func:`check`), as a full-scale run must not start converting.
"""

from __future__ import annotations

import json
from pathlib import Path

from mlperf_wf.errors import UserError

CONTAINER_HF_CKPT_PATH = "/inputs/hf_checkpoint"
"""Where the runs mount the Hugging Face checkpoint (benchmark.yaml ``full.mounts.checkpoint`` and ``full.env``)."""
CONVERTED_FOLDER = "model_" + CONTAINER_HF_CKPT_PATH.replace("/", "_")
"""setup.py:411-412: ``model_`` + the checkpoint's path with ``/`` as ``_`` (the path exists in the container)."""
ITERATION_FOLDER = "iter_0000000"
"""setup.py:418: the conversion counts as done when this folder exists."""
REQUIRED_FILES = ("run_config.yaml", "metadata.json", ".metadata", "common.pt")
"""What every Megatron-Bridge ``torch_dist`` save holds in its iteration folder besides the ``__<rank>_<n>.distcp``
shards (whose count follows the saving ranks): the run config NeMo-RL reads (setup.py:450-452), megatron-core's
format marker, torch.distributed.checkpoint's index and the common state."""


def required_paths() -> list[str]:
    """The files the conversion must have left, relative to the dataset folder."""
    return [f"{CONVERTED_FOLDER}/{ITERATION_FOLDER}/{name}" for name in REQUIRED_FILES]


def check(folder: Path) -> None:
    """The conversion is complete in ``folder`` (the dataset), or one clear error naming the first missing file."""
    for relative in required_paths():
        if not (folder / relative).is_file():
            raise UserError(
                f"{folder / relative}: missing; the converted Megatron checkpoint must hold {', '.join(required_paths())} "
                "(the workflow's make_in_image job converts it once before the runs)"
            )


def generate(out_dir: Path, seed: int) -> list[Path]:
    """The tiny stand-in: the converted folder's marker files (tiny contents naming what they stand for)."""
    folder = out_dir / CONVERTED_FOLDER / ITERATION_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in REQUIRED_FILES:
        path = folder / name
        path.write_text(json.dumps({"tiny_stand_in_for": name, "converted_from": CONTAINER_HF_CKPT_PATH, "seed": seed}) + "\n")
        written.append(path)
    return written
