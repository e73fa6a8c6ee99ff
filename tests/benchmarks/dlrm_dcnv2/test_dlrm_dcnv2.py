"""dlrm_dcnv2 pieces without Snakemake: the reference-layout generator, the per-day check, the AUROC, the
data design (a logistic regression stays below the target), the full-scale command against the reference
tree, and real submitters' logs through compliance and scoring."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from mlperf_wf.acquire import prepare
from mlperf_wf.benchmarks.dlrm_dcnv2 import criteo, trainer
from mlperf_wf.benchmarks.dlrm_dcnv2 import prepare as prep
from mlperf_wf.benchmarks.dlrm_dcnv2.hyperparameters import Hyperparameters
from mlperf_wf.cli import main
from mlperf_wf.config.registry import load_benchmark
from mlperf_wf.errors import UserError

ROOT = Path(__file__).resolve().parents[3]
SHARED = Path(__file__).resolve().parents[4] / "shared"
REFERENCE = SHARED / "reference-src" / "mlcommons-training-aa344c7" / "recommendation_v2" / "torchrec_dlrm"
FIXTURES = Path(os.environ.get("MLPERF_WF_FIXTURES", SHARED / "fixtures"))
SUBMITTED = sorted((FIXTURES / "mlperf_training_v5.1").glob("*/results/*/dlrm_dcnv2"))
SMALL = criteo.ClickLogShape(rows_per_train_day=300, rows_last_day=1000)


@pytest.fixture(scope="module")
def small_logs(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("criteo")
    criteo.generate(data, seed=3, shape=SMALL)
    return data


@pytest.fixture(scope="module")
def prepared(small_logs, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("prepared")
    for shard in prep.shards("tiny"):
        prep.prepare_shard(shard, {"data": small_logs}, root / "shards" / shard, "tiny")
        prepare.record_shard(root / "shards" / shard)
    prepare.assemble(prep.layout("tiny"), root / "shards", root / "dataset")
    return root / "dataset"


def test_generated_days_have_the_files_dtypes_and_shapes_the_reference_loader_opens(small_logs):
    names = {p.name for p in small_logs.iterdir()}
    expected = {f"day_{d}_{part}" for d in range(24) for part in ("dense.npy", "labels.npy", "sparse_multi_hot.npz")}
    assert names == expected | {"NOTICE.txt", "LICENSE.txt"}
    dense, labels = np.load(small_logs / "day_23_dense.npy"), np.load(small_logs / "day_23_labels.npy")
    assert dense.dtype == np.float32 and dense.shape == (1000, 13) and dense.min() >= np.log(3) - 1e-6  # log(x + 3)
    assert labels.dtype == np.int32 and labels.shape == (1000, 1) and set(np.unique(labels)) == {0, 1}
    with zipfile.ZipFile(small_logs / "day_0_sparse_multi_hot.npz") as archive:
        assert sorted(archive.namelist(), key=lambda n: int(n.split(".")[0])) == [f"{k}.npy" for k in range(26)]
        assert {info.compress_type for info in archive.infolist()} == {zipfile.ZIP_STORED}  # the loader memory-maps them
    members = np.load(small_logs / "day_0_sparse_multi_hot.npz")
    for k, hot in enumerate(SMALL.multi_hot_sizes):
        mapped = criteo.load_multi_hot(small_logs / "day_0_sparse_multi_hot.npz", k)
        assert mapped.dtype == np.int32 and mapped.shape == (300, hot)
        assert np.array_equal(mapped, members[str(k)])


def test_multi_hot_bags_start_with_the_one_hot_id_and_repeat_per_id():
    """As the reference's Multihot tables: a fixed bag per id, whose first element is the id."""
    teacher = criteo.Teacher(7, SMALL)
    _dense, _labels, sparse = criteo.make_day(teacher, np.random.default_rng(0), 2000)
    bags = sparse["20"]
    first = bags[:, 0]
    for i in np.unique(first)[:20]:
        assert len({tuple(row) for row in bags[first == i]}) == 1


