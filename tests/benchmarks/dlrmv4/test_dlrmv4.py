"""dlrmv4 pieces without Snakemake: the Yambda cache generator, the preparation, the history gather, the metric,
the baselines that must stay below the target, the round patch and the facts checked in the pinned reference."""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from mlperf_wf.acquire import prepare
from mlperf_wf.benchmarks.dlrmv4 import prepare as prep
from mlperf_wf.benchmarks.dlrmv4 import trainer, yambda
from mlperf_wf.benchmarks.dlrmv4.hyperparameters import Hyperparameters
from mlperf_wf.config.registry import load_benchmark, load_dataset
from mlperf_wf.errors import UserError

ROOT = Path(__file__).resolve().parents[3]
FACTS = json.loads((ROOT / "src/mlperf_wf/benchmarks/dlrmv4/reference_facts.json").read_text())
SEED = load_dataset("yambda_5b", ROOT).tiny.seed


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("yambda")
    yambda.generate(out, SEED)
    return out


@pytest.fixture(scope="module")
def prepared(data, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("prepared")
    for shard in prep.shards("tiny"):
        prep.prepare_shard(shard, {"data": data}, root / "shards" / shard, "tiny")
        prepare.record_shard(root / "shards" / shard)
    prepare.assemble(prep.layout("tiny"), root / "shards", root / "dataset")
    return root / "dataset"


@pytest.fixture(scope="module")
def samples(prepared):
    hp = Hyperparameters()
    store = trainer.load_store(prepared)
    train_idx, held_out_idx = trainer.split(store, hp, seed=1)
    return store, hp, trainer.gather(store, train_idx, hp), trainer.gather(store, held_out_idx, hp)


def test_the_stand_in_has_the_published_paths_and_the_readers_dtypes(data):
    published = {f.path for f in load_dataset("yambda_5b", ROOT).files}
    written = {p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file()} - {"NOTICE.txt"}
    assert written == published
    cache = data / yambda.CACHE
    events = len(np.load(cache / "flat_uid.npy"))
    for name, dtype in prep.EVENT_DTYPES.items():
        array = np.load(cache / f"{name}.npy")
        assert str(array.dtype) == dtype and array.shape == (events,), name
    assert json.loads((cache / "store_meta.json").read_text()) == {"num_users": 64, "total_events": events}
    positions = np.load(cache / "positions_L4086.npy")
    uid = np.load(cache / "flat_uid.npy")
    start = np.load(cache / "user_start.npy")
    assert (positions - start[uid[positions]] >= yambda.HISTORY_FLOOR).all()  # real L4086 anchors
    assert (np.load(cache / "flat_event_types.npy")[positions] == yambda.LISTEN).all()
    assert (np.load(cache / "anchor_ts_L4086.npy") == np.load(cache / "flat_timestamps.npy")[positions]).all()


def test_the_generator_is_deterministic_per_seed():
    a, _ = yambda.make_events(1)
    b, _ = yambda.make_events(1)
    c, _ = yambda.make_events(2)
    assert all(np.array_equal(a[k], b[k]) for k in a) and not np.array_equal(a["item"], c["item"])


def test_preparation_refuses_a_column_of_the_wrong_length(data, tmp_path):
    broken = tmp_path / "broken"
    for path in prep.SHARDS["events"]:
        (broken / path).parent.mkdir(parents=True, exist_ok=True)
        (broken / path).symlink_to(data / path)
    (broken / prep.SHARDS["events"][1]).unlink()
    np.save(broken / prep.SHARDS["events"][1], np.zeros(3, dtype=np.int64))
    with pytest.raises(UserError, match=r"flat_item_ids\.npy: 3 entries; expected"):
        prep.prepare_shard("events", {"data": broken}, tmp_path / "out", "tiny")


def test_history_is_causal_interleaved_and_tagged(samples):
    _, hp, train, _ = samples
    assert train.history_items.shape[1] == hp.history_length
    ages = train.history_age[train.history_mask]
    assert (ages >= 0).all()
    # oldest first: ages fall along each row's real events
    rows = train.history_age.masked_fill(~train.history_mask, 10**12)
    assert (rows[:, 1:] <= rows[:, :-1]).all()
    assert set(torch.unique(train.history_actions[train.history_mask]).tolist()) == {1, 2, 4}


def test_window_auc_is_roc_auc():
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    labels = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    # 9 positive/negative pairs, 7 ordered correctly
    assert trainer.window_auc(scores, labels) == pytest.approx(7 / 9)


def test_baselines_stay_below_the_target_the_hidden_structure_does_not(samples):
    store, hp, train, held_out = samples
    assert trainer.popularity_auc(store, train, held_out) < 0.7
    assert trainer.evaluate(trainer.build_model(store, hp, seed=1), held_out) < 0.6  # untrained
    flat, world = yambda.make_events(SEED)
    arrays = yambda.cache_arrays(flat)
    positions = arrays["positions_L4086"]
    rows = np.searchsorted(arrays["unique_uids"], arrays["flat_uid"][positions])
    best = trainer.window_auc(
        torch.from_numpy(world.listen_plus_logit(rows, arrays["flat_item_ids"][positions])), torch.from_numpy(arrays["flat_is_listen_plus"][positions]).double()
    )
    assert best > 0.85


def test_a_few_training_steps_lower_the_loss(samples):
    store, hp, train, _ = samples
    model = trainer.build_model(store, hp, seed=1)
    torch.set_num_threads(1)
    batch = train.rows(slice(0, 64))
    adam = torch.optim.Adam([p for n, p in model.named_parameters() if not n.startswith("sparse.")], lr=0.01)
    sparse = trainer.RowWiseAdagrad(list(model.sparse.parameters()), lr=0.1)
    losses = []
    for _ in range(8):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(batch), batch.label)
        adam.zero_grad()
        sparse.zero_grad()
        loss.backward()
        adam.step()
        sparse.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.05


