"""retinanet's tiny tier: the FiftyOne-layout data, the fiftyone acquisition protocol, the detector and its metric.

One generated mirror is received through the protocol and prepared once per module; the end-to-end
Snakemake run (5 runs to mAP >= 0.340, compliance, report) is in tests/benchmarks/retinanet/test_retinanet_workflow.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from mlperf_wf.acquire import download, fiftyone
from mlperf_wf.acquire.fiftyone import ZooExpectations, receive_zoo_dataset
from mlperf_wf.acquire.verify import verify_dataset
from mlperf_wf.benchmarks.retinanet import detector, openimages, prepare, trainer
from mlperf_wf.benchmarks.retinanet.hyperparameters import Hyperparameters
from mlperf_wf.cli import main
from mlperf_wf.config.registry import load_dataset
from mlperf_wf.errors import ChecksumError, UserError

DATASET = load_dataset("openimages_mlperf")


def tiny_expectations() -> ZooExpectations:
    return ZooExpectations(DATASET.tiny.splits, DATASET.source.labels_file, tuple(DATASET.tiny.files), "tiny")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> Path:
    """The tiny mirror, as `mlperf-wf mirror` writes it: FiftyOne's folder itself."""
    root = tmp_path_factory.mktemp("mirror") / "openimages_mlperf"
    assert main(["mirror", "--dataset", "openimages_mlperf", "--out", str(root)]) == 0
    return root