def test_generator_is_deterministic_per_seed(tmp_path):
    a, b = criteo.Teacher(1, SMALL), criteo.Teacher(1, SMALL)
    day_a = criteo.make_day(a, np.random.default_rng([1, 0]), 500)
    day_b = criteo.make_day(b, np.random.default_rng([1, 0]), 500)
    assert np.array_equal(day_a[0], day_b[0]) and np.array_equal(day_a[1], day_b[1])
    assert not np.array_equal(day_a[1], criteo.make_day(criteo.Teacher(2, SMALL), np.random.default_rng([2, 0]), 500)[1])


def test_prepared_tree_is_the_flat_folder_the_reference_reads(prepared, small_logs):
    assert (prepared / "day_5_sparse_multi_hot.npz").read_bytes() == (small_logs / "day_5_sparse_multi_hot.npz").read_bytes()
    assert trainer.table_sizes_of(prepared) == criteo.table_sizes()
    val, test = trainer.read_days(prepared, [23], "val"), trainer.read_days(prepared, [23], "test")
    assert len(val) == len(test) == 500  # day 23 in halves, as MultiHotCriteoIterDataPipe splits it
    assert [ids.shape[1] for ids in val.sparse] == list(SMALL.multi_hot_sizes)


def test_a_day_with_the_wrong_dtype_or_ids_is_refused_in_one_line(small_logs, tmp_path):
    for name in criteo.day_files(0).values():
        (tmp_path / name).write_bytes((small_logs / name).read_bytes())
    np.save(tmp_path / "day_0_labels.npy", np.zeros((300, 1), dtype=np.int64))
    with pytest.raises(UserError, match=r"day_0_labels.npy: int64 \(300, 1\); the reference reads int32") as err:
        prep.check_day(tmp_path, 0, criteo.table_sizes())
    assert "\n" not in str(err.value)
    np.save(tmp_path / "day_0_labels.npy", np.zeros((300, 1), dtype=np.int32))
    tables = criteo.table_sizes()
    tables[20] = 3
    with pytest.raises(UserError, match=r"member 20.npy has ids in \[\d+, \d+\]; table 20 has 3 rows"):
        prep.check_day(tmp_path, 0, tables)
    with pytest.raises(UserError, match="unknown shard 'day_24'"):
        prep.prepare_shard("day_24", {"data": tmp_path}, tmp_path / "out", "tiny")


def test_auroc_is_the_pairwise_probability_with_ties_counted_half():
    rng = np.random.default_rng(0)
    scores = torch.from_numpy(rng.integers(0, 20, 300).astype(np.float32))  # many ties
    labels = torch.from_numpy((rng.random(300) < 0.4).astype(np.float32))
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairwise = ((pos[:, None] > neg[None, :]).double() + 0.5 * (pos[:, None] == neg[None, :]).double()).mean()
    assert trainer.auroc(scores, labels) == pytest.approx(float(pairwise), abs=1e-12)
    with pytest.raises(ValueError, match="both classes"):
        trainer.auroc(scores, torch.zeros(300))


def test_a_logistic_regression_plateaus_below_the_target_while_the_teacher_is_above_it():
    """The data design: the target needs feature interactions (a linear model of every id and dense feature
    plateaus far below 0.80275), and the labels carry enough signal to pass it (the teacher's own AUROC)."""
    teacher = criteo.Teacher(1515, criteo.ClickLogShape())
    rows, n_train = 150_000, 120_000
    dense, labels, sparse = criteo.make_day(teacher, np.random.default_rng([1515, 0]), rows)
    x, y = torch.from_numpy(dense), torch.from_numpy(labels.reshape(-1).astype(np.float32))
    offsets = np.concatenate([[0], np.cumsum(teacher.sizes)[:-1]])
    ids = torch.from_numpy(np.stack([sparse[str(k)][:, 0] for k in range(26)], 1).astype(np.int64) + offsets)  # the one-hot ids
    torch.manual_seed(0)
    weights, linear = torch.nn.Embedding(sum(teacher.sizes), 1), torch.nn.Linear(13, 1)
    torch.nn.init.zeros_(weights.weight)
    optimizer = torch.optim.Adagrad([*weights.parameters(), *linear.parameters()], lr=0.1)

    def logit(rows: slice | torch.Tensor) -> torch.Tensor:
        return linear(x[rows]).squeeze(1) + weights(ids[rows]).sum((1, 2))

    history = []
    for _epoch in range(6):
        order = torch.randperm(n_train)
        for start in range(0, n_train, 4096):
            batch = order[start : start + 4096]
            optimizer.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(logit(batch), y[batch]).backward()
            optimizer.step()
        with torch.no_grad():
            history.append(trainer.auroc(logit(slice(n_train, None)), y[n_train:]))
    assert 0.65 < history[-1] < 0.75 and history[-1] - history[-2] < 0.005, history  # a plateau, far below
    rng = np.random.default_rng([1515, 0])
    standard = rng.standard_normal((rows, 13))
    teacher_logit = torch.from_numpy(teacher.logit(standard, teacher.ids(rng, rows)))
    assert trainer.auroc(teacher_logit[n_train:], y[n_train:]) > 0.88


