"""Tiny-scale retinanet trainer: a plain-torch RetinaNet on the prepared OpenImages-layout tree, on CPU.

It follows the reference (``ssd/train.py``, ``engine.py``, ``coco_utils.py``, ``coco_eval.py``):
each split is read as ``get_openimages`` reads it, the COCO file ``<split>/labels/openimages-mlperf.json``
through pycocotools and the images from ``<split>/data`` (boxes from COCO x, y, w, h to x0, y0, x1, y1),
after ``run_start``; Adam with a linear warmup over ``warmup_epochs`` from ``warmup_factor``
(engine.py's warmup_lr_scheduler), horizontal flips (``--data-augmentation hflip``); after every
epoch the validation split is evaluated with pycocotools' COCOeval (bbox, the first stat,
mAP@[.5:.95]) and logged with ``epoch_num``; the run stops at the target read from the rules.
Every mllog value is the value the loop uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from mlperf_logging.mllog import constants

from mlperf_wf.benchmarks.retinanet.backbone import FILE_NAME as BACKBONE_FILE
from mlperf_wf.benchmarks.retinanet.detector import AnchorSpec, AnchorTargets, RetinaNet, detection_loss, postprocess
from mlperf_wf.benchmarks.retinanet.hyperparameters import Hyperparameters
from mlperf_wf.benchmarks.retinanet.openimages import LABELS_FILE
from mlperf_wf.errors import UserError
from mlperf_wf.run.harness import TinyRun

SPLIT_FOLDERS = {"train": "train", "val": "validation"}
"""coco_utils.get_openimages' PATHS: image_set -> folder under --data-path."""


@dataclass
class Split:
    """One split as tensors, with the pycocotools index its evaluation uses."""

    coco: object
    """pycocotools.coco.COCO of the split's labels file."""
    image_ids: list[int]
    images: torch.Tensor
    """(N, 3, H, W) float in [0, 1] (the reference's ToTensor)."""
    targets: list[dict[str, torch.Tensor]]
    """Per image: ``boxes`` (x0, y0, x1, y1) and ``labels`` (category ids)."""


def read_split(root: Path, image_set: str, image_size: int) -> Split:
    """``coco_utils.get_openimages(name='openimages-mlperf', root, image_set)``: pycocotools + the images folder."""
    import contextlib
    import io

    from PIL import Image
    from pycocotools.coco import COCO

    folder = root / SPLIT_FOLDERS[image_set]
    labels = folder / "labels" / LABELS_FILE
    if not labels.is_file():
        raise UserError(f"{labels}: missing; the prepared tree must hold <split>/labels/{LABELS_FILE} as FiftyOne exports it")
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(str(labels))
    image_ids = sorted(coco.getImgIds())
    pixels, targets = [], []
    for image_id in image_ids:
        info = coco.loadImgs(image_id)[0]
        with Image.open(folder / "data" / info["file_name"]) as image:
            array = np.asarray(image.convert("RGB"))
        if array.shape[:2] != (image_size, image_size):
            raise UserError(f"{folder / 'data' / info['file_name']}: {array.shape[1]}x{array.shape[0]} pixels; the tiny model takes {image_size}x{image_size}")
        pixels.append(torch.from_numpy(array.copy()))
        annotations = coco.loadAnns(coco.getAnnIds(imgIds=image_id))
        boxes = torch.tensor([a["bbox"] for a in annotations], dtype=torch.float32).reshape(-1, 4)
        boxes[:, 2:] += boxes[:, :2]
        targets.append({"boxes": boxes, "labels": torch.tensor([a["category_id"] for a in annotations], dtype=torch.long)})
    images = torch.stack(pixels).permute(0, 3, 1, 2).float().div_(255)
    return Split(coco, image_ids, images, targets)


def hflip_targets(targets: list[dict[str, torch.Tensor]], width: int) -> list[dict[str, torch.Tensor]]:
    """The boxes of transforms.RandomHorizontalFlip's flipped images: x mirrored."""
    return [
        {"boxes": torch.stack([width - t["boxes"][:, 2], t["boxes"][:, 1], width - t["boxes"][:, 0], t["boxes"][:, 3]], dim=1), "labels": t["labels"]}
        for t in targets
    ]


def build_model(num_classes: int, hp: Hyperparameters, backbone_dir: Path | None = None) -> RetinaNet:
    """The detector; its backbone loaded from ``backbone_dir`` (as retinanet_from_backbone loads the ImageNet weights) when given."""
    model = RetinaNet(num_classes, hp.image_size, hp.backbone_width, hp.fpn_channels, hp.head_depth, AnchorSpec(hp.anchor_sizes))
    if backbone_dir is not None:
        weights = backbone_dir / BACKBONE_FILE
        if not weights.is_file():
            raise UserError(f"{weights}: missing; the backbone input holds {BACKBONE_FILE}")
        state = torch.load(weights, map_location="cpu", weights_only=True)
        try:
            model.backbone.load_state_dict(state)
        except RuntimeError as err:
            first = str(err).splitlines()[1].strip() if len(str(err).splitlines()) > 1 else str(err)
            raise UserError(f"{weights}: does not fit a backbone of backbone_width {hp.backbone_width} ({first})") from None
        model.freeze_pretrained_backbone()
    return model