@pytest.fixture(scope="module")
def received(mirror, tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("datasets") / "openimages_mlperf"
    receive_zoo_dataset(mirror.as_uri(), dest, tiny_expectations(), jobs=2)
    return dest


@pytest.fixture(scope="module")
def prepared(received, tmp_path_factory) -> Path:
    from mlperf_wf.acquire.prepare import assemble, record_shard

    shards = tmp_path_factory.mktemp("shards")
    for shard in prepare.shards("tiny"):
        prepare.prepare_shard(shard, {"data": received}, shards / shard, "tiny")
        record_shard(shards / shard)
    tree = tmp_path_factory.mktemp("prepared") / "dataset"
    assemble({k: v for k, v in prepare.layout("tiny").items()}, shards, tree)
    return tree


# ---- the data: FiftyOne's layout, COCO labels, held-out validation ----


def test_mirror_has_fiftyones_layout_and_the_coco_export_the_reader_opens(mirror):
    assert (mirror / "info.json").is_file()
    for split, count in DATASET.tiny.splits.items():
        for name in ("metadata/classes.csv", "metadata/hierarchy.json", "metadata/image_ids.csv", "labels/detections.csv"):
            assert (mirror / split / name).is_file(), name
        labels = json.loads((mirror / split / "labels" / "openimages-mlperf.json").read_text())
        assert len(labels["images"]) == count == len(list((mirror / split / "data").glob("*.jpg")))
        assert {c["name"] for c in labels["categories"]} == set(openimages.CLASSES)
        assert all(a["iscrowd"] == int(a["IsGroupOf"]) for a in labels["annotations"])
    train = {i["file_name"] for i in json.loads((mirror / "train/labels/openimages-mlperf.json").read_text())["images"]}
    validation = {i["file_name"] for i in json.loads((mirror / "validation/labels/openimages-mlperf.json").read_text())["images"]}
    assert not train & validation


def test_reader_gives_the_generated_boxes_as_x0_y0_x1_y1(prepared):
    split = trainer.read_split(prepared, "val", 64)
    assert split.images.shape == (DATASET.tiny.splits["validation"], 3, 64, 64)
    first = split.coco.loadAnns(split.coco.getAnnIds(imgIds=split.image_ids[0]))[0]
    x, y, w, h = first["bbox"]
    assert split.targets[0]["boxes"][0].tolist() == [x, y, x + w, y + h]


# ---- the fiftyone protocol ----


def test_received_folder_has_the_md5_list_record_and_passes_verify(mirror, received):
    record = json.loads((received / download.RECORD_NAME).read_text())
    assert len(record["files"]) == len(fiftyone.zoo_files(mirror))
    assert record["sha256"]["train/labels/openimages-mlperf.json"] == DATASET.tiny.files[0].sha256
    assert verify_dataset(received).files


def copy_of(mirror: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "fetch"
    shutil.copytree(mirror, copy)
    return copy


def test_a_missing_image_fails_naming_the_folder_count_and_allowed_and_copies_nothing(mirror, tmp_path, capsys):
    fetch = copy_of(mirror, tmp_path)
    next((fetch / "validation" / "data").iterdir()).unlink()
    dest = tmp_path / "datasets" / "openimages_mlperf"
    argv = ["download", "--dataset", "openimages_mlperf", "--dest", str(dest), "--source", f"file:{fetch}", "--expect", "tiny"]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    where = "mlperf_wf/benchmarks/retinanet/datasets/openimages_mlperf.yaml tiny.splits/tiny.files"
    assert err[-1].endswith(
        f"{fetch}/validation/data: holds 399 image files; {where} allows exactly 400 for validation (a fetch still running, or one cut short: rerun it)"
    )
    assert not dest.exists() and not download.staging_dir_for(dest).exists()
    assert len(list((fetch / "validation" / "data").iterdir())) == 399  # the fetch folder is left as it is


def test_a_changed_labels_file_fails_on_its_checksum(mirror, tmp_path):
    fetch = copy_of(mirror, tmp_path)
    labels = fetch / "train" / "labels" / "openimages-mlperf.json"
    data = json.loads(labels.read_text())
    data["annotations"][0]["bbox"][0] += 1
    labels.write_text(json.dumps(data))
    with pytest.raises(ChecksumError, match=r"openimages-mlperf\.json: sha256 [0-9a-f]{64}; tiny allows only ca782a51"):
        receive_zoo_dataset(fetch.as_uri(), tmp_path / "d" / "openimages_mlperf", tiny_expectations())


def test_the_catalog_counts_refuse_the_tiny_mirror(mirror, tmp_path):
    source = DATASET.source
    expected = ZooExpectations(source.splits, source.labels_file, tuple(DATASET.files), "catalog")
    with pytest.raises(ChecksumError, match="lists 3000 images; catalog allows exactly 1170301 for train"):
        receive_zoo_dataset(mirror.as_uri(), tmp_path / "d" / "openimages_mlperf", expected)


def test_a_killed_receive_keeps_what_it_verified_and_resumes(mirror, tmp_path, monkeypatch):
    dest = tmp_path / "datasets" / "openimages_mlperf"
    original = download.download_file
    done = []

    def dies_after_200(file, dest_, transport, progress=None):
        if len(done) >= 200:
            raise KeyboardInterrupt  # the job is killed
        done.append(file.path)
        return original(file, dest_, transport, progress)

    monkeypatch.setattr(download, "download_file", dies_after_200)
    with pytest.raises(KeyboardInterrupt):
        receive_zoo_dataset(mirror.as_uri(), dest, tiny_expectations(), jobs=1)
    staged = download.staging_dir_for(dest)
    kept = {p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()}
    assert kept == set(done) and not dest.exists()
    monkeypatch.setattr(download, "download_file", original)
    total = sum((mirror / p).stat().st_size for p in fiftyone.zoo_files(mirror))
    record = receive_zoo_dataset(mirror.as_uri(), dest, tiny_expectations(), jobs=1)
    assert record.bytes_transferred == total - sum((mirror / p).stat().st_size for p in kept)
    assert verify_dataset(dest).files


def test_no_fetch_folder_yet_says_how_to_fetch(tmp_path):
    with pytest.raises(UserError, match=r"no fetch folder yet\. Fetch it with the reference's own script"):
        receive_zoo_dataset((tmp_path / "absent").as_uri(), tmp_path / "d", tiny_expectations(), DATASET.source.instructions)


def test_preparation_refuses_labels_that_name_a_missing_image(received, tmp_path):
    split = tmp_path / "in" / "validation"
    shutil.copytree(received / "validation", split, symlinks=True)
    victim = sorted((split / "data").iterdir())[5]
    victim.unlink()
    with pytest.raises(UserError, match=f"lacks {victim.name} \\(1 of the 400 images"):
        prepare.prepare_shard("validation", {"data": tmp_path / "in"}, tmp_path / "out", "tiny")


# ---- the detector and its metric ----


def test_box_coder_round_trips_and_nms_matches_a_brute_force_greedy():
    generator = torch.Generator().manual_seed(0)
    anchors = detector.AnchorSpec((12.0, 24.0, 48.0)).anchors(64, (8, 16, 32))
    assert anchors.shape == (9 * (64 + 16 + 4), 4)
    boxes = anchors[:50] + torch.rand(50, 4, generator=generator) * 3
    assert torch.allclose(detector.decode(anchors[:50], detector.encode(anchors[:50], boxes)), boxes, atol=1e-4)
    scores = torch.rand(50, generator=generator)
    order = scores.argsort(descending=True).tolist()
    iou = detector.box_iou(boxes, boxes)
    expected = []
    for i in order:
        if all(iou[i, j] <= 0.5 for j in expected):
            expected.append(i)
    assert detector.nms(boxes, scores, 0.5).tolist() == expected


def test_matching_gives_every_box_an_anchor_and_ignores_the_middle_band():
    anchors = torch.tensor([[0.0, 0, 10, 10], [0, 0, 10, 22.2], [20, 20, 30, 30], [38, 38, 48, 48]])
    boxes = torch.tensor([[0.0, 0, 10, 10], [40, 40, 44, 44]])
    # IoU 1 -> box 0; IoU 0.45 (between 0.4 and 0.5) -> ignored; IoU 0 -> background; IoU 0.16 < 0.4, but the
    # second box's best anchor, so it is claimed anyway (allow_low_quality_matches).
    assert detector.match(anchors, boxes).tolist() == [0, -2, -1, 1]
    # The batched matching of a training set is the per-image one.
    built = detector.AnchorTargets.build(anchors, [{"boxes": boxes, "labels": torch.tensor([2, 1])}, {"boxes": boxes[:1], "labels": torch.tensor([0])}])
    assert built.classes.tolist() == [[2, -2, -1, 1], [0, -2, -1, -1]]
    assert torch.allclose(built.deltas[0, 3], detector.encode(anchors[3:4], boxes[1:2])[0]) and not built.deltas[1, 3].any()


def test_perfect_detections_score_one_and_the_baselines_stay_far_below_the_target(prepared):
    hp = Hyperparameters()
    split = trainer.read_split(prepared, "val", hp.image_size)
    truth = [{"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 1.0} for a in split.coco.dataset["annotations"]]
    assert trainer.coco_map(split, truth) == pytest.approx(1.0)
    # Shuffled signal: each image gets another image's true boxes.
    ids = split.image_ids
    shifted = {image: ids[(i + 1) % len(ids)] for i, image in enumerate(ids)}
    shuffled = [{**record, "image_id": shifted[record["image_id"]]} for record in truth]
    assert trainer.coco_map(split, shuffled) < 0.05
    # No training: the detector as initialised.
    torch.manual_seed(0)
    model = trainer.build_model(len(openimages.CLASSES), hp)
    untrained = trainer.coco_map(split, trainer.detect(model, split, list(range(len(ids))), hp))
    assert untrained < 0.05 < 0.340