def test_the_model_is_the_reference_dlrm_dcn_shape():
    hp = Hyperparameters()
    model = trainer.DLRMDCN(criteo.table_sizes(), hp)
    width = hp.embedding_dim * 27
    assert [m.out_features for m in model.dense_arch if isinstance(m, torch.nn.Linear)] == [64, 16]
    assert len(model.crossnet.v) == hp.dcn_num_layers and model.crossnet.v[0].weight.shape == (hp.dcn_low_rank_dim, width)
    assert [m.out_features for m in model.over_arch if isinstance(m, torch.nn.Linear)] == [256, 64, 1]
    assert isinstance(model.over_arch[-1], torch.nn.Linear)  # no activation on the logit
    groups = trainer.parameter_groups(model, hp)
    assert [g["lr"] for g in groups] == [hp.learning_rate, hp.dense_learning_rate]
    assert len(groups[0]["params"]) == 26
    out = model(torch.zeros(4, 13), [torch.zeros(4, h, dtype=torch.long) for h in criteo.ClickLogShape().multi_hot_sizes])
    assert out.shape == (4,)


def test_hyperparameters_log_the_closed_adagrad_settings_the_loop_uses():
    hp = Hyperparameters()
    logged = hp.mllog(1)
    arguments = hp.adagrad_arguments()
    assert logged["opt_name"] == "adagrad" and logged["opt_base_learning_rate"] == arguments["lr"]
    assert logged["opt_adagrad_epsilon"] == arguments["eps"] == 1e-8
    assert logged["opt_adagrad_learning_rate_decay"] == arguments["lr_decay"] == 0
    assert logged["opt_weight_decay"] == arguments["weight_decay"] == 0
    assert logged["opt_adagrad_initial_accumulator_value"] == arguments["initial_accumulator_value"] == 0
    with pytest.raises(ValueError, match="must end at embedding_dim 16"):
        Hyperparameters(dense_arch_layer_sizes="64,32")


def test_every_flag_and_file_of_the_full_scale_command_exists_in_the_reference():
    if not REFERENCE.is_dir():
        pytest.skip(f"reference source not present: {REFERENCE}")
    bench = load_benchmark("dlrm_dcnv2")
    command = bench.full.command
    script = command[command.index("dlrm_main.py")]
    source = (REFERENCE / script).read_text()
    for word in command[command.index(script) + 1 :]:
        if word.startswith("--"):
            assert f'"{word.split("=")[0]}"' in source, word
    assert (REFERENCE / "Dockerfile").is_file() and "WORKDIR /workspace/torchrec_dlrm" in (REFERENCE / "Dockerfile").read_text()
    assert bench.full.workdir == "/workspace/torchrec_dlrm"
    # the table sizes and multi-hot sizes the preparation checks are README.MD's
    readme = (REFERENCE / "README.MD").read_text()
    assert ",".join(map(str, prep.NUM_EMBEDDINGS_FULL)) in readme and ",".join(map(str, prep.MULTI_HOT_SIZES_FULL)) in readme
    # the data loader opens the names the generator writes
    loader = (REFERENCE / "data" / "dlrm_dataloader.py").read_text()
    assert 'f"day_{i}_dense.npy"' in loader and 'sparse_part = "sparse_multi_hot.npz"' in loader


@pytest.mark.parametrize("folder", SUBMITTED or [FIXTURES / "absent"], ids=lambda p: p.parent.name)
def test_submitted_dlrm_dcnv2_logs_get_a_verdict_and_a_score(folder, capsys):
    if not folder.is_dir():
        pytest.skip(f"submitted logs fixture not present: {folder}")
    code = main(["score", str(folder), "--ruleset", "5.1.0", "--jobs", "1"])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert code == 0 and "dlrm_dcnv2:" in out.out and "10 runs" in out.out