def detect(model: RetinaNet, split: Split, indices: list[int], hp: Hyperparameters) -> list[dict]:
    """COCO result records (image_id, category_id, bbox x, y, w, h, score) for the images at ``indices``."""
    model.eval()
    records = []
    with torch.no_grad():
        for start in range(0, len(indices), hp.eval_batch_size):
            batch = indices[start : start + hp.eval_batch_size]
            logits, deltas = model(split.images[batch])
            outputs = postprocess(model, logits, deltas, hp.image_size, hp.score_threshold, hp.candidates_per_image, hp.nms_threshold, hp.detections_per_image)
            for index, output in zip(batch, outputs, strict=True):
                for box, score, label in zip(output["boxes"].tolist(), output["scores"].tolist(), output["labels"].tolist(), strict=True):
                    records.append(
                        {"image_id": split.image_ids[index], "category_id": label, "bbox": [box[0], box[1], box[2] - box[0], box[3] - box[1]], "score": score}
                    )
    model.train()
    return records


def coco_map(split: Split, records: list[dict]) -> float:
    """COCOeval bbox stats[0] (mAP@[.5:.95]) of ``records`` against the split's labels, as coco_eval.py computes it."""
    import contextlib
    import io

    from pycocotools.cocoeval import COCOeval

    if not records:
        return 0.0
    with contextlib.redirect_stdout(io.StringIO()):
        detections = split.coco.loadRes(records)
        evaluator = COCOeval(split.coco, detections, "bbox")
        evaluator.params.imgIds = split.image_ids
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return float(evaluator.stats[0])


def learning_rate(hp: Hyperparameters, epoch: int, step: int, steps_per_epoch: int) -> float:
    """engine.py's warmup_lr_scheduler (linear from ``warmup_factor`` over ``warmup_epochs``), then constant as the reference's.

    No later step down: a x0.1 step at a fixed epoch froze any seed still short of the target there (seed 1237 crawled
    0.17-0.20 for the rest of its epochs where rounding made it an epoch slower)."""
    done = epoch * steps_per_epoch + step
    warmup_steps = hp.warmup_epochs * steps_per_epoch
    if done < warmup_steps:
        alpha = done / warmup_steps
        return hp.learning_rate * (hp.warmup_factor * (1 - alpha) + alpha)
    return hp.learning_rate


def train(run: TinyRun, hp: Hyperparameters) -> dict:
    """Train to the target (or ``epochs``); the harness logs the preamble and hyperparameters."""
    rank, world_size = run.rank, run.world_size
    local_batch = hp.global_batch_size // world_size
    torch.manual_seed(run.spec.seed)
    np.random.seed(run.spec.seed % 2**32)
    run.begin()
    # As the reference: no data is touched before run_start.
    train_split = read_split(run.spec.data_dir, "train", hp.image_size)
    val_split = read_split(run.spec.data_dir, "val", hp.image_size)
    train_split_classes = len(train_split.coco.getCatIds())
    run.event(constants.TRAIN_SAMPLES, len(train_split.image_ids))
    run.event(constants.EVAL_SAMPLES, len(val_split.image_ids))
    model: torch.nn.Module = build_model(train_split_classes, hp, run.spec.input("backbone"))
    detector = model
    targets_by_flip = {
        False: AnchorTargets.build(detector.anchors, train_split.targets),
        True: AnchorTargets.build(detector.anchors, hflip_targets(train_split.targets, hp.image_size)),
    }
    if world_size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=hp.learning_rate, weight_decay=0.0)
    generator = torch.Generator().manual_seed(run.spec.seed)
    steps_per_epoch = len(train_split.image_ids) // hp.global_batch_size  # drop_last=True, as the reference's BatchSampler
    status, accuracy, epoch, history = constants.ABORTED, float("nan"), 0, []
    val_mine = list(range(rank, len(val_split.image_ids), world_size))
    for epoch in range(hp.epochs):
        run.epoch_start(epoch_num=epoch)
        order = torch.randperm(len(train_split.image_ids), generator=generator)
        flips = torch.rand(len(order), generator=generator) < 0.5
        for step in range(steps_per_epoch):
            batch = order[step * hp.global_batch_size : (step + 1) * hp.global_batch_size][rank * local_batch : (rank + 1) * local_batch]
            flip = flips[batch]
            images = torch.where(flip[:, None, None, None], train_split.images[batch].flip(-1), train_split.images[batch])
            wanted = AnchorTargets(
                torch.where(flip[:, None], targets_by_flip[True].classes[batch], targets_by_flip[False].classes[batch]),
                torch.where(flip[:, None, None], targets_by_flip[True].deltas[batch], targets_by_flip[False].deltas[batch]),
            )
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(hp, epoch, step, steps_per_epoch)
            logits, deltas = model(images)
            loss = detection_loss(logits, deltas, wanted)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        run.epoch_stop(epoch_num=epoch)
        # engine.py evaluates after every epoch with epoch_num = epoch + 1.
        run.eval_start(epoch_num=epoch + 1)
        records = detect(detector, val_split, val_mine, hp)
        if world_size > 1:
            gathered: list[list[dict]] = [[] for _ in range(world_size)]
            torch.distributed.all_gather_object(gathered, records)
            records = [r for part in gathered for r in part]
        accuracy = coco_map(val_split, records)
        run.eval_result(accuracy, epoch_num=epoch + 1)
        history.append({"epoch_num": epoch + 1, "eval_accuracy": accuracy, "seconds": run.seconds, "loss": float(loss)})
        if run.spec.reached(accuracy):
            status = constants.SUCCESS
            break
    run.finish(status, epoch_num=epoch + 1)
    return {"status": status, "epoch_num": epoch + 1, "eval_accuracy": accuracy, "seconds": run.seconds, "history": history}
