"""The stable_diffusion image's patch against the real reference module (mlcommons/training aa344c7).

The reference's training entry point cannot run here: main.py imports torchvision at its first lines (and
PyTorch Lightning 1.9, open_clip, xformers, colossalai), and torchvision's CPU build breaks this project's
transformers/diffusers, so it is never installed. What the round patch changes lives in the reference's
``mlperf_logging_utils.py``, which needs only torch, mlperf-logging and Lightning's ``Callback`` base: it is
loaded unmodified from the shared reference source, with a two-class stand-in for ``lightning.pytorch``, and
driven the way main.py and Lightning drive it (submission_info with main.py:374-381's values, then the
callback's fit/validation hooks with the metrics ddpm.py logs). The same script without the hooks shows the
reference's own behaviour, so these tests fail when the patch does nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import reference_source

ROOT = Path(__file__).resolve().parents[3]
HOOKS = ROOT / "containers" / "hooks"
PATCHES = ROOT / "src/mlperf_wf/benchmarks" / "stable_diffusion" / "container" / "patches"
SUBMISSION = {"MLPERF_SUBMISSION_ORG": "Example Org", "MLPERF_SUBMISSION_PLATFORM": "example-8xH100", "MLPERF_SUBMISSION_DIVISION": "closed"}

LIGHTNING_STAND_IN = {
    "lightning/__init__.py": "",
    "lightning/pytorch/__init__.py": "from lightning.pytorch import callbacks\n",
    "lightning/pytorch/callbacks.py": "class Callback:\n    pass\n",
    "lightning/pytorch/utilities/__init__.py": "",
    "lightning/pytorch/utilities/types.py": "STEP_OUTPUT = object\n",
}

SCRIPT = """
import sys

import torch
import mlperf_logging.mllog.constants as mllog_constants

import mlperf_logging_utils
from mlperf_logging_utils import mllogger

sys.argv = ["main.py", "-m", "train"]  # as the plan runs it: main.py's default thresholds (90, 0.15)
mlperf_logging_utils.submission_info(mllogger=mllogger, submission_benchmark=mllog_constants.STABLE_DIFFUSION,
    submission_division=mllog_constants.CLOSED, submission_org="reference_implementation", submission_platform="DGX-A100",
    submission_poc_name="Ahmad Kiswani", submission_poc_email="akiswani@nvidia.com", submission_status=mllog_constants.ONPREM)


class Trainer:
    callback_metrics = {"validation/fid": torch.tensor(float(sys.argv_fid)), "validation/clip": torch.tensor(0.18)}