def test_the_eval_grid_is_the_rules_formula():
    hp = Hyperparameters(global_batch_size=8192, eval_every_data_pct=0.001)
    assert hp.eval_interval_samples(2290835423) == 2293760  # closed_dlrmv4.yaml at GBS 8192: 280 steps
    assert Hyperparameters().mllog(1)["max_sequence_length"] == Hyperparameters().max_sequence_length == 26


def test_the_definition_cites_the_pinned_reference_and_its_checked_files():
    bench = load_benchmark("dlrmv4")
    assert bench.reference.commit == FACTS["commit"] and bench.reference.path == FACTS["folder"]
    command = bench.full.command
    module = command[command.index("-m") + 1]
    assert module.replace(".", "/") + ".py" in FACTS["files"]
    assert "generative_recommenders/dlrm_v4/train/gin/yambda_5b.gin" in FACTS["files"]  # --dataset yambda-5b
    assert FACTS["command_flags"]["script"] == module.replace(".", "/") + ".py"
    assert {word for word in command if word.startswith("--")} <= set(FACTS["command_flags"]["defined"])
    assert "Dockerfile" in FACTS["files"] and "run_and_time.sh" in FACTS["files"]
    # the catalog's md5 pins agree with the reference's own md5 list
    pins = {f.path: f.md5 for f in load_dataset("yambda_5b", ROOT).files}
    assert all(pins[path] == md5 for path, md5 in FACTS["published_md5"].items())
    dockerfile = (ROOT / "src/mlperf_wf/benchmarks/dlrmv4/container/Dockerfile").read_text()
    assert FACTS["commit"] in dockerfile and "pull/889/head" in dockerfile


class FakeLogger:
    """The reference's MLPerfLogger surface the patch touches (mlperf_logging_utils.py:150-255 at a67b8459)."""

    constants = types.SimpleNamespace(INIT_STOP="init_stop", SUBMISSION_ORG="submission_org", SUBMISSION_DIVISION="submission_division")

    def __init__(self):
        self.lines = []

    def event(self, key, value=None, metadata=None):
        self.lines.append((key, value))

    def end(self, key, value=None, metadata=None, sync=False):
        self.lines.append((key, value))

    def submission_info(self):
        self.event(key=self.constants.SUBMISSION_ORG, value="AMD")
        self.event(key=self.constants.SUBMISSION_DIVISION, value="closed")

    def log_run_start(self, global_batch_size, seed):
        self.event(key="global_batch_size", value=global_batch_size)
        self.end(key=self.constants.INIT_STOP)


def test_the_round_patch_logs_the_missing_61_keys_before_init_stop(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "containers/hooks"))
    monkeypatch.syspath_prepend(str(ROOT / "src/mlperf_wf/benchmarks/dlrmv4/container/patches"))
    fake = types.ModuleType("generative_recommenders.dlrm_v4.train.mlperf_logging_utils")
    fake.MLPerfLogger = type("MLPerfLogger", (FakeLogger,), {})
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    monkeypatch.setenv("BATCH_SIZE", "1024")
    monkeypatch.setenv("SPARSE_A2A_BWD", "fp32")
    monkeypatch.setenv("MLPERF_SUBMISSION_ORG", "ExampleOrg")
    monkeypatch.delitem(sys.modules, "mlperf_wf_dlrmv4", raising=False)
    importlib.import_module("mlperf_wf_dlrmv4")
    logger = fake.MLPerfLogger()
    logger.submission_info()
    logger.log_run_start(8192, 1)
    logged = dict(logger.lines)
    assert logged["submission_org"] == "ExampleOrg" and logged["submission_division"] == "closed"
    assert logged["micro_batch_size"] == 1024 and logged["lowest_numerical_precision_in_comm"] == "fp16"
    assert logged["lowest_numerical_precision_in_linear"] == "bfloat16" and logged["tensor_parallelism"] == 1
    keys = [key for key, _ in logger.lines]
    assert keys.index("config_filename") < keys.index("init_stop") == len(keys) - 1
