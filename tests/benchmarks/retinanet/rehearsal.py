"""retinanet's rehearsal: ``torchrun train.py`` of retired_benchmarks/retinanet (aa344c7) on the box.

The reference imports torchvision, which does not install here (its CUDA build breaks this venv), so the probe runs
the reference's own ``parse_args`` (compiled from ``ssd/train.py`` at the pinned commit) on the job's arguments, and
checks every file the reference opens before its first GPU step with the parsed values and the job's environment:
``coco_utils.get_openimages`` (``<data-path>/{train,validation}/data`` and ``labels/<dataset>.json``) and the backbone
that ``model/resnet.py`` loads through ``torch.hub.load_state_dict_from_url`` (``$TORCH_HOME/hub/checkpoints/<file of
model_urls>``). Its log goes through the reference's own ``ssd_logger`` (with the round patch), as ``train.py:118-121``
starts it.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import sys
from pathlib import Path

from tests.rehearsal.spec import Rehearsal

REHEARSAL = Rehearsal(
    benchmark="retinanet",
    image_files={"/workspace/single_stage_detector": "mlcommons-training-aa344c7/retired_benchmarks/retinanet"},
    entry=("train.py",),
    nodes=2,
    launchers=("pyxis", "docker"),
)


def published(dataset_id: str, folder: Path) -> None:
    """OpenImages as the reference's FiftyOne export writes it (the tiny generator's layout), and the backbone file."""
    if dataset_id == "openimages_mlperf":
        from mlperf_wf.benchmarks.retinanet import openimages

        scratch = folder.parent / f".{dataset_id}-generated"
        openimages.generate(scratch, seed=1401)
        for path in scratch.rglob("*"):
            if path.is_file():
                target = folder / path.relative_to(scratch)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(path, target)
        shutil.rmtree(scratch)
    elif dataset_id == "resnext50_32x4d_backbone":
        import torch

        torch.save({"conv1.weight": torch.zeros(1)}, folder / "resnext50_32x4d-7cdf4587.pth")
    else:
        raise ValueError(f"retinanet does not read {dataset_id}")


def probe(ctx) -> None:
    sys.argv = ["train.py", *ctx.argv]
    parse_args = ctx.reference_function("train.py", "parse_args", {"argparse": argparse, "random": random})
    args = parse_args()
    for split in ("train", "validation"):
        root = os.path.join(args.data_path, split)
        ctx.path(os.path.join(root, "data"), "coco_utils.get_openimages image folder", kind="dir")
        ctx.opens(os.path.join(root, "labels", f"{args.dataset}.json"), "coco_utils.get_openimages labels")
    urls = ctx.path("model/resnet.py", "model_urls").read_text()
    backbone = re.search(rf"'{args.backbone}':\s*'([^']+)'", urls)
    if not backbone:
        ctx.fail(f"model/resnet.py names no URL for backbone {args.backbone}")
    home = ctx.variable("TORCH_HOME", "torch.hub's cache root (load_state_dict_from_url)")
    ctx.opens(os.path.join(home, "hub", "checkpoints", backbone.group(1).rsplit("/", 1)[1]), "the backbone torch.hub loads")
    if args.output_dir:
        ctx.path(args.output_dir, "--output-dir (utils.mkdir; checkpoints)", kind="dir")
    sys.path.insert(0, str(ctx.cwd))
    from mlperf_logging.mllog import constants
    from ssd_logger import mllogger  # the reference's logger, with the round patch applied at its import

    if int(os.environ.get("RANK", "0")) == 0:
        mllogger.event(key=constants.SUBMISSION_BENCHMARK, value=constants.SSD)
        mllogger.event(key=constants.SUBMISSION_DIVISION, value=constants.CLOSED)
        mllogger.event(key=constants.SUBMISSION_STATUS, value=constants.ONPREM)
        mllogger.start(key=constants.INIT_START, sync=False)
    ctx.record("log", os.environ.get("COMPLIANCE_FILE", ""), "ssd_logger writes $COMPLIANCE_FILE", bool(os.environ.get("COMPLIANCE_FILE")))