callback = mlperf_logging_utils.MLPerfLoggingCallback(logger=mllogger)
callback.train_samples_counter = 512000
callback.on_fit_start(Trainer(), None)
callback.on_validation_start(Trainer(), None)
callback.on_validation_end(Trainer(), None)
callback.on_fit_end(Trainer(), None)
"""


def reference_dir() -> Path | None:
    return reference_source("retired_benchmarks/stable_diffusion")


needs_reference = pytest.mark.skipif(reference_dir() is None, reason="shared reference source (mlcommons/training aa344c7) not present")


def run(tmp_path: Path, fid: float, hooked: bool, extra_env: dict | None = None) -> list[dict]:
    shims = tmp_path / "shims"
    for name, text in LIGHTNING_STAND_IN.items():
        (shims / name).parent.mkdir(parents=True, exist_ok=True)
        (shims / name).write_text(text)
    result = tmp_path / f"result_{fid}_{hooked}_{len(list(tmp_path.glob('result_*')))}.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MLPERF_WF_HOOKS", *SUBMISSION)}
    paths = [str(shims), str(reference_dir())]
    if hooked:
        paths = [str(HOOKS), str(PATCHES), *paths]
        env["MLPERF_WF_HOOKS"] = "mlperf_wf_stable_diffusion"
        env.update(SUBMISSION)
    env.update(PYTHONPATH=os.pathsep.join(paths), COMPLIANCE_FILE=str(result), PYTHONDONTWRITEBYTECODE="1", **(extra_env or {}))
    script = SCRIPT.replace("sys.argv_fid", repr(fid))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in result.read_text().splitlines() if ":::MLLOG " in line]


@needs_reference
def test_run_stop_carries_the_status_main_py_computes_and_the_configured_submission(tmp_path):
    lines = run(tmp_path, 85.0, hooked=True)
    reached = {e["key"]: e for e in lines}
    assert reached["run_stop"]["metadata"]["status"] == "success" and reached["run_stop"]["metadata"]["samples_count"] == 512000
    assert reached["submission_org"]["value"] == "Example Org" and reached["submission_platform"]["value"] == "example-8xH100"
    assert reached["submission_benchmark"]["value"] == "stable_diffusion"
    assert isinstance(reached["cache_clear"]["value"], bool)
    # another GPU task of a per-GPU launch (before Lightning's process group exists) logs nothing
    assert run(tmp_path, 85.0, hooked=True, extra_env={"SLURM_PROCID": "3", "SLURM_LOCALID": "3"}) == []
    missed = {e["key"]: e for e in run(tmp_path, 95.0, hooked=True)}
    assert missed["run_stop"]["metadata"]["status"] == "aborted"
    evals = [e for e in lines if e["key"] == "eval_accuracy"]
    assert [(e["metadata"]["metric"], e["metadata"]["samples_count"]) for e in evals] == [("FID", 512000), ("CLIP", 512000)]


@needs_reference
def test_without_the_patch_the_reference_logs_run_stop_without_a_status(tmp_path):
    own = {e["key"]: e for e in run(tmp_path, 85.0, hooked=False)}
    assert "status" not in (own["run_stop"]["metadata"] or {})
    assert own["submission_org"]["value"] == "reference_implementation" and "cache_clear" not in own
    # ... and every GPU task logs the preamble again
    assert any(e["key"] == "submission_org" for e in run(tmp_path, 85.0, hooked=False, extra_env={"SLURM_PROCID": "3"}))


OPEN_CLIP_STAND_IN = {
    # open_clip 2.7.0's factory resolves laion2b_s32b_b79k through the hub (pretrained.py:138, :303-312); offline and
    # with the checkpoint folder read-only, the hub download fails, as this stand-in does
    "open_clip/__init__.py": "from .factory import create_model_and_transforms\n",
    "open_clip/factory.py": (
        "def download_pretrained(cfg, force_hf_hub=False, cache_dir=None):\n"
        "    raise OSError(f'hf_hub_download: no {cfg[\"hf_hub\"]} in the hub cache of {cache_dir} and no connection')\n\n\n"
        "def create_model_and_transforms(name, pretrained=None, cache_dir=None):\n"
        "    return download_pretrained({'hf_hub': 'laion/CLIP-ViT-H-14-laion2B-s32B-b79K/'}, cache_dir=cache_dir)\n"
    ),
}


@pytest.mark.parametrize("hooked", [True, False])
def test_open_clip_loads_the_downloaded_weights_from_the_checkpoint_folder(tmp_path, hooked):
    """FrozenOpenCLIPEmbedder's and CLIPEncoder's create_model_and_transforms(..., cache_dir=/checkpoints/clip) take
    download_clip.sh's open_clip_pytorch_model.bin in that folder (with the patch), not the hub (without it)."""
    shims, weights = tmp_path / "shims", tmp_path / "clip"
    for name, text in OPEN_CLIP_STAND_IN.items():
        (shims / name).parent.mkdir(parents=True, exist_ok=True)
        (shims / name).write_text(text)
    weights.mkdir()
    (weights / "open_clip_pytorch_model.bin").write_bytes(b"weights")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MLPERF_WF_HOOKS")}
    paths = [str(HOOKS), str(PATCHES), str(shims)] if hooked else [str(shims)]
    env.update(PYTHONPATH=os.pathsep.join(paths), PYTHONDONTWRITEBYTECODE="1", **({"MLPERF_WF_HOOKS": "mlperf_wf_stable_diffusion"} if hooked else {}))
    script = f"import open_clip; print(open_clip.create_model_and_transforms('ViT-H-14', pretrained='laion2b_s32b_b79k', cache_dir={str(weights)!r}))"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    if hooked:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == str(weights / "open_clip_pytorch_model.bin")
    else:
        assert done.returncode != 0 and "no connection" in done.stderr