# ---- the materialization in bounded memory (multihot.py) ----


def reference_tables(num_embeddings: list[int], multi_hot_sizes: list[int]) -> list[np.ndarray]:
    """multi_hot.py:81-112's uniform tables, the way the reference draws them (all at once, global seed 0)."""
    np.random.seed(0)
    tables = []
    for rows, hot in zip(num_embeddings, multi_hot_sizes, strict=True):
        ids = np.arange(rows)[:, np.newaxis]
        tables.append(np.concatenate((ids, np.random.randint(0, rows, size=(rows, hot - 1))), axis=-1).astype(np.int32))
    return tables


class Killed(Exception):
    pass


def test_tables_drawn_in_chunks_are_the_reference_tables_and_a_killed_draw_resumes(tmp_path, monkeypatch):
    from mlperf_wf.acquire.prepare import Checkpoint
    from mlperf_wf.benchmarks.dlrm_dcnv2 import multihot

    sizes, hots = [700, 5, 1300, 40], [3, 1, 12, 2]
    monkeypatch.setattr(multihot, "CHUNK_ROWS", 256)
    saves = []
    real_save = Checkpoint.save

    def dying_save(self, **values):
        saves.append(values)
        if len(saves) == 7:  # killed after the first chunk of table 2 was written, before it was recorded
            raise Killed
        real_save(self, **values)

    monkeypatch.setattr(Checkpoint, "save", dying_save)
    with pytest.raises(Killed):
        multihot.write_tables(tmp_path, sizes, hots, Checkpoint(tmp_path / "scratch", {"tables": 1}))
    monkeypatch.setattr(Checkpoint, "save", real_save)
    resumed = Checkpoint(tmp_path / "scratch", {"tables": 1})
    assert (resumed.get("feature"), resumed.get("rows")) == (2, 0)
    poisoned = np.load(multihot.table_file(tmp_path, 0), mmap_mode="r+")
    expected = reference_tables(sizes, hots)
    multihot.write_tables(tmp_path, sizes, hots, resumed)
    assert np.array_equal(np.load(multihot.table_file(tmp_path, 0)), expected[0])
    poisoned[:] = -1  # a finished table is not written again by a later resume
    poisoned.flush()
    multihot.write_tables(tmp_path, sizes, hots, Checkpoint(tmp_path / "scratch", {"tables": 1}))
    assert (np.load(multihot.table_file(tmp_path, 0)) == -1).all()
    for feature in range(1, 4):
        assert np.array_equal(np.load(multihot.table_file(tmp_path, feature)), expected[feature]), feature


def test_a_day_is_materialized_per_feature_into_the_reference_npz(tmp_path, monkeypatch):
    from mlperf_wf.acquire.prepare import Checkpoint
    from mlperf_wf.benchmarks.dlrm_dcnv2 import multihot

    monkeypatch.setattr(multihot, "CHUNK_ROWS", 100)
    sizes, hots = [50, 7] * 13, [3, 1] * 13
    tables = reference_tables(sizes, hots)
    one_hot = np.random.default_rng(0).integers(0, 1000, (450, 26)).astype(np.int32)
    files = []
    for feature in range(26):
        target = tmp_path / f"feature_{feature}.npy"
        multihot.materialize_feature(one_hot, feature, sizes[feature], tables[feature], target, Checkpoint(tmp_path / f"s{feature}", {"f": feature}))
        files.append(target)
    multihot.pack_day(files, tmp_path / "day_0_sparse_multi_hot.npz")
    # materialize_synthetic_multihot_dataset.py:133-140: embedding(ids % hash, table), np.savez
    expected = {str(k): tables[k][one_hot[:, k] % sizes[k]] for k in range(26)}
    np.savez(tmp_path / "reference.npz", **expected)
    for k in range(26):
        got = criteo.load_multi_hot(tmp_path / "day_0_sparse_multi_hot.npz", k)
        assert np.array_equal(got, expected[str(k)]) and got.dtype == np.int32
        assert np.array_equal(np.load(tmp_path / "reference.npz")[str(k)], got)
